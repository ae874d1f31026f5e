package storetest

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/roles"
)

// recordTake records url in batch at epoch with links (depth 1), handing
// up to take of them to the batch (RecordTake); it returns the URLs taken.
func (f *fixture) recordTake(job, batch string, epoch int64, url string, take int, links ...string) ([]string, error) {
	f.t.Helper()
	_, got, err := f.s.RecordTake(f.ctx, []jobs.Record{{
		Job: job, Batch: batch, Runner: "r1", Epoch: epoch, URL: url,
		Page:  Page(job, batch, "r1", epoch, url, 0, "", links...),
		Links: Entries(1, links...),
	}}, take)
	var out []string
	for _, e := range got {
		out = append(out, e.URL)
	}
	return out, err
}

// RecordTake hands a group commit's new links of the hosts the batch
// holds to the batch, up to take, in URL order: in the batch (unfinished,
// counted taken, its size grown), not queued. Links of a host it does not
// hold, links there before, those past take, and any link while the job
// is paused, of a job with max_pages, or of a commit refused for its
// epoch are not taken.
func testRecordTake(t *testing.T, f *fixture) {
	job := f.politeJob("take", func(o *crawl.Options, _ *roles.Timers) { o.Parallelism, o.IgnoreRobots = 4, true }, hostURL("a.test", "s"))
	seed := f.takeAs(job, "b1", "r1", 1)
	require.Equal(t, []string{hostURL("a.test", "s")}, seed)
	require.Contains(t, f.leases(job, "b1"), "a.test", "the batch holds the seed's host")
	got, err := f.recordTake(job, "b1", 1, seed[0], 2,
		hostURL("a.test", "p3"), hostURL("a.test", "p1"), hostURL("b.test", "x"), hostURL("a.test", "p2"))
	require.NoError(t, err)
	assert.Equal(t, []string{hostURL("a.test", "p1"), hostURL("a.test", "p2")}, got, "the first two of its held host, in URL order")
	st := f.stats(job)
	assert.Equal(t, 2, st.Queued, "a.test/p3 and b.test/x queued (%+v)", st)
	assert.Equal(t, 3, f.batch(job, "b1").Size, "the batch grew by the links taken")
	un, err := f.s.Unfinished(f.ctx, job, "b1")
	require.NoError(t, err)
	var unfinished []string
	for _, e := range un {
		unfinished = append(unfinished, e.URL)
		assert.Equal(t, 1, e.Depth, "%s keeps its depth", e.URL)
	}
	assert.ElementsMatch(t, got, unfinished, "the links taken are the batch's unfinished URLs")

	// A link queued before stays queued; a new one is taken.
	got, err = f.recordTake(job, "b1", 1, hostURL("a.test", "p1"), 5, hostURL("a.test", "p3"), hostURL("a.test", "p4"))
	require.NoError(t, err)
	assert.Equal(t, []string{hostURL("a.test", "p4")}, got)
	assert.Equal(t, 2, f.stats(job).Queued)

	// Paused: nothing taken, the links queued.
	require.NoError(t, f.s.SetControl(f.ctx, job, jobs.ControlPaused))
	got, err = f.recordTake(job, "b1", 1, hostURL("a.test", "p2"), 5, hostURL("a.test", "p5"))
	require.NoError(t, err)
	assert.Empty(t, got, "nothing handed out while the job is paused")
	assert.Equal(t, 3, f.stats(job).Queued)
	require.NoError(t, f.s.SetControl(f.ctx, job, jobs.ControlRunning))

	// A commit refused for its epoch takes nothing (and queues nothing).
	f.claim(job, "b1", "r2", 2)
	got, err = f.recordTake(job, "b1", 1, hostURL("a.test", "p4"), 5, hostURL("a.test", "p6"))
	requireStale(t, err, "RecordTake at an old epoch")
	assert.Empty(t, got)
	assert.Equal(t, 3, f.stats(job).Queued)
	assert.Equal(t, 4, f.batch(job, "b1").Size)

	// A job with max_pages: its hand-outs are counted under its lock.
	mp := JobID(t, "take-max")
	spec := Spec(mp, 10, hostURL("a.test", "s"))
	spec.Options.AllowedDomains = nil
	spec.Options.Parallelism, spec.Options.IgnoreRobots = 4, true
	_, err = f.s.CreateJob(f.ctx, spec, Entries(0, hostURL("a.test", "s")))
	require.NoError(t, err)
	f.takeAs(mp, "m1", "r1", 1)
	got, err = f.recordTake(mp, "m1", 1, hostURL("a.test", "s"), 5, hostURL("a.test", "p1"))
	require.NoError(t, err)
	assert.Empty(t, got, "nothing taken in a job with max_pages")
	assert.Equal(t, 1, f.stats(mp).Queued)
}

// A pull from a short queue (a crawl's first waves: a few dozen URLs)
// takes its part of it while other batches of the job wait for their
// first URLs (start batches), so that a Runner whose slots are busy does
// not queue what the idle Runners' slots would fetch now; with none
// waiting, or from a long queue, it takes what it asks for.
func testPullSharesAShortQueue(t *testing.T, f *fixture) {
	links := make([]string, 30)
	for i := range links {
		links[i] = hostURL("a.test", fmt.Sprintf("l%02d", i))
	}
	job := f.politeJob("short", func(o *crawl.Options, _ *roles.Timers) { o.Parallelism, o.IgnoreRobots = 24, true }, hostURL("a.test", "s"))
	require.Len(t, f.takeAs(job, "b1", "r1", 1), 1)
	for _, id := range []string{"start1", "start2"} {
		_, err := f.s.OpenBatch(f.ctx, job, id)
		require.NoError(t, err, "OpenBatch %s", id)
		f.claim(job, id, "r-"+id, 1)
	}
	f.record(job, "b1", "r1", 1, hostURL("a.test", "s"), links...)
	require.Equal(t, 30, f.stats(job).Queued)

	assert.Len(t, f.pull(job, "b1", 1, 24, 8).Entries, 10, "a third of 30 while two batches wait")
	assert.Len(t, f.pull(job, "start1", 1, 24, 8).Entries, 10, "half of the 20 left while start2 waits")
	assert.Len(t, f.pull(job, "start2", 1, 24, 8).Entries, 10, "the rest: nobody else waits")
	assert.Zero(t, f.stats(job).Queued)

	// Nobody waits: a pull takes what it asks for.
	more := make([]string, 30)
	for i := range more {
		more[i] = hostURL("a.test", fmt.Sprintf("m%02d", i))
	}
	f.record(job, "b1", "r1", 1, links[0], more...)
	assert.Len(t, f.pull(job, "b1", 1, 24, 8).Entries, 24)

	// A long queue is not shared out: there is plenty for everyone.
	long := f.politeJob("long", func(o *crawl.Options, _ *roles.Timers) { o.Parallelism, o.IgnoreRobots = 24, true }, hostURLs("a.test", 300)...)
	require.Len(t, f.takeAs(long, "b1", "r1", 1), 1)
	_, err := f.s.OpenBatch(f.ctx, long, "start1")
	require.NoError(t, err, "OpenBatch")
	f.claim(long, "start1", "r-start1", 1)
	assert.Len(t, f.pull(long, "b1", 1, 24, 8).Entries, 24)
}
