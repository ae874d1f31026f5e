package testsuite_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/batoncrawl/baton/activities/cmdline/exitcode"
	"github.com/batoncrawl/baton/activities/crawl/demosite"
	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/testsuite"
	"github.com/batoncrawl/baton/workflows"
)

// requestLog counts the requests a site receives and when the last one
// started (as the site sees it: the moment its handler is entered).
type requestLog struct {
	h    http.Handler
	mu   sync.Mutex
	n    int
	last time.Time
}

func (l *requestLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	l.mu.Lock()
	l.n++
	l.last = time.Now()
	l.mu.Unlock()
	l.h.ServeHTTP(w, r)
}

func (l *requestLog) seen() (int, time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n, l.last
}

// stopBound is how soon after `baton pause` or `baton cancel` returns the
// site must have seen its last request of the job.
const stopBound = time.Second

// Pause, cancel, resume and rerun end to end, with real workers, at batch
// size 0 (a Runner's lease lasts while the frontier has work) and 10, on
// SQLite and on PostgreSQL: a crawl of a slow site (200 ms a page) is
// paused, and the site sees no request start more than a second after
// `baton pause` returned; resumed, then cancelled, and the same holds,
// `baton jobs`, `baton status` and Temporal say cancelled (Canceled);
// resumed again, the job completes with every page recorded once; `baton
// rerun --failed` fetches the broken links again and each stays recorded
// once. One cluster per store serves both batch sizes.
func TestJobPauseCancelResumeRerun(t *testing.T) {
	for _, store := range []string{"sqlite", "postgres"} {
		t.Run(store, func(t *testing.T) {
			opts := []testsuite.ClusterOption{testsuite.FastTimers}
			if store == "postgres" {
				opts = append(opts, testsuite.WithPostgres(testsuite.StartPostgres(t)))
			}
			c := testsuite.NewCluster(t, 2, 1, opts...)
			c.StartAll()
			c.WaitElected(electTimeout)
			tc := c.Temporal.Client(t)
			js := c.OpenStore()
			for _, batch := range []int{0, 10} {
				t.Run(fmt.Sprintf("batch-size-%d", batch), func(t *testing.T) {
					pauseCancelResumeRerun(t, c, tc, js, batch)
				})
			}
		})
	}
}

func pauseCancelResumeRerun(t *testing.T, c *testsuite.Cluster, tc client.Client, js jobs.Store, batch int) {
	site := demosite.New(demosite.Config{Pages: 2000, Seed: 17, BrokenLinks: 3, Latency: 200 * time.Millisecond})
	log := &requestLog{h: site}
	srv := httptest.NewServer(log)
	t.Cleanup(srv.Close)
	job := fmt.Sprintf("steer-b%d", batch)
	wid := workflows.JobWorkflowID(c.Group, job)
	ctx := context.Background()

	recorded := func() int {
		st, err := js.Stats(ctx, job)
		if err != nil {
			return 0
		}
		return st.Recorded
	}
	waitRecorded := func(n int) {
		t.Helper()
		testsuite.Eventually(t, 2*time.Minute, fmt.Sprintf("%d pages of job %s recorded", n, job), func() (bool, error) {
			got := recorded()
			return got >= n, fmt.Errorf("%d recorded", got)
		})
	}
	progress := func() (workflows.JobProgress, error) {
		var p workflows.JobProgress
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		v, err := tc.QueryWorkflow(qctx, wid, "", workflows.QueryProgress)
		if err != nil {
			return p, err
		}
		return p, v.Get(&p)
	}
	// control runs `baton pause|cancel JOB` and returns when it was run
	// and when it returned.
	control := func(cmd, want string) (run, returned time.Time) {
		t.Helper()
		run = time.Now()
		out, code := baton(c, cmd, job)
		returned = time.Now()
		require.Equal(t, 0, code, out)
		require.Contains(t, out, want, out)
		return run, returned
	}
	report := func(what string, run, returned time.Time) int {
		t.Helper()
		n, last := log.seen()
		lag := last.Sub(returned)
		t.Logf("%s, batch size %d: the last request started %v after `baton %s` returned (%v after it was run; the command took %v; bound %v); %d requests so far, %d pages recorded",
			what, batch, lag.Round(time.Millisecond), what, last.Sub(run).Round(time.Millisecond), returned.Sub(run).Round(time.Millisecond),
			stopBound, n, recorded())
		assert.LessOrEqual(t, lag, stopBound, "a request started more than %v after %s returned", stopBound, what)
		return n
	}
	// stopped waits until the job's batches have all ended, and checks
	// the site saw its last request within stopBound of the command's
	// return.
	stopped := func(what string, run, returned time.Time, state string) int {
		t.Helper()
		testsuite.Eventually(t, time.Minute, "job "+job+" "+state+" with no batch in flight", func() (bool, error) {
			p, err := progress()
			if err != nil {
				return false, err
			}
			return p.State == state && len(p.InFlight) == 0, fmt.Errorf("state %s, %d batches in flight", p.State, len(p.InFlight))
		})
		return report(what, run, returned)
	}

	// The site's parallelism holds for the job: 32, 16 for each Runner.
	p := startCrawl(c, job, srv.URL+"/", "--follow", "--depth", "100", "--max-pages", "0",
		"--batch-size", fmt.Sprint(batch), "--parallelism", "32")

	// Pause: nothing new is fetched; resume goes on.
	waitRecorded(150)
	pauseRun, paused := control("pause", "job "+job+" paused")
	hits := stopped("pause", pauseRun, paused, workflows.JobPaused)
	st, err := js.Stats(ctx, job)
	require.NoError(t, err)
	assert.Positive(t, st.Queued, "paused mid-crawl")
	out, code := baton(c, "status", job)
	require.Equal(t, 0, code, out)
	assert.Regexp(t, `STATE\s+paused`, out)
	n, _ := log.seen()
	assert.Equal(t, hits, n, "a request reached the site while the job was paused")
	atPause := recorded()
	control("resume", "job "+job+" running")

	// Cancel: the same, and the job ends cancelled everywhere.
	waitRecorded(atPause + 150)
	cancelRun, cancelled := control("cancel", "job "+job)
	require.NotErrorIs(t, p.Wait(time.Minute), testsuite.ErrWaitTimeout, p.Logs())
	assert.Equal(t, exitcode.JobFailed, p.ExitCode(), p.Logs())
	assert.Contains(t, p.Logs(), "job "+job+" ended cancelled")
	report("cancel", cancelRun, cancelled)
	desc, err := tc.DescribeWorkflowExecution(ctx, wid, "")
	require.NoError(t, err)
	assert.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED, desc.GetWorkflowExecutionInfo().GetStatus(), "Temporal's status")
	// A worker that dies holding one of the job's workflow tasks hands it
	// on within JobTaskTimeout, not Temporal's default 10 s.
	assert.Equal(t, workflows.JobTaskTimeout, desc.GetExecutionConfig().GetDefaultWorkflowTaskTimeout().AsDuration(), "the job's workflow task timeout (baton crawl)")
	var memoState string
	require.NoError(t, json.Unmarshal(desc.GetWorkflowExecutionInfo().GetMemo().GetFields()["state"].GetData(), &memoState))
	assert.Equal(t, workflows.JobCanceled, memoState, "the memo's state")
	out, code = baton(c, "jobs", "--output", "json")
	require.Equal(t, 0, code, out)
	var rows []struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	require.NoError(t, json.Unmarshal([]byte(out[strings.Index(out, "["):strings.LastIndex(out, "]")+1]), &rows), out)
	listed := map[string]string{}
	for _, r := range rows {
		listed[r.ID] = r.Status
	}
	assert.Equal(t, workflows.JobCanceled, listed[job], "baton jobs")
	out, code = baton(c, "status", job)
	require.Equal(t, 0, code, out)
	assert.Regexp(t, `STATE\s+cancelled`, out)

	// Resume of the cancelled job: it goes on as a new run and completes,
	// every page recorded once.
	out, code = baton(c, "resume", job)
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "goes on as a new run")
	testsuite.Eventually(t, 3*time.Minute, "job "+job+" completed after its resume", func() (bool, error) {
		out, code := baton(c, "status", job, "--output", "json")
		var p workflows.JobProgress
		if code != 0 || json.Unmarshal([]byte(out[strings.Index(out, "{"):strings.LastIndex(out, "}")+1]), &p) != nil {
			return false, fmt.Errorf("status: exit %d: %s", code, out)
		}
		return p.State == workflows.JobCompleted, fmt.Errorf("state %s, %d recorded", p.State, p.Stats.Recorded)
	})
	assertEveryPageOnce(t, site, srv.URL, readResults(t, js, job))
	st, err = js.Stats(ctx, job)
	require.NoError(t, err)
	assert.Equal(t, len(site.Missing()), st.Failed, "the broken links failed")

	// Rerun of the failed URLs: fetched again, each still recorded once.
	missingHits := map[string]int{}
	for _, m := range site.Missing() {
		missingHits[m] = site.Hits(m)
	}
	out, code = baton(c, "rerun", job, "--failed", "--wait")
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "job "+job+" completed")
	for _, m := range site.Missing() {
		assert.Equal(t, missingHits[m]+1, site.Hits(m), "%s fetched again once", m)
	}
	assertEveryPageOnce(t, site, srv.URL, readResults(t, js, job))
	st, err = js.Stats(ctx, job)
	require.NoError(t, err)
	assert.Equal(t, len(site.Missing()), st.Failed, "failed again, counted once")
	assert.Zero(t, st.Queued)
	desc, err = tc.DescribeWorkflowExecution(ctx, wid, "")
	require.NoError(t, err)
	assert.Equal(t, workflows.JobTaskTimeout, desc.GetExecutionConfig().GetDefaultWorkflowTaskTimeout().AsDuration(), "the job's workflow task timeout (baton rerun)")
}
