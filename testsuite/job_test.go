package testsuite_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/crawl/demosite"
	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/testsuite"
	"github.com/batoncrawl/baton/workflows"
)

// baton runs the starter CLI against the cluster and returns its output and
// exit code.
func baton(c *testsuite.Cluster, args ...string) (string, int) {
	all := append(c.StarterArgs(), args...)
	cmd := exec.Command(c.Starter, all...)
	out, _ := cmd.CombinedOutput()
	return string(out), cmd.ProcessState.ExitCode()
}

func startCrawl(c *testsuite.Cluster, id string, args ...string) *testsuite.Process {
	all := append(append(c.StarterArgs(), "crawl", "--id", id, "--wait"), args...)
	return testsuite.StartProcess(c.T, testsuite.ProcessSpec{Name: "baton-crawl-" + id, Path: c.Starter, Args: all})
}

// readResults reads a job's pages from the job store, as `baton results`
// does.
func readResults(t *testing.T, js jobs.Store, job string) []jobs.PageRecord {
	t.Helper()
	var out []jobs.PageRecord
	err := js.Results(context.Background(), job, func(p jobs.PageRecord) error {
		out = append(out, p)
		return nil
	})
	if errors.Is(err, jobs.ErrNoJob) {
		return nil
	}
	require.NoError(t, err)
	return out
}

// assertEveryPageOnce checks the results hold every reachable page of the
// site exactly once and none of the robots-disallowed ones.
func assertEveryPageOnce(t *testing.T, site *demosite.Site, base string, recs []jobs.PageRecord) {
	t.Helper()
	count := map[string]int{}
	for _, r := range recs {
		count[r.URL]++
	}
	var dups []string
	for u, n := range count {
		if n > 1 {
			dups = append(dups, fmt.Sprintf("%s×%d", u, n))
		}
	}
	assert.Empty(t, dups, "pages recorded more than once")
	var want []string
	for _, p := range site.Reachable(true) {
		u, err := crawl.NormalizeURL(base + p)
		require.NoError(t, err)
		want = append(want, u)
	}
	var got []string
	for u := range count {
		got = append(got, u)
	}
	slices.Sort(want)
	slices.Sort(got)
	assert.Equal(t, want, got, "the results are exactly the reachable pages")
	for _, u := range got {
		assert.NotContains(t, u, "/private/", "robots.txt-disallowed page crawled")
	}
	for _, p := range site.Disallowed() {
		assert.Zero(t, site.Hits(p), "disallowed %s was fetched", p)
	}
}

// End to end through the CLI: a crawl of the demo site with a Runner killed
// by SIGKILL mid-crawl; every reachable page is in the results exactly once,
// the disallowed ones are not.
func TestCrawlJobSurvivesRunnerKill(t *testing.T) {
	c := testsuite.NewCluster(t, 2, 1, testsuite.FastTimers)
	site := demosite.New(demosite.Config{Pages: 120, Seed: 7, BrokenLinks: 3, SlowPage: 300 * time.Millisecond, Latency: 15 * time.Millisecond})
	srv := httptest.NewServer(site)
	t.Cleanup(srv.Close)
	c.StartAll()
	c.WaitElected(electTimeout)

	p := startCrawl(c, "e2e", srv.URL+"/", "--follow", "--depth", "100", "--max-pages", "0",
		"--select", "price=.price", "--select", "heading=h1.title", "--batch-size", "8", "--timers", "fast")
	js := c.OpenStore()
	testsuite.Eventually(t, taskTimeout, "30 pages recorded", func() (bool, error) {
		return len(readResults(t, js, "e2e")) >= 30, nil
	})
	c.Kill(2)
	require.NoError(t, p.Wait(3*time.Minute), p.Logs())
	require.Equal(t, 0, p.ExitCode(), p.Logs())
	assert.Contains(t, p.Logs(), "job e2e completed")

	recs := readResults(t, js, "e2e")
	assertEveryPageOnce(t, site, srv.URL, recs)
	var notFound, priced int
	for _, r := range recs {
		if strings.Contains(r.URL, "/missing/") {
			notFound++
			assert.Equal(t, 404, r.StatusCode)
			assert.NotEmpty(t, r.Error)
		}
		if len(r.Fields["price"]) == 1 {
			priced++
		}
	}
	assert.Equal(t, len(site.Missing()), notFound)
	assert.Greater(t, priced, 100, "prices extracted")
	assert.True(t, c.Role(2).Dead(), "runner 2 was declared dead")

	out, code := baton(c, "status", "e2e")
	require.Equal(t, 0, code, out)
	assert.Regexp(t, `STATE\s+completed`, out)
	out, code = baton(c, "results", "e2e", "--format", "csv")
	require.Equal(t, 0, code, out)
	assert.Equal(t, len(recs)+1, strings.Count(out, "\n"), "a CSV header and one row per page")
	out, code = baton(c, "jobs")
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "e2e")

	// With no worker left, a finished job still answers: its status from
	// the workflow's history, its results and the job list from the store.
	c.Kill(1)
	c.Kill(3)
	out, code = baton(c, "status", "e2e", "--output", "json")
	require.Equal(t, 0, code, out, "a finished job's status needs no worker")
	assert.Contains(t, out, `"state": "completed"`)
	out, code = baton(c, "results", "e2e")
	require.Equal(t, 0, code, out)
	assert.Equal(t, len(recs), strings.Count(out, "\n"), "one JSON line per page")
	out, code = baton(c, "jobs")
	require.Equal(t, 0, code, out)
	assert.Regexp(t, `e2e\s+completed`, out)
}

// A Runner dies when no backup is left to take over: the job re-queues the
// unfinished part of its batch, and still records every page once.
func TestCrawlJobRequeuesWhenNoBackup(t *testing.T) {
	c := testsuite.NewCluster(t, 2, 1, testsuite.FastTimers)
	// 80 ms a page, so that a batch with 6 pages left cannot finish in the
	// moment between the check below and the kill.
	site := demosite.New(demosite.Config{Pages: 60, Seed: 3, BrokenLinks: 1, Latency: 80 * time.Millisecond})
	srv := httptest.NewServer(site)
	t.Cleanup(srv.Close)
	c.StartAll()
	c.WaitElected(electTimeout)
	c.Kill(3) // the only backup

	p := startCrawl(c, "orphan", srv.URL+"/", "--follow", "--depth", "100", "--max-pages", "0", "--batch-size", "10", "--timers", "fast")
	js := c.OpenStore()
	// The batch's progress is in the job store: wait for runner 2 to hold a
	// batch with plenty left.
	testsuite.Eventually(t, taskTimeout, "runner 2 to be well inside a batch", func() (bool, error) {
		tk := c.Task(2)
		if tk.Job == nil || !tk.Pending() {
			return false, nil
		}
		entries, err := js.Entries(context.Background(), "orphan", tk.Job.Batch)
		open := 0
		for _, e := range entries {
			if !e.Done {
				open++
			}
		}
		return open >= 6, err
	})
	c.Kill(2)
	require.NoError(t, p.Wait(3*time.Minute), p.Logs())
	require.Equal(t, 0, p.ExitCode(), p.Logs())
	assertEveryPageOnce(t, site, srv.URL, readResults(t, js, "orphan"))
	out, code := baton(c, "status", "orphan", "--output", "json")
	require.Equal(t, 0, code, out)
	var prog workflows.JobProgress
	require.NoError(t, json.Unmarshal([]byte(out[strings.Index(out, "{"):strings.LastIndex(out, "}")+1]), &prog))
	assert.GreaterOrEqual(t, prog.Requeued, 1, "the dead runner's batch was re-queued")
}

// Bad input to the CLI: a clear message, a non-zero exit, nothing submitted.
func TestCrawlCLIRejectsBadInput(t *testing.T) {
	c := testsuite.NewCluster(t, 1, 0, testsuite.FastTimers)
	c.StartAll()
	c.WaitElected(electTimeout)
	cases := []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"crawl", "ftp://127.0.0.1/x"}, 2, "SEED_URL 1"},
		{[]string{"crawl", "http://127.0.0.1:1/", "not a url"}, 2, "SEED_URL 2"},
		{[]string{"crawl", "http://127.0.0.1:1/", "--select", "p=a["}, 2, "--select p: invalid CSS selector"},
		{[]string{"crawl", "http://127.0.0.1:1/", "--depth", "-1"}, 2, "--depth: is -1"},
		{[]string{"crawl", "http://127.0.0.1:1/", "--select", "novalue"}, 2, "want name=SELECTOR"},
		{[]string{"crawl", "http://127.0.0.1:1/", "--bogus"}, 2, "unknown flag"},
		{[]string{"crawl"}, 2, "no seeds"},
		{[]string{"status", "no-such-job"}, 3, "no job"},
		{[]string{"cancel", "no-such-job"}, 3, "no running job"},
		{[]string{"results", "no-such-job"}, 3, "no job \"no-such-job\""},
		{[]string{"results", "../etc"}, 2, "job id"},
	}
	for _, tc := range cases {
		out, code := baton(c, tc.args...)
		assert.Equal(t, tc.code, code, "%v: %s", tc.args, out)
		assert.Contains(t, out, tc.msg, "%v", tc.args)
	}
	out, code := baton(c, "jobs")
	require.Equal(t, 0, code, out)
	assert.NotContains(t, out, "job-", "nothing was submitted")
}
