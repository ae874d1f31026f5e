package storetest

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/jobs"
)

// Batches: hand-out (TakeBatch, max_pages), claims and epochs, and how a
// batch ends (FinishBatch, Requeue, FailBatch).

func testTakeBatchFIFO(t *testing.T, f *fixture) {
	job := f.newJob("j", 0, "s0", "s1", "s2", "s3", "s4")
	assert.Equal(t, jobs.Stats{Seen: 5, Queued: 5}, f.stats(job))

	b1, got := f.take(job, "b1", 2)
	assert.Equal(t, 2, b1.Size)
	assert.Equal(t, jobs.BatchRunning, b1.State)
	assert.ElementsMatch(t, urls("s0", "s1"), got, "first batch: the first seeds")
	assert.Equal(t, jobs.Stats{Seen: 5, Queued: 3}, f.stats(job))

	f.claim(job, "b1", "r1", 1)
	// s0 links to new pages: they queue behind the seeds (breadth first).
	f.record(job, "b1", "r1", 1, URL("s0"), URL("l0"), URL("l1"))
	assert.Equal(t, jobs.Stats{Seen: 7, Queued: 5, Recorded: 1}, f.stats(job))

	_, got = f.take(job, "b2", 2)
	assert.ElementsMatch(t, urls("s2", "s3"), got, "second batch: the next seeds")
	_, got = f.take(job, "b3", 2)
	assert.ElementsMatch(t, urls("s4", "l0"), got, "third batch: the last seed, then the links in order")
	_, got = f.take(job, "b4", 2)
	assert.ElementsMatch(t, urls("l1"), got)
	assert.Equal(t, jobs.Stats{Seen: 7, Queued: 0, Recorded: 1}, f.stats(job))

	es := f.entries(job, "b3")
	for _, e := range es {
		want := 0
		if e.URL == URL("l0") {
			want = 1
		}
		assert.Equal(t, want, e.Depth, "depth of %s", e.URL)
		assert.False(t, e.Done)
	}
}

func testTakeBatchIdempotent(t *testing.T, f *fixture) {
	job := f.newJob("j", 0, seq("p", 10)...)
	b1, first := f.take(job, "b1", 4)
	require.Equal(t, 4, b1.Size)
	st := f.stats(job)
	assert.Equal(t, jobs.Stats{Seen: 10, Queued: 6}, st)

	// A retried call returns the same batch and takes nothing more.
	again, second := f.take(job, "b1", 4)
	assert.Equal(t, b1, again)
	assert.Equal(t, first, second, "the same URLs again")
	again, _ = f.take(job, "b1", 7) // even with another n
	assert.Equal(t, 4, again.Size)
	assert.Equal(t, st, f.stats(job), "a retried TakeBatch must not change the counters")

	// After a claim, the retry returns the batch as it is now.
	f.claim(job, "b1", "r1", 3)
	again, _ = f.take(job, "b1", 4)
	assert.Equal(t, int64(3), again.Epoch)
	assert.Equal(t, "r1", again.Holder)

	b2, rest := f.take(job, "b2", 100)
	assert.Equal(t, 6, b2.Size)
	assert.Empty(t, intersect(first, rest), "a URL was handed out twice")
	assert.Equal(t, 0, f.stats(job).Queued)
}

func testTakeBatchEmpty(t *testing.T, f *fixture) {
	job := f.newJob("j", 0, "s0")
	f.take(job, "b1", 10)
	f.claim(job, "b1", "r1", 1)

	b, got := f.take(job, "empty", 10)
	assert.Equal(t, 0, b.Size, "an empty frontier gives a batch of size 0")
	assert.Empty(t, got)
	bs, err := f.s.Batches(f.ctx, job, []string{"empty"})
	require.NoError(t, err)
	assert.Empty(t, bs, "an empty batch is not stored")

	// Not stored: the same id may take URLs queued later.
	f.record(job, "b1", "r1", 1, URL("s0"), URL("l0"))
	b, got = f.take(job, "empty", 10)
	assert.Equal(t, 1, b.Size)
	assert.Equal(t, urls("l0"), got)
}

// testOpenBatch: a start batch is stored running and empty (idempotent
// per ID), is not active until it pulls, pulls the links another batch
// recorded, and an empty one finishes.
func testOpenBatch(t *testing.T, f *fixture) {
	job := f.newJob("j", 0, "s0")
	f.take(job, "seed", 10)
	f.claim(job, "seed", "r1", 1)
	active := func() int {
		t.Helper()
		n, err := f.s.ActiveBatches(f.ctx, job)
		require.NoError(t, err, "ActiveBatches")
		return n
	}
	assert.Equal(t, 1, active(), "the seed's batch is active")

	for _, id := range []string{"start1", "start2"} {
		b, err := f.s.OpenBatch(f.ctx, job, id)
		require.NoError(t, err, "OpenBatch %s", id)
		assert.Equal(t, jobs.BatchInfo{Job: job, ID: id, State: jobs.BatchRunning}, b, "a start batch is running, empty, unheld")
		f.claim(job, id, "r-"+id, 1)
	}
	again, err := f.s.OpenBatch(f.ctx, job, "start1")
	require.NoError(t, err, "OpenBatch again")
	assert.Equal(t, "r-start1", again.Holder, "a retried OpenBatch returns the batch as it is")
	assert.Equal(t, 1, active(), "start batches with no URL are not active")
	assert.Empty(t, f.pull(job, "start1", 1, 16, 8).Entries, "nothing queued yet")

	f.record(job, "seed", "r1", 1, URL("s0"), URL("l0"), URL("l1"), URL("l2"))
	_, err = f.s.FinishBatch(f.ctx, job, "seed", 1)
	require.NoError(t, err, "FinishBatch seed")
	assert.Equal(t, 0, active(), "a finished batch is not active")
	assert.Equal(t, 3, f.stats(job).Queued)

	got := f.pull(job, "start1", 1, 16, 8).Entries
	require.Len(t, got, 2, "a start batch pulls the links another batch recorded, its part of them while start2 waits too")
	assert.Equal(t, 2, f.batch(job, "start1").Size)
	assert.Equal(t, 1, active(), "a start batch that pulled is active")

	fin, err := f.s.FinishBatch(f.ctx, job, "start2", 1)
	require.NoError(t, err, "an empty start batch finishes")
	assert.Equal(t, jobs.BatchDone, fin.State)
	assert.Equal(t, 0, fin.Size)
}

// crawlAll hands out and finishes batches of n until the frontier is
// empty; each page links to fanout new pages. It returns how often each
// URL was handed out.
func (f *fixture) crawlAll(job string, n, fanout int, maxPages int) map[string]int {
	t := f.t
	t.Helper()
	handed := map[string]int{}
	for i := 0; ; i++ {
		id := fmt.Sprintf("b%d", i)
		b, got := f.take(job, id, n)
		if b.Size == 0 {
			break
		}
		require.Less(t, i, 1000, "the crawl does not end")
		f.claim(job, id, "r1", 1)
		for _, u := range got {
			handed[u]++
			var links []string
			for k := range fanout {
				links = append(links, fmt.Sprintf("%s/%d", u, k))
			}
			f.record(job, id, "r1", 1, u, links...)
		}
		done, err := f.s.FinishBatch(f.ctx, job, id, 1)
		require.NoError(t, err)
		assert.Equal(t, jobs.BatchDone, done.State)
		st := f.stats(job)
		if maxPages > 0 {
			require.LessOrEqual(t, len(handed), maxPages, "more than max_pages distinct URLs handed out")
			require.LessOrEqual(t, st.Seen, maxPages, "Stats.Seen above max_pages")
		}
		require.Equal(t, st.Seen-len(handed), st.Queued, "Stats.Queued after batch %s: %+v, %d handed out", id, st, len(handed))
	}
	return handed
}

func testMaxPagesLinks(t *testing.T, f *fixture) {
	job := f.newJob("j", 5, "s0")
	handed := f.crawlAll(job, 3, 10, 5)
	assert.Len(t, handed, 5, "exactly max_pages URLs handed out when links abound")
	for u, k := range handed {
		assert.Equal(t, 1, k, "%s handed out %d times", u, k)
	}
	assert.Equal(t, jobs.Stats{Seen: 5, Queued: 0, Recorded: 5}, f.stats(job))
	assert.Len(t, f.results(job), 5)

	// Without max_pages the same crawl goes on (control).
	free := f.newJob("free", 0, "s0")
	f.take(free, "b0", 1)
	f.claim(free, "b0", "r1", 1)
	f.record(free, "b0", "r1", 1, URL("s0"), seq(URL("s0")+"/", 10)...)
	assert.Equal(t, jobs.Stats{Seen: 11, Queued: 10, Recorded: 1}, f.stats(free))
}

// testMaxPagesKnownLinks: links already in the frontier do not use up
// the quota of new ones (a page linking back to the seeds before its new
// links, in URL order, ended a 5-page job at 4).
func testMaxPagesKnownLinks(t *testing.T, f *fixture) {
	job := f.newJob("j", 5, "a", "b")
	f.take(job, "b0", 2)
	f.claim(job, "b0", "r1", 1)
	// a, b are known; c, d, e new: 2 + 3 = max_pages.
	got := f.record(job, "b0", "r1", 1, URL("a"), URL("a"), URL("b"), URL("c"), URL("d"), URL("e"))
	assert.Equal(t, 3, got.Added, "new links queued")
	assert.Equal(t, jobs.Stats{Seen: 5, Queued: 3, Recorded: 1}, f.stats(job))
	f.record(job, "b0", "r1", 1, URL("b"), URL("f"))
	_, more := f.take(job, "b1", 10)
	assert.ElementsMatch(t, []string{URL("c"), URL("d"), URL("e")}, more, "the new links, up to max_pages")
}

func testMaxPagesSeedsRequeue(t *testing.T, f *fixture) {
	job := f.newJob("j", 3, seq("s", 8)...)
	assert.Equal(t, jobs.Stats{Seen: 3, Queued: 3}, f.stats(job), "seeds beyond max_pages are not counted")

	b1, first := f.take(job, "b1", 2)
	assert.Equal(t, 2, b1.Size)
	assert.Equal(t, 1, f.stats(job).Queued)
	b2, second := f.take(job, "b2", 5)
	assert.Equal(t, 1, b2.Size, "the second batch stops at max_pages")
	assert.Equal(t, 0, f.stats(job).Queued)
	b3, _ := f.take(job, "b3", 5)
	assert.Equal(t, 0, b3.Size, "nothing beyond max_pages")

	// Re-queued URLs count again only once: they are the same URLs.
	f.claim(job, "b1", "r1", 1)
	n, err := f.s.Requeue(f.ctx, job, "b1", 2)
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	assert.Equal(t, jobs.Stats{Seen: 3, Queued: 2}, f.stats(job))
	b4, again := f.take(job, "b4", 10)
	assert.Equal(t, 2, b4.Size)
	assert.ElementsMatch(t, first, again, "the re-queued URLs are handed out again")
	b5, _ := f.take(job, "b5", 10)
	assert.Equal(t, 0, b5.Size)
	all := append(append([]string{}, first...), second...)
	assert.Len(t, uniq(all), 3)
}

func testClaimEpochs(t *testing.T, f *fixture) {
	job := f.newJob("j", 0, "a", "b")
	b, got := f.take(job, "b1", 10)
	require.Len(t, got, 2)
	assert.Equal(t, int64(0), b.Epoch)

	_, err := f.s.Claim(f.ctx, job, "nope", "r1", 1)
	require.Error(t, err)
	assert.True(t, errors.Is(err, jobs.ErrNoBatch), "Claim of an unknown batch: want ErrNoBatch, got %v", err)

	c := f.claim(job, "b1", "r1", 1)
	assert.Equal(t, "r1", c.Holder)
	assert.Equal(t, int64(1), c.Epoch)
	assert.Equal(t, c, f.claim(job, "b1", "r1", 1), "a retried Claim is harmless")
	assert.Equal(t, "r1", f.batch(job, "b1").Holder)

	c = f.claim(job, "b1", "r2", 5)
	assert.Equal(t, "r2", c.Holder)
	assert.Equal(t, int64(5), c.Epoch)

	_, err = f.s.Claim(f.ctx, job, "b1", "r3", 4)
	requireStale(t, err, "Claim at a lower epoch")
	assert.Equal(t, jobs.BatchInfo{Job: job, ID: "b1", Holder: "r2", Epoch: 5, Size: 2, State: jobs.BatchRunning}, f.batch(job, "b1"),
		"a refused Claim changes nothing")

	// The old holder is fenced: nothing it writes lands.
	st := f.stats(job)
	_, err = f.s.Record(f.ctx, jobs.Record{Job: job, Batch: "b1", Runner: "r1", Epoch: 1, URL: URL("a"),
		Page: Page(job, "b1", "r1", 1, URL("a"), 0, "", URL("x")), Links: Entries(1, URL("x"))})
	requireStale(t, err, "Record at the old epoch")
	assert.False(t, f.isRecorded(job, URL("a")), "a stale Record wrote its page")
	assert.Equal(t, st, f.stats(job), "a stale Record changed the counters")
	assert.Empty(t, f.results(job))
	for _, e := range f.entries(job, "b1") {
		assert.False(t, e.Done, "a stale Record finished %s", e.URL)
	}
	_, err = f.s.FinishBatch(f.ctx, job, "b1", 1)
	requireStale(t, err, "FinishBatch at the old epoch")

	// The new holder writes.
	f.record(job, "b1", "r2", 5, URL("a"))
	f.record(job, "b1", "r2", 5, URL("b"))
	_, err = f.s.FinishBatch(f.ctx, job, "b1", 4)
	requireStale(t, err, "FinishBatch at a stale epoch")
	assert.Equal(t, jobs.BatchRunning, f.batch(job, "b1").State)
	done, err := f.s.FinishBatch(f.ctx, job, "b1", 5)
	require.NoError(t, err)
	assert.Equal(t, jobs.BatchDone, done.State)

	// A batch that is no longer running is returned as it is.
	c, err = f.s.Claim(f.ctx, job, "b1", "r9", 9)
	require.NoError(t, err, "Claim of a finished batch")
	assert.Equal(t, jobs.BatchDone, c.State)
	assert.Equal(t, jobs.BatchInfo{Job: job, ID: "b1", Holder: "r2", Epoch: 5, Size: 2, State: jobs.BatchDone}, f.batch(job, "b1"))
}

func testFinishBatch(t *testing.T, f *fixture) {
	job := f.newJob("j", 0, "ok1", "ok2", "bad", "robots", "late")
	_, got := f.take(job, "b1", 4)
	require.ElementsMatch(t, urls("ok1", "ok2", "bad", "robots"), got)
	f.claim(job, "b1", "r1", 1)
	f.record(job, "b1", "r1", 1, URL("ok1"))
	f.record(job, "b1", "r1", 1, URL("ok2"))

	_, err := f.s.FinishBatch(f.ctx, job, "b1", 1)
	require.Error(t, err, "FinishBatch with unfinished URLs")
	assert.False(t, errors.Is(err, jobs.ErrStale), "unfinished URLs are not a stale epoch: %v", err)
	assert.Equal(t, jobs.BatchRunning, f.batch(job, "b1").State)

	_, err = f.s.Record(f.ctx, jobs.Record{Job: job, Batch: "b1", Runner: "r1", Epoch: 1, URL: URL("bad"),
		Page: Page(job, "b1", "r1", 1, URL("bad"), 0, "HTTP 500")})
	require.NoError(t, err)
	_, err = f.s.Record(f.ctx, jobs.Record{Job: job, Batch: "b1", Runner: "r1", Epoch: 1, URL: URL("robots")})
	require.NoError(t, err)

	done, err := f.s.FinishBatch(f.ctx, job, "b1", 1)
	require.NoError(t, err)
	assert.Equal(t, jobs.BatchDone, done.State)
	assert.Equal(t, 2, done.Success, "Success: pages without error")
	assert.Equal(t, 1, done.Failed, "Failed: pages with an error")
	assert.Equal(t, 4, done.Size)
	assert.Equal(t, jobs.BatchDone, f.batch(job, "b1").State)

	again, err := f.s.FinishBatch(f.ctx, job, "b1", 1)
	require.NoError(t, err, "a retried FinishBatch")
	assert.Equal(t, done, again)
	assert.Equal(t, jobs.Stats{Seen: 5, Queued: 1, Recorded: 3, Failed: 1}, f.stats(job))
}

// testUnfinished: a new holder gets exactly the URLs handed out and not
// finished, those pulled by Extend included, in hand-out order.
func testUnfinished(t *testing.T, f *fixture) {
	job := f.newJob("j", 0, "a", "b", "c", "d", "e")
	_, got := f.take(job, "b1", 2)
	require.Equal(t, urls("a", "b"), got)
	f.claim(job, "b1", "r1", 1)
	more, err := f.s.Extend(f.ctx, job, "b1", 1, 2)
	require.NoError(t, err)
	require.Len(t, more, 2)
	f.record(job, "b1", "r1", 1, URL("a"))
	f.record(job, "b1", "r1", 1, URL("c"))
	un, err := f.s.Unfinished(f.ctx, job, "b1")
	require.NoError(t, err)
	assert.Equal(t, Entries(0, URL("b"), URL("d")), un, "Unfinished after two of four finished")
	assert.Equal(t, 4, f.batch(job, "b1").Size, "Size counts what Extend pulled")
	un, err = f.s.Unfinished(f.ctx, job, "no-such-batch")
	require.NoError(t, err)
	assert.Empty(t, un)
}

func testRequeue(t *testing.T, f *fixture) {
	job := f.newJob("j", 0, "a", "b", "c", "d")
	_, got := f.take(job, "b1", 4)
	require.Len(t, got, 4)
	f.claim(job, "b1", "r1", 1)
	f.record(job, "b1", "r1", 1, URL("a"))
	_, err := f.s.Record(f.ctx, jobs.Record{Job: job, Batch: "b1", Runner: "r1", Epoch: 1, URL: URL("b")}) // robots
	require.NoError(t, err)
	assert.Equal(t, 0, f.stats(job).Queued)

	n, err := f.s.Requeue(f.ctx, job, "b1", 2)
	require.NoError(t, err)
	assert.Equal(t, 2, n, "the unfinished URLs c and d")
	b := f.batch(job, "b1")
	assert.Equal(t, jobs.BatchRequeued, b.State)
	assert.Equal(t, int64(2), b.Epoch, "Requeue raises the epoch")
	assert.Equal(t, jobs.Stats{Seen: 4, Queued: 2, Recorded: 1}, f.stats(job))

	// A retried Requeue does not put them back twice.
	n, err = f.s.Requeue(f.ctx, job, "b1", 2)
	if err == nil {
		assert.Equal(t, 0, n, "a retried Requeue re-queued again")
	}
	assert.Equal(t, jobs.Stats{Seen: 4, Queued: 2, Recorded: 1}, f.stats(job))

	// The old holder is fenced.
	_, err = f.s.Record(f.ctx, jobs.Record{Job: job, Batch: "b1", Runner: "r1", Epoch: 1, URL: URL("c"),
		Page: Page(job, "b1", "r1", 1, URL("c"), 0, "")})
	requireStale(t, err, "Record by the old holder after Requeue")
	_, err = f.s.FinishBatch(f.ctx, job, "b1", 1)
	requireStale(t, err, "FinishBatch by the old holder after Requeue")
	assert.False(t, f.isRecorded(job, URL("c")))

	// The unfinished URLs are handed out again, the finished ones not.
	_, got = f.take(job, "b2", 10)
	assert.ElementsMatch(t, urls("c", "d"), got)
	f.claim(job, "b2", "r2", 1)
	f.record(job, "b2", "r2", 1, URL("c"))
	f.record(job, "b2", "r2", 1, URL("d"))
	_, err = f.s.FinishBatch(f.ctx, job, "b2", 1)
	require.NoError(t, err)
	assert.ElementsMatch(t, urls("a", "c", "d"), f.resultURLs(job))
	assert.Equal(t, jobs.Stats{Seen: 4, Queued: 0, Recorded: 3}, f.stats(job))
	b, _ = f.take(job, "b3", 10)
	assert.Equal(t, 0, b.Size)
}

func testRequeueStale(t *testing.T, f *fixture) {
	job := f.newJob("j", 0, "a", "b")
	f.take(job, "b1", 2)
	f.claim(job, "b1", "r1", 3)
	_, err := f.s.Requeue(f.ctx, job, "b1", 2)
	requireStale(t, err, "Requeue at a lower epoch than the batch's")
	b := f.batch(job, "b1")
	assert.Equal(t, jobs.BatchRunning, b.State)
	assert.Equal(t, int64(3), b.Epoch)
	assert.Equal(t, 0, f.stats(job).Queued, "a refused Requeue put URLs back")
	f.record(job, "b1", "r1", 3, URL("a")) // the holder still writes
}

func testFailBatch(t *testing.T, f *fixture) {
	job := f.newJob("j", 0, "a", "b", "c")
	f.take(job, "b1", 1)
	f.take(job, "b2", 1)
	f.take(job, "b3", 1)
	f.claim(job, "b1", "r1", 1)
	f.claim(job, "b2", "r2", 4)
	f.claim(job, "b3", "r3", 2)

	require.NoError(t, f.s.FailBatch(f.ctx, job, "b1", 1, "spec: invalid job spec: seeds: at least one URL is required"))
	b := f.batch(job, "b1")
	assert.Equal(t, jobs.BatchFailed, b.State)
	assert.Equal(t, "spec: invalid job spec: seeds: at least one URL is required", b.Error)

	// The supervisor fails a batch whoever holds it.
	require.NoError(t, f.s.FailBatch(f.ctx, job, "b2", 0, "supervisor gave up"))
	b = f.batch(job, "b2")
	assert.Equal(t, jobs.BatchFailed, b.State)
	assert.Equal(t, "supervisor gave up", b.Error)

	// A stale holder cannot.
	err := f.s.FailBatch(f.ctx, job, "b3", 1, "stale")
	requireStale(t, err, "FailBatch at a stale epoch")
	assert.Equal(t, jobs.BatchRunning, f.batch(job, "b3").State)

	// A failed batch takes no more writes.
	_, err = f.s.Record(f.ctx, jobs.Record{Job: job, Batch: "b1", Runner: "r1", Epoch: 1, URL: URL("a"),
		Page: Page(job, "b1", "r1", 1, URL("a"), 0, "")})
	requireStale(t, err, "Record into a failed batch")
	assert.False(t, f.isRecorded(job, URL("a")))
}
