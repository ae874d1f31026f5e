package storetest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/jobs"
)

// Pause, resume, cancel, re-run: SetControl, Control, Release,
// RequeueFailed.

func (f *fixture) control(job string) string {
	f.t.Helper()
	st, err := f.s.Control(f.ctx, job)
	require.NoError(f.t, err, "Control %s", job)
	return st
}

func testControl(t *testing.T, f *fixture) {
	job := f.newJob("j", 0, "a")
	other := f.newJob("k", 0, "a")
	assert.Equal(t, jobs.ControlRunning, f.control(job), "a job never paused is running")
	assert.Equal(t, jobs.ControlRunning, f.control(JobID(t, "unknown")), "a job not stored (yet) is running")

	for _, state := range []string{jobs.ControlPaused, jobs.ControlPaused, jobs.ControlRunning, jobs.ControlCancelled, jobs.ControlRunning} {
		require.NoError(t, f.s.SetControl(f.ctx, job, state), "SetControl %s", state)
		assert.Equal(t, state, f.control(job))
		assert.Equal(t, jobs.ControlRunning, f.control(other), "another job's state changed")
	}
	err := f.s.SetControl(f.ctx, job, "stopped")
	require.Error(t, err, "an unknown control state")
	assert.Equal(t, jobs.ControlRunning, f.control(job), "a refused SetControl changed the state")

	// A job paused before its workflow stored it: the state waits for it.
	early := JobID(t, "early")
	require.NoError(t, f.s.SetControl(f.ctx, early, jobs.ControlPaused))
	_, err = f.s.CreateJob(f.ctx, Spec(early, 0, URL("a")), Entries(0, URL("a")))
	require.NoError(t, err)
	assert.Equal(t, jobs.ControlPaused, f.control(early))
}

func testExtendHalted(t *testing.T, f *fixture) {
	job := f.newJob("j", 0, "a", "b", "c", "d", "e", "f")
	f.take(job, "b1", 2)
	f.claim(job, "b1", "r1", 1)
	for _, state := range []string{jobs.ControlPaused, jobs.ControlCancelled} {
		require.NoError(t, f.s.SetControl(f.ctx, job, state))
		more, err := f.s.Extend(f.ctx, job, "b1", 1, 2)
		require.ErrorIs(t, err, jobs.ErrHalted, "Extend of a %s job", state)
		assert.Empty(t, more)
		assert.Equal(t, jobs.Stats{Seen: 6, Queued: 4}, f.stats(job), "a %s job handed URLs out", state)
		assert.Equal(t, 2, f.batch(job, "b1").Size)
	}
	// A stale holder learns it is fenced, not that the job is paused.
	_, err := f.s.Extend(f.ctx, job, "b1", 7, 2)
	requireStale(t, err, "Extend at a stale epoch of a cancelled job")

	require.NoError(t, f.s.SetControl(f.ctx, job, jobs.ControlRunning))
	more, err := f.s.Extend(f.ctx, job, "b1", 1, 2)
	require.NoError(t, err, "Extend once resumed")
	assert.Equal(t, Entries(0, URL("c"), URL("d")), more)
}

func testRelease(t *testing.T, f *fixture) {
	job := f.newJob("j", 0, "a", "b", "c", "d", "e", "f")
	_, got := f.take(job, "b1", 2)
	require.Equal(t, urls("a", "b"), got)
	f.claim(job, "b1", "r1", 1)
	more, err := f.s.Extend(f.ctx, job, "b1", 1, 2)
	require.NoError(t, err)
	require.Len(t, more, 2) // c, d
	f.record(job, "b1", "r1", 1, URL("a"), URL("x"))
	_, err = f.s.Record(f.ctx, jobs.Record{Job: job, Batch: "b1", Runner: "r1", Epoch: 1, URL: URL("c")}) // robots
	require.NoError(t, err)
	assert.Equal(t, jobs.Stats{Seen: 7, Queued: 3, Recorded: 1}, f.stats(job))

	require.NoError(t, f.s.SetControl(f.ctx, job, jobs.ControlPaused))
	n, err := f.s.Release(f.ctx, job, "b1", 1)
	require.NoError(t, err)
	assert.Equal(t, 2, n, "b and d were not finished")
	assert.Equal(t, jobs.Stats{Seen: 7, Queued: 5, Recorded: 1}, f.stats(job), "released URLs are queued again")
	b := f.batch(job, "b1")
	assert.Equal(t, jobs.BatchRunning, b.State, "the batch stays its holder's")
	assert.Equal(t, int64(1), b.Epoch, "Release does not fence")
	un, err := f.s.Unfinished(f.ctx, job, "b1")
	require.NoError(t, err)
	assert.Empty(t, un)

	// A retried Release finds nothing more to give back.
	n, err = f.s.Release(f.ctx, job, "b1", 1)
	require.NoError(t, err)
	assert.Zero(t, n)
	assert.Equal(t, 5, f.stats(job).Queued)

	// A page of a released URL that arrives late is not recorded by this
	// batch: the URL is queued again.
	_, err = f.s.Record(f.ctx, jobs.Record{Job: job, Batch: "b1", Runner: "r1", Epoch: 1, URL: URL("b"),
		Page: Page(job, "b1", "r1", 1, URL("b"), 0, "")})
	require.NoError(t, err)
	assert.False(t, f.isRecorded(job, URL("b")))

	done, err := f.s.FinishBatch(f.ctx, job, "b1", 1)
	require.NoError(t, err, "a batch whose unfinished URLs were released finishes")
	assert.Equal(t, jobs.BatchDone, done.State)

	// Resumed: the released URLs go out first (frontier order), then the
	// rest; each is recorded once.
	require.NoError(t, f.s.SetControl(f.ctx, job, jobs.ControlRunning))
	_, got = f.take(job, "b2", 10)
	assert.Equal(t, urls("b", "d", "e", "f", "x"), got)
	f.claim(job, "b2", "r2", 1)
	for _, u := range got {
		f.record(job, "b2", "r2", 1, u)
	}
	_, err = f.s.FinishBatch(f.ctx, job, "b2", 1)
	require.NoError(t, err)
	assert.ElementsMatch(t, urls("a", "b", "d", "e", "f", "x"), f.resultURLs(job))
	assert.Equal(t, jobs.Stats{Seen: 7, Queued: 0, Recorded: 6}, f.stats(job))
}

func testReleaseStale(t *testing.T, f *fixture) {
	job := f.newJob("j", 0, "a", "b", "c")
	f.take(job, "b1", 3)
	f.claim(job, "b1", "r1", 1)
	f.claim(job, "b1", "r2", 2) // a backup took the batch over
	_, err := f.s.Release(f.ctx, job, "b1", 1)
	requireStale(t, err, "Release by a fenced holder")
	un, err := f.s.Unfinished(f.ctx, job, "b1")
	require.NoError(t, err)
	assert.Len(t, un, 3, "a refused Release moved URLs")
	assert.Zero(t, f.stats(job).Queued)

	f.record(job, "b1", "r2", 2, URL("a"))
	_, err = f.s.FinishBatch(f.ctx, job, "b1", 2)
	require.Error(t, err, "b and c are not finished")
	n, err := f.s.Requeue(f.ctx, job, "b1", 3)
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	_, err = f.s.Release(f.ctx, job, "b1", 3)
	requireStale(t, err, "Release of a re-queued batch")
	assert.Equal(t, jobs.Stats{Seen: 3, Queued: 2, Recorded: 1}, f.stats(job), "counted once")
}

func testRequeueFailed(t *testing.T, f *fixture) {
	job := f.newJob("j", 0, "ok", "bad1", "bad2", "robots")
	f.take(job, "b1", 4)
	f.claim(job, "b1", "r1", 1)
	bad2 := Page(job, "b1", "r1", 1, URL("bad2"), 0, "HTTP 503")
	bad2.BodyRef = jobs.BodiesStore
	_, err := f.s.RecordAll(f.ctx, []jobs.Record{
		{Job: job, Batch: "b1", Runner: "r1", Epoch: 1, URL: URL("ok"), Page: Page(job, "b1", "r1", 1, URL("ok"), 0, "")},
		{Job: job, Batch: "b1", Runner: "r1", Epoch: 1, URL: URL("bad1"), Page: Page(job, "b1", "r1", 1, URL("bad1"), 0, "HTTP 404")},
		{Job: job, Batch: "b1", Runner: "r1", Epoch: 1, URL: URL("bad2"), Page: bad2, Body: jobs.CompressBody([]byte("busy"))},
		{Job: job, Batch: "b1", Runner: "r1", Epoch: 1, URL: URL("robots")},
	})
	require.NoError(t, err)
	_, err = f.s.FinishBatch(f.ctx, job, "b1", 1)
	require.NoError(t, err)
	assert.Equal(t, jobs.Stats{Seen: 4, Recorded: 3, Failed: 2}, f.stats(job))

	n, err := f.s.RequeueFailed(f.ctx, job)
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	assert.Equal(t, jobs.Stats{Seen: 4, Queued: 2, Recorded: 1, Failed: 0}, f.stats(job))
	assert.Equal(t, []string{URL("ok")}, f.resultURLs(job), "the failed pages left the results")
	_, err = f.s.Body(f.ctx, job, URL("bad2"))
	assert.ErrorIs(t, err, jobs.ErrNoBody, "a failed page's body left with it")
	refused, err := f.s.Refused(f.ctx, job)
	require.NoError(t, err)
	assert.Equal(t, 1, refused, "a URL refused by robots.txt is not re-run")

	n, err = f.s.RequeueFailed(f.ctx, job)
	require.NoError(t, err)
	assert.Zero(t, n, "a retried RequeueFailed queues nothing more")
	assert.Equal(t, 2, f.stats(job).Queued)

	// The re-run: bad1 succeeds, bad2 fails again; each URL is in the
	// results once.
	_, got := f.take(job, "b2", 10)
	assert.ElementsMatch(t, urls("bad1", "bad2"), got)
	f.claim(job, "b2", "r2", 1)
	f.record(job, "b2", "r2", 1, URL("bad1"))
	_, err = f.s.Record(f.ctx, jobs.Record{Job: job, Batch: "b2", Runner: "r2", Epoch: 1, URL: URL("bad2"),
		Page: Page(job, "b2", "r2", 1, URL("bad2"), 0, "HTTP 503")})
	require.NoError(t, err)
	_, err = f.s.FinishBatch(f.ctx, job, "b2", 1)
	require.NoError(t, err)
	assert.ElementsMatch(t, urls("ok", "bad1", "bad2"), f.resultURLs(job))
	assert.Equal(t, jobs.Stats{Seen: 4, Queued: 0, Recorded: 3, Failed: 1}, f.stats(job))
	for _, p := range f.results(job) {
		if p.URL == URL("bad1") {
			assert.Empty(t, p.Error, "the re-run's page replaced the failed one")
			assert.Equal(t, "b2", p.Batch)
		}
	}
	n, err = f.s.RequeueFailed(f.ctx, job)
	require.NoError(t, err)
	assert.Equal(t, 1, n, "bad2 again")

	_, err = f.s.RequeueFailed(f.ctx, JobID(t, "unknown"))
	assert.ErrorIs(t, err, jobs.ErrNoJob)
}

func testRequeueFailedMaxPages(t *testing.T, f *fixture) {
	job := f.newJob("j", 2, "a", "b", "c")
	_, got := f.take(job, "b1", 10)
	require.Equal(t, urls("a", "b"), got, "max_pages 2")
	f.claim(job, "b1", "r1", 1)
	f.record(job, "b1", "r1", 1, URL("a"))
	_, err := f.s.Record(f.ctx, jobs.Record{Job: job, Batch: "b1", Runner: "r1", Epoch: 1, URL: URL("b"),
		Page: Page(job, "b1", "r1", 1, URL("b"), 0, "timeout after 15s")})
	require.NoError(t, err)
	n, err := f.s.RequeueFailed(f.ctx, job)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	_, got = f.take(job, "b2", 10)
	assert.Equal(t, urls("b"), got, "the failed URL again, and still no more than max_pages URLs")
}
