package testsuite_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/crawl/demosite"
	"github.com/batoncrawl/baton/activities/metadata"
	"github.com/batoncrawl/baton/roles"
	"github.com/batoncrawl/baton/testsuite"
	"github.com/batoncrawl/baton/workflows"
)

// temporalOutage is how long the Temporal server stays down mid-crawl.
const temporalOutage = 8 * time.Second

// statusJSON runs `baton status JOB --output json` and decodes it. ok is
// false unless the command exited 0 with the progress query answered by a
// worker (no fallback note).
func statusJSON(c *testsuite.Cluster, job string) (workflows.JobProgress, string, bool) {
	out, code := baton(c, "status", job, "--output", "json")
	var p workflows.JobProgress
	if code != 0 || strings.Contains(out, "note:") {
		return p, out, false
	}
	i, j := strings.Index(out, "{"), strings.LastIndex(out, "}")
	if i < 0 || j < i || json.Unmarshal([]byte(out[i:j+1]), &p) != nil {
		return p, out, false
	}
	return p, out, true
}

// The Temporal server is stopped mid-crawl and started again on the same
// database: the crawl completes with every page once, `crawl --wait`
// reports it, and `baton status` answers from the workers' progress query
// again soon after the restart (and after the end).
func TestCrawlSurvivesTemporalRestart(t *testing.T) {
	c := testsuite.NewCluster(t, 2, 1, testsuite.FastTimers,
		testsuite.WithTemporalOptions(testsuite.WithTemporalDatabase()))
	site := demosite.New(demosite.Config{Pages: 150, Seed: 5, BrokenLinks: 2, Latency: 40 * time.Millisecond})
	srv := httptest.NewServer(site)
	t.Cleanup(srv.Close)
	c.StartAll()
	c.WaitElected(electTimeout)

	p := startCrawl(c, "tr", srv.URL+"/", "--follow", "--depth", "100", "--max-pages", "0", "--batch-size", "10")
	js := c.OpenStore()
	testsuite.Eventually(t, taskTimeout, "20 pages recorded", func() (bool, error) {
		n := len(readResults(t, js, "tr"))
		return n >= 20, fmt.Errorf("%d pages", n)
	})
	_, out, ok := statusJSON(c, "tr")
	require.True(t, ok, "status before the restart: %s", out)

	c.Temporal.Stop()
	down := time.Now()
	before := len(readResults(t, js, "tr"))
	time.Sleep(temporalOutage) // the outage itself, not a synchronisation
	c.Temporal.Start(t)
	t.Logf("Temporal down for %v; %d pages before, %d after", time.Since(down).Round(time.Millisecond), before, len(readResults(t, js, "tr")))

	// While the crawl goes on, status answers from the progress query.
	restarted := time.Now()
	var prog workflows.JobProgress
	testsuite.Eventually(t, 30*time.Second, "baton status to answer after the restart", func() (bool, error) {
		var out string
		prog, out, ok = statusJSON(c, "tr")
		if !ok {
			t.Logf("%v after restart: %s", time.Since(restarted).Round(time.Millisecond), out)
		}
		return ok, fmt.Errorf("%s", out)
	})
	t.Logf("status answered %v after the restart: %s, %d recorded", time.Since(restarted).Round(time.Millisecond), prog.State, prog.Stats.Recorded)

	require.NoError(t, p.Wait(3*time.Minute), p.Logs())
	require.Equal(t, 0, p.ExitCode(), p.Logs())
	assert.Contains(t, p.Logs(), "job tr completed")
	assert.Contains(t, p.Logs(), "Temporal does not answer", "crawl --wait says it lost Temporal")
	assert.Contains(t, p.Logs(), "answer again", "and that it is back")
	recs := readResults(t, js, "tr")
	assertEveryPageOnce(t, site, srv.URL, recs)

	prog, out, ok = statusJSON(c, "tr")
	require.True(t, ok, out)
	assert.Equal(t, workflows.JobCompleted, prog.State)
	assert.Equal(t, len(recs), prog.Stats.Recorded)
	for i := 1; i <= 3; i++ {
		require.False(t, c.Process(i).Exited(), "%s exited: %s", testsuite.Name(i), c.Process(i).LogTail(4096))
	}
}

// crawlSite starts a crawl of a fresh demo site on c and waits until n
// pages are recorded.
func crawlSite(t *testing.T, c *testsuite.Cluster, job string, n int) (*demosite.Site, *httptest.Server, *testsuite.Process, func() int) {
	t.Helper()
	site := demosite.New(demosite.Config{Pages: 150, Seed: 9, BrokenLinks: 2, Latency: 40 * time.Millisecond})
	srv := httptest.NewServer(site)
	t.Cleanup(srv.Close)
	p := startCrawl(c, job, srv.URL+"/", "--follow", "--depth", "100", "--max-pages", "0", "--batch-size", "10")
	js := c.OpenStore()
	recorded := func() int { return len(readResults(t, js, job)) }
	testsuite.Eventually(t, taskTimeout, fmt.Sprintf("%d pages recorded", n), func() (bool, error) {
		got := recorded()
		return got >= n, fmt.Errorf("%d pages", got)
	})
	return site, srv, p, recorded
}

// The standalone ZooKeeper server is restarted (same port, same data)
// mid-crawl: the crawl completes with every page once, every worker is
// still running, and status answers.
func TestCrawlSurvivesZooKeeperRestart(t *testing.T) {
	c := testsuite.NewCluster(t, 2, 1, testsuite.FastTimers)
	c.StartAll()
	c.WaitElected(electTimeout)
	site, srv, p, recorded := crawlSite(t, c, "zr", 20)

	c.ZK.Restart(t)
	t.Logf("ZooKeeper restarted after %d pages", recorded())

	require.NoError(t, p.Wait(3*time.Minute), p.Logs())
	require.Equal(t, 0, p.ExitCode(), p.Logs())
	assert.Contains(t, p.Logs(), "job zr completed")
	js := c.OpenStore()
	assertEveryPageOnce(t, site, srv.URL, readResults(t, js, "zr"))
	prog, out, ok := statusJSON(c, "zr")
	require.True(t, ok, out)
	assert.Equal(t, workflows.JobCompleted, prog.State)
	for i := 1; i <= 3; i++ {
		require.False(t, c.Process(i).Exited(), "%s exited: %s", testsuite.Name(i), c.Process(i).LogTail(4096))
	}
	// Every instance still has a live role (a spurious fail-over on the
	// reconnect is allowed; a dead instance left behind is not).
	testsuite.Eventually(t, taskTimeout, "every instance to hold a live role", func() (bool, error) {
		for i := 1; i <= 3; i++ {
			if r := c.Role(i); r != roles.RoleRunner && r != roles.RoleBackup {
				return false, fmt.Errorf("%s is %q", testsuite.Name(i), r)
			}
		}
		return true, nil
	})
}

// A Runner is cut off from ZooKeeper (a TCP proxy in front of the server
// is cut) for longer than its session timeout while its process runs on:
// a backup declares it dead and takes its work over, the cut-off Runner is
// fenced (its workflows are closed by the cluster, its batch's epoch is
// raised in the job store, which it still reaches), and once it reaches
// ZooKeeper again it rejoins as a backup. The crawl records every page once.
func TestRunnerCutOffFromZooKeeperIsFencedAndRejoins(t *testing.T) {
	const session = 2 * time.Second
	c := testsuite.NewCluster(t, 2, 1, testsuite.FastTimers)
	px := testsuite.StartProxy(t, c.ZKHosts())
	c.Start(1)
	c.StartWith(2, []string{"--zk-hosts", px.Addr(), "--zk-session-timeout", session.String()})
	c.Start(3)
	c.WaitElected(electTimeout)
	site, srv, p, recorded := crawlSite(t, c, "cut", 15)
	testsuite.Eventually(t, taskTimeout, "runner 2 holding a batch", func() (bool, error) {
		tk := c.Task(2)
		return tk.Job != nil && tk.Pending(), nil
	})

	px.Cut()
	cutAt := time.Now()
	t.Logf("runner 2 cut off from ZooKeeper after %d pages", recorded())
	c.WaitRoles(taskTimeout, map[int]roles.Role{2: roles.RoleDeadRunner, 3: roles.RoleRunner})
	node, _, err := c.Meta.GetNode(context.Background(), testsuite.Name(2))
	require.NoError(t, err)
	assert.Equal(t, testsuite.Name(3), node.TakenOverBy, "the backup took the cut-off runner over")
	// Past the session timeout: the server has expired 2's session.
	testsuite.Eventually(t, 30*time.Second, "runner 2's session to expire", func() (bool, error) {
		_, _, err := c.Meta.Store.Get(context.Background(), c.Meta.AlivePath(testsuite.Name(2)))
		return errors.Is(err, metadata.ErrNotFound) && time.Since(cutAt) > session, err
	})
	require.False(t, c.Process(2).Exited(), "the cut-off worker runs on: %s", c.Process(2).LogTail(4096))

	px.Restore()
	c.WaitRoles(taskTimeout, map[int]roles.Role{2: roles.RoleBackup})
	t.Logf("runner 2 rejoined as a backup %v after the cut", time.Since(cutAt).Round(time.Millisecond))

	require.NoError(t, p.Wait(3*time.Minute), p.Logs())
	require.Equal(t, 0, p.ExitCode(), p.Logs())
	js := c.OpenStore()
	assertEveryPageOnce(t, site, srv.URL, readResults(t, js, "cut"))
	assert.Contains(t, c.Process(2).Logs(), "lifecycle was closed by the cluster (declared dead); registering again",
		"the cut-off runner learnt it was declared dead")
	for i := 1; i <= 3; i++ {
		require.False(t, c.Process(i).Exited(), "%s exited: %s", testsuite.Name(i), c.Process(i).LogTail(4096))
	}
}
