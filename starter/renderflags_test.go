package main

import (
	"testing"

	"github.com/spf13/pflag"
)

// The default --render-wait leaves the wait to the engine (under auto, a
// page's fields end it); networkidle given on the command line is kept.
func TestRenderWaitGivenIsKept(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, ""},
		{[]string{"--render-wait", "networkidle"}, "networkidle"},
		{[]string{"--render-wait", "load"}, "load"},
	} {
		var r renderFlags
		fs := pflag.NewFlagSet("crawl", pflag.ContinueOnError)
		r.add(fs)
		if err := fs.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		if got := r.options().RenderWait; got != c.want {
			t.Errorf("%v: RenderWait %q, want %q", c.args, got, c.want)
		}
	}
}
