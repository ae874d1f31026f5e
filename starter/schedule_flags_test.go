package main

import (
	"context"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/cmdline/exitcode"
	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/jobs"
)

// crawlOnlyFlags are the flags of `baton crawl` that `baton schedule
// create` does not have: each firing names its job, never waits for it,
// has the group's timers and no secrets. (--output is the schedule's own,
// as every command's.)
var crawlOnlyFlags = map[string]bool{
	"id": true, "wait": true, "timers": true, "secrets-key-file": true,
	"quiet": true, "wait-for-runners": true, "baseline": true,
}

// Every flag of `baton crawl` but the job-only ones is a flag of `baton
// schedule create`, of the same type, default, help and deprecation; the
// ones a schedule refuses are there, hidden, so that it refuses them by
// name.
func TestScheduleCreateHasEveryCrawlFlag(t *testing.T) {
	g, tf := &globals{}, &temporalFlags{}
	crawlFs, schedFs := crawlCmd(g, tf).Flags(), scheduleCreateCmd(g, tf).Flags()
	n := 0
	crawlFs.VisitAll(func(cf *pflag.Flag) {
		if crawlOnlyFlags[cf.Name] {
			assert.Nil(t, schedFs.Lookup(cf.Name), "--%s is baton crawl's alone", cf.Name)
			return
		}
		n++
		sf := schedFs.Lookup(cf.Name)
		if !assert.NotNil(t, sf, "baton schedule create lacks --%s", cf.Name) {
			return
		}
		if _, refused := scheduleRefusals[cf.Name]; refused {
			assert.True(t, sf.Hidden, "--%s is refused: hidden in baton schedule create's help", cf.Name)
			return
		}
		assert.Equal(t, cf.Value.Type(), sf.Value.Type(), "--%s type", cf.Name)
		assert.Equal(t, cf.DefValue, sf.DefValue, "--%s default", cf.Name)
		assert.Equal(t, cf.Usage, sf.Usage, "--%s help", cf.Name)
		assert.Equal(t, cf.Deprecated, sf.Deprecated, "--%s deprecation", cf.Name)
		assert.Equal(t, cf.Shorthand, sf.Shorthand, "--%s shorthand", cf.Name)
	})
	assert.Greater(t, n, 30, "the walk misses baton crawl's flags")
	for name := range scheduleRefusals {
		assert.NotNil(t, schedFs.Lookup(name), "--%s is refused by name", name)
	}
}

// crawlSpec is the spec `baton crawl` with args would submit.
func crawlSpec(t *testing.T, g *globals, args []string) jobs.Spec {
	t.Helper()
	cf := &crawlFlags{def: crawl.DefaultOptions()}
	cmd := &cobra.Command{Use: "crawl"}
	cf.addFlags(cmd.Flags())
	cmd.SetContext(context.Background())
	require.NoError(t, cmd.ParseFlags(args), "baton crawl %v", args)
	sub, _, err := cf.submission(cmd, g, cmd.Flags().Args())
	require.NoError(t, err, "baton crawl %v", args)
	plan, err := sub.Build()
	require.NoError(t, err, "baton crawl %v", args)
	return plan.Spec
}

// templateSpec is the job template `baton schedule create NAME` with args
// would store.
func templateSpec(t *testing.T, g *globals, name string, args []string) jobs.Spec {
	t.Helper()
	var tpl crawlTemplate
	cmd := &cobra.Command{Use: "create"}
	tpl.add(cmd.Flags())
	cmd.SetContext(context.Background())
	require.NoError(t, cmd.ParseFlags(args), "baton schedule create %v", args)
	spec, err := tpl.spec(cmd, g, name, cmd.Flags().Args())
	require.NoError(t, err, "baton schedule create %v", args)
	return spec
}

// A schedule's job template is the job `baton crawl` submits with the same
// flags and seeds, its ID aside (each firing names its job).
func TestScheduleTemplateIsTheCrawlJob(t *testing.T) {
	g := &globals{group: "g1"}
	for name, args := range map[string][]string{
		"defaults": {"http://127.0.0.1:8000/"},
		"every setting": {"http://127.0.0.1:8000/", "http://127.0.0.1:8000/b", "--follow", "--depth", "3",
			"--select", "title=h1", "--label", "product=/page/\\d+$", "--select", "product:price=.price",
			"--follow-allow", "/page/", "--follow-deny", "/private/", "--links", "json:items.#.url",
			"--allow-domain", "127.0.0.1", "--keep-tracking-params", "--batch-size", "50", "--max-pages", "70",
			"--sitemap", "http://127.0.0.1:8000/sitemap.xml", "--user-agent", "shopbot/1.0",
			"--proxy", "http://127.0.0.1:3128", "--deny-private", "--timeout", "7s", "--max-body-bytes", "123456",
			"--ignore-robots", "--delay", "250ms", "--parallelism", "3", "--retries", "1",
			"--bodies-dir", "/srv/bodies", "--render", "auto", "--render-wait", "selector:.price",
			"--render-timeout", "9s", "--render-tabs", "2", "--render-resources", "image,font"},
		"deprecated body flag": {"--sitemap", "http://127.0.0.1:8000/sitemap.xml", "--max-body", "4096", "--render", "always",
			"--store-bodies"},
		"seed label": {"http://127.0.0.1:8000/", "--label", "start"},
	} {
		want := crawlSpec(t, g, args)
		got := templateSpec(t, g, "nightly", args)
		assert.Equal(t, scheduleTemplateID("nightly"), got.ID, name)
		got.ID = want.ID
		assert.Equal(t, want, got, name)
	}
}

// The flags a schedule refuses are refused by name, the others taken.
func TestScheduleTemplateRefusesSecretsAndSeedsFile(t *testing.T) {
	g := &globals{group: "g1"}
	for _, args := range [][]string{
		{"--cookie-file", "c.txt"}, {"--auth-file", "a.txt"}, {"--header-file", "h.txt"},
		{"--cookie", "s=1"}, {"--authorization", "Bearer=x"}, {"--header", "X-Key: 1"}, {"--seeds-file", "urls.txt"},
	} {
		var tpl crawlTemplate
		cmd := &cobra.Command{Use: "create"}
		tpl.add(cmd.Flags())
		require.NoError(t, cmd.ParseFlags(append(args, "http://127.0.0.1:8000/")))
		_, err := tpl.spec(cmd, g, "n", cmd.Flags().Args())
		if assert.Error(t, err, args) {
			assert.Contains(t, err.Error(), args[0]+": a schedule does not take it", args)
			assert.Equal(t, exitcode.Usage, exitcode.Of(err), args)
		}
	}
}

// A schedule's seed with a user:password or a --secret-params value is
// refused, naming what, never the value: the schedule keeps its job in
// Temporal, where a secret must not go.
func TestScheduleTemplateRefusesURLSecrets(t *testing.T) {
	g := &globals{group: "g1"}
	for _, args := range [][]string{
		{"http://ann:pw-sched-1@127.0.0.1:8000/"},
		{"--secret-params", "token", "http://127.0.0.1:8000/?token=tok-sched-2"},
	} {
		var tpl crawlTemplate
		cmd := &cobra.Command{Use: "create"}
		tpl.add(cmd.Flags())
		require.NoError(t, cmd.ParseFlags(args))
		_, err := tpl.spec(cmd, g, "n", cmd.Flags().Args())
		if assert.Error(t, err, args) {
			assert.Contains(t, err.Error(), "a schedule's job carries no secrets", args)
			assert.Contains(t, err.Error(), "of http://127.0.0.1:8000", args)
			assert.NotContains(t, err.Error(), "-sched-", args)
		}
	}
}
