package testsuite_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/crawl/demosite"
	"github.com/batoncrawl/baton/activities/jobs/sqlstore"
	"github.com/batoncrawl/baton/testsuite"
)

// A crawl on PostgreSQL with every worker on its own data directory, as on
// separate machines: a Runner is SIGKILLed mid-batch, then PostgreSQL
// itself is SIGKILLed and restarted mid-crawl. Every reachable page is
// recorded exactly once, none is lost.
func TestCrawlOnPostgresSurvivesRunnerAndDatabaseKills(t *testing.T) {
	pg := testsuite.StartPostgres(t)
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(pg.LogPath())
			t.Logf("postgres log (end):\n%s", b[max(0, len(b)-8192):])
		}
	})
	c := testsuite.NewCluster(t, 2, 1, testsuite.FastTimers, testsuite.WithPostgres(pg))
	site := demosite.New(demosite.Config{Pages: 150, Seed: 11, BrokenLinks: 2, Latency: 20 * time.Millisecond})
	srv := httptest.NewServer(site)
	t.Cleanup(srv.Close)
	c.StartAll()
	c.WaitElected(electTimeout)

	p := startCrawl(c, "pg", srv.URL+"/", "--follow", "--depth", "100", "--max-pages", "0",
		"--select", "price=.price", "--batch-size", "10", "--timers", "fast")
	js := c.OpenStore()
	recorded := func() int { return len(readResults(t, js, "pg")) }
	testsuite.Eventually(t, taskTimeout, "20 pages recorded", func() (bool, error) {
		n := recorded()
		return n >= 20, fmt.Errorf("%d pages", n)
	})
	// Kill runner 2 while it holds a batch.
	testsuite.Eventually(t, taskTimeout, "runner 2 holding a batch", func() (bool, error) {
		tk := c.Task(2)
		return tk.Job != nil && tk.Pending(), nil
	})
	c.Kill(2)
	before := recorded()
	testsuite.Eventually(t, taskTimeout, "10 more pages after the runner kill", func() (bool, error) {
		n := recorded()
		return n >= before+10 || n >= len(site.Reachable(true)), fmt.Errorf("%d pages", n)
	})

	t.Logf("SIGKILL PostgreSQL after %d pages", recorded())
	pg.Kill()
	pg.Restart()
	require.NoError(t, p.Wait(3*time.Minute), p.Logs())
	require.Equal(t, 0, p.ExitCode(), p.Logs())
	assert.Contains(t, p.Logs(), "job pg completed")
	recs := readResults(t, js, "pg")
	assertEveryPageOnce(t, site, srv.URL, recs)
	assert.True(t, c.Role(2).Dead(), "runner 2 was declared dead")
	for i := 1; i <= 3; i++ {
		if i != 2 {
			require.False(t, c.Process(i).Exited(), "%s exited: %s", testsuite.Name(i), c.Process(i).LogTail(4096))
		}
	}

	// Read from "another machine": the CLI with only the store (no data
	// directory of a worker).
	out, code := baton(c, "results", "pg", "--format", "csv", "--data-dir", t.TempDir())
	require.Equal(t, 0, code, out)
	assert.Equal(t, len(recs)+1, strings.Count(out, "\n"), "a CSV header and one row per page")
}

// A worker or a CLI pointed at another store than its group's refuses to
// start, naming both stores, instead of hanging with a crawl whose batches
// it can never find.
func TestWorkerOnAnotherStoreRefusesToStart(t *testing.T) {
	c := testsuite.NewCluster(t, 1, 0, testsuite.FastTimers)
	c.StartAll()
	c.WaitElected(electTimeout)
	groupStore := c.OpenStore().Identity()

	other := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := sqlstore.OpenSQLite(ctx, other)
	require.NoError(t, err)
	otherID := st.Identity()
	require.NoError(t, st.Close())

	args := c.WorkerArgs(testsuite.Name(2))
	for i, a := range args {
		if a == "--data-dir" {
			args[i+1] = other
		}
	}
	w := testsuite.StartProcess(t, testsuite.ProcessSpec{Name: "wrong-store", Path: c.Worker, Args: args})
	err = w.Wait(30 * time.Second)
	require.NotErrorIs(t, err, testsuite.ErrWaitTimeout, "the worker must exit by itself: %s", w.Logs())
	assert.NotEqual(t, 0, w.ExitCode(), w.Logs())
	assert.Contains(t, w.Logs(), groupStore.ID, "names the group's store")
	assert.Contains(t, w.Logs(), otherID.ID, "names its own store")
	assert.Contains(t, w.Logs(), "--store")

	out, code := baton(c, "results", "some-job", "--data-dir", other)
	assert.Equal(t, 2, code, "the wrong store is a configuration error (exit 2): %s", out)
	assert.Contains(t, out, groupStore.ID)
	assert.Contains(t, out, otherID.ID)
}
