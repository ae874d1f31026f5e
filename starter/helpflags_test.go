package main

import (
	"io"
	"regexp"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// plainTypeWord is what --help may show between a flag's name and its
// usage: a type (string, duration), a placeholder (FILE) or the choices
// of an enum (table|json).
var plainTypeWord = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9_]*(\|[A-Za-z][A-Za-z0-9_]*)*)?$`)

// Every flag of every command reads well in --help: pflag takes the first
// back-quoted words of a usage as the flag's type name, so a usage that
// quotes a command (`baton cluster`) shows that command as the type.
func TestHelpShowsAPlainTypeForEveryFlag(t *testing.T) {
	root := newRootCmd(io.Discard, io.Discard)
	n := 0
	var walk func(*cobra.Command)
	walk = func(cmd *cobra.Command) {
		for _, fs := range []*pflag.FlagSet{cmd.LocalFlags(), cmd.PersistentFlags()} {
			fs.VisitAll(func(f *pflag.Flag) {
				n++
				if name, _ := pflag.UnquoteUsage(f); !plainTypeWord.MatchString(name) {
					t.Errorf("%s --%s: --help shows its type as %q (back-quoted words in the usage): %q",
						cmd.CommandPath(), f.Name, name, f.Usage)
				}
			})
		}
		for _, c := range cmd.Commands() {
			walk(c)
		}
	}
	walk(root)
	if n < 50 {
		t.Fatalf("only %d flags seen: the walk misses commands", n)
	}
}
