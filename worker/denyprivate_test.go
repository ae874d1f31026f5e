package worker

import (
	"os"
	"testing"

	"github.com/spf13/pflag"

	"github.com/batoncrawl/baton/activities/cmdline/flagenv"
)

// --deny-private (BATON_DENY_PRIVATE) is off by default: the operator
// turns it on for every job of the worker.
func TestDenyPrivateFlag(t *testing.T) {
	for _, c := range []struct {
		env  string
		args []string
		want bool
	}{
		{"", nil, false},
		{"", []string{"--deny-private"}, true},
		{"true", nil, true},
		{"true", []string{"--deny-private=false"}, false},
	} {
		t.Setenv("BATON_DENY_PRIVATE", c.env) // restored after the test
		if c.env == "" {
			os.Unsetenv("BATON_DENY_PRIVATE")
		}
		cfg := DefaultConfig()
		fs := pflag.NewFlagSet("w", pflag.ContinueOnError)
		cfg.AddFlags(fs)
		flagenv.Document(fs, "BATON")
		if err := fs.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		if err := flagenv.Bind(fs); err != nil {
			t.Fatal(err)
		}
		if cfg.DenyPrivate != c.want {
			t.Errorf("env %q args %q: deny-private %v, want %v", c.env, c.args, cfg.DenyPrivate, c.want)
		}
	}
}
