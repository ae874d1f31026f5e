package testsuite_test

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/crawl/demosite"
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
	testsuite.Eventually(t, 60*time.Second, "baton status to answer after the restart", func() (bool, error) {
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
