package worker

import (
	"bytes"
	"regexp"
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/cmdline/exitcode"
	"github.com/batoncrawl/baton/activities/crawler"
)

// Every flag of the worker reads well in --help: pflag takes the first
// back-quoted words of a usage as the flag's type name.
func TestWorkerHelpShowsAPlainTypeForEveryFlag(t *testing.T) {
	cfg := DefaultConfig()
	cmd := Program{}.command("baton-worker", &cfg)
	plain := regexp.MustCompile(`^([A-Za-z][A-Za-z0-9_]*(\|[A-Za-z][A-Za-z0-9_]*)*)?$`)
	n := 0
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		n++
		if name, _ := pflag.UnquoteUsage(f); !plain.MatchString(name) {
			t.Errorf("--%s: --help shows its type as %q (back-quoted words in the usage): %q", f.Name, name, f.Usage)
		}
	})
	require.Greater(t, n, 20, "the worker's flags")
}

// A worker binary of your own calls itself by its name and lists the
// crawlers it carries, the built-in one with Baton's version.
func TestOwnWorkerBinarySaysItsNameAndCrawlers(t *testing.T) {
	shop := crawler.New("shop", "1.4")
	p := Program{Name: "shop-worker", Crawlers: []*crawler.Crawler{shop}}
	for _, args := range [][]string{{"--version"}, {"--help"}} {
		var out, errw bytes.Buffer
		require.Equal(t, exitcode.OK, p.Execute(args, &out, &errw), errw.String())
		assert.Contains(t, out.String(), "shop-worker ", args)
		assert.NotContains(t, out.String(), "baton-worker", args)
		assert.Regexp(t, `builtin \S+, shop 1\.4`, out.String(), args)
		assert.NotContains(t, out.String(), "builtin (devel) (", args)
	}
	var out, errw bytes.Buffer
	assert.Equal(t, exitcode.Usage, p.Execute([]string{"--bogus"}, &out, &errw))
	assert.Contains(t, errw.String(), "shop-worker: unknown flag: --bogus")
	assert.Contains(t, errw.String(), "Run 'shop-worker --help' for usage.")
}
