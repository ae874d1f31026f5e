// Package flagenv lets the flags of global settings be set from
// environment variables: flag "zk-hosts" with prefix "BATON" reads
// BATON_ZK_HOSTS. A flag given on the command line wins over the
// environment, which wins over the default.
//
// Only the flags passed to Document are bound, and Document shows the
// variable in their usage: a variable never sets a flag its help does not
// name. Keep it to settings that hold for every call (where the servers
// are, the group, the store); a command's own flags (a job's --id, a
// crawl's --depth) are never read from the environment, so a stray
// BATON_ID cannot change what a command does.
package flagenv

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"
)

// annotation marks the flags Document bound to a variable.
const annotation = "flagenv"

// Name returns the environment variable of flag name.
func Name(prefix, name string) string {
	return prefix + "_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// Document binds every flag of fs to its environment variable and appends
// "(env X)" to its usage. Call it once, on the flag set of the global
// settings only.
func Document(fs *pflag.FlagSet, prefix string) {
	fs.VisitAll(func(f *pflag.Flag) {
		env := Name(prefix, f.Name)
		if f.Annotations == nil {
			f.Annotations = map[string][]string{}
		}
		f.Annotations[annotation] = []string{env}
		f.Usage += fmt.Sprintf(" (env %s)", env)
	})
}

// Bind sets every flag of fs that Document bound and that was not given on
// the command line from its environment variable. Call it after parsing;
// fs may hold other flags too (a command's own), which it leaves alone. It
// returns an error naming the variable whose value is bad.
func Bind(fs *pflag.FlagSet) error {
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		env := Variable(f)
		if err != nil || f.Changed || env == "" {
			return
		}
		if v, ok := os.LookupEnv(env); ok {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("environment variable %s=%q (for --%s): %w", env, v, f.Name, e)
			}
		}
	})
	return err
}

// Variable returns the environment variable Document bound f to, or "".
func Variable(f *pflag.Flag) string {
	if v := f.Annotations[annotation]; len(v) == 1 {
		return v[0]
	}
	return ""
}
