// Package flagenv lets every command-line flag be set from an environment
// variable: flag "zk-hosts" of a command with prefix "BATON" reads
// BATON_ZK_HOSTS. A flag given on the command line wins over the
// environment, which wins over the default.
package flagenv

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"
)

// Name returns the environment variable of flag name.
func Name(prefix, name string) string {
	return prefix + "_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// Bind sets every flag of fs that was not given on the command line from
// its environment variable, and appends "(env X)" to its usage. Call it
// after parsing. It returns an error naming the variable whose value is bad.
func Bind(fs *pflag.FlagSet, prefix string) error {
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed {
			return
		}
		env := Name(prefix, f.Name)
		if v, ok := os.LookupEnv(env); ok {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("environment variable %s=%q: %w", env, v, e)
			}
		}
	})
	return err
}

// Document appends the environment variable to every flag's usage.
func Document(fs *pflag.FlagSet, prefix string) {
	fs.VisitAll(func(f *pflag.Flag) {
		f.Usage += fmt.Sprintf(" (env %s)", Name(prefix, f.Name))
	})
}
