package testsuite_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/cmdline/exitcode"
	"github.com/batoncrawl/baton/activities/crawl/demosite"
	"github.com/batoncrawl/baton/testsuite"
	"github.com/batoncrawl/baton/workflows"
)

// scheduleState is what `baton schedule show --output json` prints.
type scheduleState struct {
	Name           string      `json:"name"`
	Spec           string      `json:"spec"`
	Paused         bool        `json:"paused"`
	CatchupWindow  string      `json:"catchup_window"`
	Fired          int         `json:"fired"`
	SkippedOverlap int         `json:"skipped_overlap"`
	Backfilled     int         `json:"backfilled"`
	NextRuns       []time.Time `json:"next_runs"`
	Runs           []struct {
		Job           string    `json:"job"`
		Status        string    `json:"status"`
		Trigger       string    `json:"trigger"`
		ScheduledTime time.Time `json:"scheduled_time"`
		Baseline      string    `json:"baseline"`
	} `json:"runs"`
}

// A schedule end to end with real workers and a real Temporal dev server
// (on its database file): created with --every 2s, it fires; each firing is
// a job NAME-<UTC time> that completes with every page of the demo site,
// and each run's baseline is the previous completed run. Paused, it fires
// no more; a backfill runs past times as jobs tagged backfill; a trigger
// fires it at once; the schedule
// survives a restart of Temporal (still paused, the same timetable) and,
// resumed, fires again with the last run as baseline; `baton jobs
// --schedule` lists exactly its runs; deleted, it is gone.
func TestScheduleEndToEnd(t *testing.T) {
	c := testsuite.NewCluster(t, 2, 1, testsuite.FastTimers,
		testsuite.WithTemporalOptions(testsuite.WithTemporalDatabase()))
	site := demosite.New(demosite.Config{Pages: 30, Seed: 21, BrokenLinks: 1})
	srv := httptest.NewServer(site)
	t.Cleanup(srv.Close)
	c.StartAll()
	c.WaitElected(electTimeout)
	js := c.OpenStore()
	const name = "nightly"

	out, code := baton(c, "schedule", "create", name, "--every", "2s", "--catchup-window", "1m",
		srv.URL+"/", "--follow", "--depth", "100", "--max-pages", "0")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "schedule nightly created: every 2s, overlap skip, catch-up window 1m0s")

	show := func() (scheduleState, error) {
		var s scheduleState
		out, code := baton(c, "schedule", "show", name, "--output", "json")
		if code != 0 {
			return s, fmt.Errorf("exit %d: %s", code, out)
		}
		return s, json.Unmarshal([]byte(out[strings.Index(out, "{"):strings.LastIndex(out, "}")+1]), &s)
	}
	type run = struct {
		job, trigger, baseline string
		at                     time.Time
	}
	// completed lists the completed runs of trigger, oldest first.
	completed := func(s scheduleState, trigger string) []run {
		var out []run
		for _, r := range s.Runs {
			if r.Status == workflows.JobCompleted && r.Trigger == trigger {
				out = append(out, run{r.Job, r.Trigger, r.Baseline, r.ScheduledTime})
			}
		}
		slices.SortFunc(out, func(a, b run) int { return a.at.Compare(b.at) })
		return out
	}
	running := func(s scheduleState) int {
		n := 0
		for _, r := range s.Runs {
			if r.Status == workflows.JobRunning {
				n++
			}
		}
		return n
	}
	var s scheduleState
	waitFor := func(what string, timeout time.Duration, cond func(scheduleState) bool) {
		t.Helper()
		testsuite.Eventually(t, timeout, what, func() (bool, error) {
			var err error
			if s, err = show(); err != nil {
				return false, err
			}
			return cond(s), fmt.Errorf("%d fired, %d runs: %+v", s.Fired, len(s.Runs), s.Runs)
		})
	}
	waitFor("two scheduled runs completed", 3*time.Minute, func(s scheduleState) bool { return len(completed(s, workflows.TriggerScheduled)) >= 2 })

	out, code = baton(c, "schedule", "pause", name)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "schedule nightly paused")
	waitFor("paused, no run in flight", 2*time.Minute, func(s scheduleState) bool { return s.Paused && running(s) == 0 })
	firedAtPause, runsAtPause := s.Fired, len(s.Runs)

	// Every run is a job named from its time, complete with the site's
	// pages, whose baseline (in its spec) is the run before.
	runs := completed(s, workflows.TriggerScheduled)
	jobName := regexp.MustCompile(`^nightly-\d{8}T\d{6}Z$`)
	for i, r := range runs {
		assert.Regexp(t, jobName, r.job)
		assert.Equal(t, workflows.ScheduleJobID(name, r.at), r.job, "named from its scheduled time")
		assertEveryPageOnce(t, site, srv.URL, readResults(t, js, r.job))
		spec, err := js.Spec(context.Background(), r.job)
		require.NoError(t, err)
		want := ""
		if i > 0 {
			want = runs[i-1].job
		}
		assert.Equal(t, want, spec.Baseline, "baseline of %s", r.job)
		assert.Equal(t, want, r.baseline, "baseline shown for %s", r.job)
	}

	// Paused: three intervals pass without a firing. (A window to assert
	// an absence in, not a synchronisation.)
	for end := time.Now().Add(6 * time.Second); time.Now().Before(end); {
		p, err := show()
		require.NoError(t, err)
		require.Equal(t, firedAtPause, p.Fired, "a paused schedule fired")
		require.Len(t, p.Runs, runsAtPause, "a paused schedule started a run")
		time.Sleep(500 * time.Millisecond)
	}

	// A backfill of past times runs them now, as jobs tagged backfill.
	first := runs[0].at
	out, code = baton(c, "schedule", "backfill", name, "--from", first.Add(-5*time.Second).Format(time.RFC3339),
		"--to", first.Add(-time.Second).Format(time.RFC3339))
	require.Equal(t, 0, code, out)
	waitFor("a backfilled run completed", 2*time.Minute, func(s scheduleState) bool {
		return len(completed(s, workflows.TriggerBackfill)) >= 1 && running(s) == 0
	})
	bf := completed(s, workflows.TriggerBackfill)
	assert.True(t, bf[0].at.Before(first), "backfilled %v, before the first run %v", bf[0].at, first)
	assert.Equal(t, workflows.ScheduleJobID(name, bf[0].at), bf[0].job)
	assertEveryPageOnce(t, site, srv.URL, readResults(t, js, bf[0].job))
	assert.Equal(t, firedAtPause, s.Fired, "a backfill is not one of the schedule's own firings")
	assert.Equal(t, len(bf), s.Backfilled)

	// trigger fires it now, paused as it is: a firing of its own, named
	// from the time of the trigger, with the last run as baseline.
	triggered := time.Now().UTC().Truncate(time.Second)
	out, code = baton(c, "schedule", "trigger", name)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "schedule nightly triggered")
	waitFor("the triggered run completed", 2*time.Minute, func(s scheduleState) bool {
		return len(completed(s, workflows.TriggerScheduled)) > len(runs) && running(s) == 0
	})
	trig := completed(s, workflows.TriggerScheduled)[len(runs)]
	assert.False(t, trig.at.Before(triggered), "the triggered run is named from the trigger's time: %v < %v", trig.at, triggered)
	assert.Equal(t, runs[len(runs)-1].job, trig.baseline)
	assert.Equal(t, firedAtPause+1, s.Fired, "a trigger is one of the schedule's firings")
	assertEveryPageOnce(t, site, srv.URL, readResults(t, js, trig.job))
	runs = completed(s, workflows.TriggerScheduled)

	// Temporal restarted on its database: the schedule is still there,
	// paused, with its timetable.
	c.Temporal.Restart(t)
	waitFor("the schedule after Temporal's restart", time.Minute, func(s scheduleState) bool { return true })
	assert.True(t, s.Paused)
	assert.Equal(t, "every 2s", s.Spec)
	assert.Equal(t, "1m0s", s.CatchupWindow)
	last := runs[len(runs)-1]
	out, code = baton(c, "schedule", "resume", name)
	require.Equal(t, 0, code, out)
	waitFor("a run after the restart completed", 3*time.Minute, func(s scheduleState) bool {
		return len(completed(s, workflows.TriggerScheduled)) > len(runs)
	})
	next := completed(s, workflows.TriggerScheduled)[len(runs)]
	assert.Equal(t, last.job, next.baseline, "the run after the restart has the last run before it as baseline")
	assertEveryPageOnce(t, site, srv.URL, readResults(t, js, next.job))
	out, code = baton(c, "status", next.job)
	require.Equal(t, 0, code, out)
	assert.Regexp(t, `BASELINE\s+`+regexp.QuoteMeta(last.job), out, "baton status shows the baseline")

	t.Logf("%d firings (%d skipped for overlap), %d scheduled runs completed, %d backfilled", s.Fired, s.SkippedOverlap,
		len(completed(s, workflows.TriggerScheduled)), s.Backfilled)
	out, code = baton(c, "schedule", "show", name)
	require.Equal(t, 0, code, out)
	t.Logf("baton schedule show %s:\n%s", name, out)
	assert.Regexp(t, `FIRED\s+\d+ \(skipped for overlap: \d+, missed the catch-up window: 0; backfilled: \d+\)`, out)
	assert.Contains(t, out, next.job)

	out, code = baton(c, "schedule", "delete", name)
	require.Equal(t, 0, code, out)
	out, code = baton(c, "schedule", "show", name)
	assert.Equal(t, exitcode.NotFound, code, out)
	out, code = baton(c, "schedule", "list", "--output", "json")
	require.Equal(t, 0, code, out)
	assert.NotContains(t, out, `"name": "nightly"`)

	// baton jobs --schedule lists its runs, and only them (a deleted
	// schedule's too).
	startCrawl(c, "other", srv.URL+"/", "--max-pages", "1")
	testsuite.Eventually(t, time.Minute, "job other stored", func() (bool, error) {
		_, err := js.Spec(context.Background(), "other")
		return err == nil, err
	})
	out, code = baton(c, "jobs", "--schedule", name, "-q")
	require.Equal(t, 0, code, out)
	listed := strings.Fields(out)
	assert.NotContains(t, listed, "other")
	for _, r := range append(completed(s, workflows.TriggerScheduled), bf...) {
		assert.Contains(t, listed, r.job)
	}
}
