package storetest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/jobs"
)

// jobInGroup creates a job of a group of its own (PendingJobs lists a
// group's jobs: the suite's other jobs share one group) with pages
// pages, each pushing perPage items, recorded; it returns the job, its
// group and its items.
func (f *fixture) jobInGroup(tag string, pages, perPage int) (string, string, []jobs.ItemRecord) {
	f.t.Helper()
	id := JobID(f.t, tag)
	group := "g-" + id
	paths := seq("p", pages)
	urls := make([]string, len(paths))
	for i, p := range paths {
		urls[i] = URL(p)
	}
	spec := Spec(id, 0, urls...)
	spec.Group = group
	_, err := f.s.CreateJob(f.ctx, spec, Entries(0, urls...))
	require.NoError(f.t, err)
	f.take(id, "b1", pages)
	f.claim(id, "b1", "r1", 1)
	for _, u := range urls {
		p := Page(id, "b1", "r1", 1, u, 0, "")
		p.Items = perPage
		_, err := f.s.Record(f.ctx, jobs.Record{Job: id, Batch: "b1", Runner: "r1", Epoch: 1, URL: u, Page: p, Items: pushed(u, "", perPage)})
		require.NoError(f.t, err)
	}
	return id, group, f.allItems(id, 1000)
}

func (f *fixture) sinks(job string) []jobs.SinkState {
	f.t.Helper()
	sinks, err := f.s.Sinks(f.ctx, job)
	require.NoError(f.t, err)
	return sinks
}

func (f *fixture) lease(job, sink, holder string, ttl time.Duration) jobs.SinkLease {
	f.t.Helper()
	st, err := f.s.LeaseSink(f.ctx, job, sink, holder, ttl)
	require.NoError(f.t, err, "lease %s of %s for %s", sink, job, holder)
	return st.Lease(holder)
}

// testSinkLeases: a sink's lease is one holder's at a time until it runs
// out (the store's clock); its cursor only moves forward, by its holder.
func testSinkLeases(t *testing.T, f *fixture) {
	job := f.newJob("j", 0, "a")
	assert.Empty(t, f.sinks(job))
	_, err := f.s.Sinks(f.ctx, JobID(t, "nope"))
	assert.ErrorIs(t, err, jobs.ErrNoJob)

	start := time.Now()
	st, err := f.s.LeaseSink(f.ctx, job, "hook", "w1", time.Hour)
	require.NoError(t, err)
	w1 := st.Lease("w1")
	assert.Equal(t, jobs.SinkState{Job: job, Sink: "hook", Holder: "w1", LeaseUntil: st.LeaseUntil, Epoch: st.Epoch}, st, "a new sink: cursor 0")
	assert.WithinRange(t, st.LeaseUntil, start.Add(time.Hour-time.Minute), time.Now().Add(time.Hour+time.Minute),
		"the lease runs for its ttl (the database's clock, near this one)")

	_, err = f.s.LeaseSink(f.ctx, job, "hook", "w2", time.Hour)
	require.ErrorIs(t, err, jobs.ErrLeaseHeld, "a second holder while the lease runs")
	w2 := jobs.SinkLease{Job: job, Sink: "hook", Holder: "w2", Epoch: st.Epoch}
	require.ErrorIs(t, f.s.AckSink(f.ctx, w2, 1, 1), jobs.ErrLeaseLost, "an ack by one that never held it")
	require.ErrorIs(t, f.s.FailSink(f.ctx, w2, jobs.SinkFailure{Reason: "x"}), jobs.ErrLeaseLost)
	require.ErrorIs(t, f.s.AckSink(f.ctx, jobs.SinkLease{Job: job, Sink: "never-leased", Holder: "w1", Epoch: st.Epoch}, 1, 1), jobs.ErrLeaseLost,
		"an ack of a sink never leased")
	require.ErrorIs(t, f.s.AckSink(f.ctx, jobs.SinkLease{Job: job, Sink: "hook", Holder: "w1", Epoch: st.Epoch + 1}, 1, 1), jobs.ErrLeaseLost,
		"an ack at another epoch")

	// The holder delivers: the cursor moves forward only; failures count
	// until an ack.
	require.NoError(t, f.s.AckSink(f.ctx, w1, 5, 5))
	require.NoError(t, f.s.AckSink(f.ctx, w1, 3, 2), "an ack behind the cursor")
	require.NoError(t, f.s.FailSink(f.ctx, w1, jobs.SinkFailure{Reason: "HTTP 500", Refused: true}))
	require.NoError(t, f.s.FailSink(f.ctx, w1, jobs.SinkFailure{Reason: "connection refused"}))
	sinks := f.sinks(job)
	require.Len(t, sinks, 1)
	assert.Equal(t, int64(5), sinks[0].Cursor, "the cursor moved back")
	assert.Equal(t, int64(7), sinks[0].Delivered)
	assert.Equal(t, 2, sinks[0].Failures)
	assert.Equal(t, 1, sinks[0].Refusals, "a failure not refused is not a refusal")
	assert.Equal(t, "connection refused", sinks[0].LastError)
	assert.True(t, sinks[0].RetryAt.IsZero(), "no backoff asked for: no retry time")
	require.NoError(t, f.s.AckSink(f.ctx, w1, 9, 4))
	sinks = f.sinks(job)
	assert.Equal(t, jobs.SinkState{Job: job, Sink: "hook", Holder: "w1", LeaseUntil: sinks[0].LeaseUntil, Cursor: 9, Delivered: 11, Epoch: st.Epoch}, sinks[0],
		"an ack clears the failures")

	// The holder renews its lease (same epoch); then gives it a short one,
	// which runs out, and another holder takes the sink at a new epoch.
	renewed, err := f.s.LeaseSink(f.ctx, job, "hook", "w1", time.Hour)
	require.NoError(t, err)
	assert.False(t, renewed.LeaseUntil.Before(st.LeaseUntil), "a renewed lease ends no sooner")
	assert.Equal(t, int64(9), renewed.Cursor, "a renewal keeps the cursor")
	assert.Equal(t, st.Epoch, renewed.Epoch, "a renewal keeps the epoch")
	require.NoError(t, f.s.RenewSink(f.ctx, w1, 300*time.Millisecond))
	taken := f.waitLease(job, "hook", "w2")
	assert.Equal(t, int64(9), taken.Cursor, "the new holder starts at the cursor")
	assert.Greater(t, taken.Epoch, st.Epoch, "a lease taken anew: a new epoch")

	// The old holder lost it: its ack, failure and renewal are refused,
	// its lease too; the cursor stays.
	require.ErrorIs(t, f.s.AckSink(f.ctx, w1, 20, 11), jobs.ErrLeaseLost)
	require.ErrorIs(t, f.s.FailSink(f.ctx, w1, jobs.SinkFailure{Reason: "late"}), jobs.ErrLeaseLost)
	require.ErrorIs(t, f.s.RenewSink(f.ctx, w1, time.Hour), jobs.ErrLeaseLost)
	held, err := f.s.LeaseSink(f.ctx, job, "hook", "w1", time.Hour)
	require.ErrorIs(t, err, jobs.ErrLeaseHeld)
	assert.Equal(t, "w2", held.Holder, "ErrLeaseHeld comes with the sink's state")
	l2 := taken.Lease("w2")
	require.NoError(t, f.s.AckSink(f.ctx, l2, 4, 0), "the new holder acks behind the cursor")
	require.NoError(t, f.s.FailSink(f.ctx, l2, jobs.SinkFailure{Reason: "HTTP 503"}))

	// A second sink of the job is apart.
	s2, err := f.s.LeaseSink(f.ctx, job, "archive", "w1", time.Hour)
	require.NoError(t, err)
	assert.Equal(t, int64(0), s2.Cursor)
	sinks = f.sinks(job)
	require.Len(t, sinks, 2)
	assert.Equal(t, "archive", sinks[0].Sink, "Sinks by name")
	assert.Equal(t, "w1", sinks[0].Holder)
	assert.Equal(t, "hook", sinks[1].Sink)
	assert.Equal(t, "w2", sinks[1].Holder)
	assert.Equal(t, int64(9), sinks[1].Cursor, "the cursor moved back or was moved by a lost holder")
	assert.Equal(t, int64(11), sinks[1].Delivered)
	assert.Equal(t, 1, sinks[1].Failures)
	assert.Equal(t, "HTTP 503", sinks[1].LastError)

	// Another job's sink of the same name is its own.
	other := f.newJob("k", 0, "a")
	o, err := f.s.LeaseSink(f.ctx, other, "hook", "w9", time.Hour)
	require.NoError(t, err)
	assert.Equal(t, int64(0), o.Cursor)
}

// waitLease takes the lease of job's sink for holder once the lease held
// runs out.
func (f *fixture) waitLease(job, sink, holder string) jobs.SinkState {
	f.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := f.s.LeaseSink(f.ctx, job, sink, holder, time.Hour)
		if err == nil {
			assert.Equal(f.t, holder, st.Holder)
			return st
		}
		require.True(f.t, errors.Is(err, jobs.ErrLeaseHeld) || errors.Is(err, jobs.ErrSinkBackoff), "lease: %v", err)
		require.True(f.t, time.Now().Before(deadline), "the lease of %s still held after 30s: %v", sink, err)
		time.Sleep(20 * time.Millisecond) // polling pace
	}
}

// testSinkLeaseRunsOut: a holder whose lease ran out cannot acknowledge
// even when nobody took the sink (its delivery outlived its lease); it
// leases again at a new epoch.
func testSinkLeaseRunsOut(t *testing.T, f *fixture) {
	job := f.newJob("j", 0, "a")
	l := f.lease(job, "hook", "w1", 200*time.Millisecond)
	deadline := time.Now().Add(30 * time.Second)
	for f.s.RenewSink(f.ctx, l, 200*time.Millisecond) == nil {
		require.True(t, time.Now().Before(deadline))
		time.Sleep(300 * time.Millisecond) // longer than the lease: it runs out
	}
	require.ErrorIs(t, f.s.AckSink(f.ctx, l, 5, 5), jobs.ErrLeaseLost, "an ack after the lease ran out")
	require.ErrorIs(t, f.s.DeadLetter(f.ctx, l, jobs.DeadLetter{First: 1, Last: 5, Items: 5}), jobs.ErrLeaseLost)
	again := f.lease(job, "hook", "w1", time.Hour)
	assert.Greater(t, again.Epoch, l.Epoch, "a lease taken again after it ran out: a new epoch")
	require.NoError(t, f.s.AckSink(f.ctx, again, 5, 5))
	assert.Equal(t, int64(5), f.sinks(job)[0].Cursor)
}

// testSinkBackoff: a failure's backoff keeps every holder off the sink
// until it passes (the store's clock), and shows when it is tried again.
func testSinkBackoff(t *testing.T, f *fixture) {
	job := f.newJob("j", 0, "a")
	l := f.lease(job, "hook", "w1", 100*time.Millisecond)
	before := time.Now()
	require.NoError(t, f.s.FailSink(f.ctx, l, jobs.SinkFailure{Reason: "HTTP 500", Refused: true, Backoff: 2 * time.Second}))
	st := f.sinks(job)[0]
	assert.WithinRange(t, st.RetryAt, before.Add(time.Second), time.Now().Add(3*time.Second), "retry_at: now + backoff")
	_, err := f.s.LeaseSink(f.ctx, job, "hook", "w1", time.Hour)
	require.ErrorIs(t, err, jobs.ErrSinkBackoff, "the holder itself waits")
	taken := f.waitLease(job, "hook", "w2")
	assert.False(t, time.Now().Before(st.RetryAt.Add(-time.Second)), "taken before the backoff passed")
	assert.Equal(t, 1, taken.Refusals)
}

// testDeadLetters: a dead letter moves the cursor past its batch, is shown
// with the sink, and is skipped (counted) or retried (the job listed
// again) by an operator.
func testDeadLetters(t *testing.T, f *fixture) {
	job, group, items := f.jobInGroup("j", 3, 2)
	require.Len(t, items, 6)
	l := f.lease(job, "hook", "w1", time.Hour)
	require.NoError(t, f.s.FailSink(f.ctx, l, jobs.SinkFailure{Reason: "HTTP 500", Refused: true}))
	d := jobs.DeadLetter{First: items[0].Seq, Last: items[1].Seq, Items: 2, Failures: 3, LastError: "webhook hook: POST http://h: HTTP 500"}
	require.NoError(t, f.s.DeadLetter(f.ctx, l, d))
	require.NoError(t, f.s.DeadLetter(f.ctx, l, d), "a retried dead letter")
	require.NoError(t, f.s.AckSink(f.ctx, l, items[3].Seq, 2))
	st := f.sinks(job)[0]
	assert.Equal(t, items[3].Seq, st.Cursor)
	assert.Equal(t, 0, st.Failures, "a dead letter ends the batch's failures")
	require.Len(t, st.DeadLetters, 1)
	got := st.DeadLetters[0]
	assert.WithinDuration(t, time.Now(), got.At, time.Minute)
	got.At = time.Time{}
	assert.Equal(t, d, got)

	// Retry: marked, and the job listed for delivery even once done.
	require.NoError(t, f.s.SinkJobDone(f.ctx, job, items[5].Seq))
	assert.Empty(t, f.pending(group))
	ds, err := f.s.RetryDeadLetters(f.ctx, job, "hook")
	require.NoError(t, err)
	require.Len(t, ds, 1)
	assert.True(t, f.sinks(job)[0].DeadLetters[0].Retry)
	assert.Equal(t, []jobs.PendingJob{{Job: job, Seq: items[5].Seq}}, f.pending(group))
	// Delivered in two parts; the dead letter ends with its last item.
	require.NoError(t, f.s.AckDeadLetter(f.ctx, l, d.Last, items[0].Seq, 1))
	st = f.sinks(job)[0]
	require.Len(t, st.DeadLetters, 1)
	assert.Equal(t, items[1].Seq, st.DeadLetters[0].First)
	assert.Equal(t, 1, st.DeadLetters[0].Items)
	require.NoError(t, f.s.AckDeadLetter(f.ctx, l, d.Last, items[1].Seq, 1))
	st = f.sinks(job)[0]
	assert.Empty(t, st.DeadLetters)
	assert.Equal(t, int64(4), st.Delivered)

	// Refused again: it stays, not to be retried; then skipped.
	d2 := jobs.DeadLetter{First: items[4].Seq, Last: items[5].Seq, Items: 2, Failures: 1, LastError: "x"}
	require.NoError(t, f.s.DeadLetter(f.ctx, l, d2))
	_, err = f.s.RetryDeadLetters(f.ctx, job, "hook")
	require.NoError(t, err)
	require.NoError(t, f.s.FailDeadLetter(f.ctx, l, d2.Last, "HTTP 413"))
	st = f.sinks(job)[0]
	require.Len(t, st.DeadLetters, 1)
	assert.False(t, st.DeadLetters[0].Retry)
	assert.Equal(t, "HTTP 413", st.DeadLetters[0].LastError)
	assert.Equal(t, 2, st.DeadLetters[0].Failures)
	ds, err = f.s.SkipDeadLetters(f.ctx, job, "hook")
	require.NoError(t, err)
	require.Len(t, ds, 1)
	st = f.sinks(job)[0]
	assert.Empty(t, st.DeadLetters)
	assert.Equal(t, int64(2), st.Skipped)
	ds, err = f.s.SkipDeadLetters(f.ctx, job, "hook")
	require.NoError(t, err)
	assert.Empty(t, ds, "nothing left to skip")
	_, err = f.s.SkipDeadLetters(f.ctx, JobID(t, "nope"), "hook")
	assert.ErrorIs(t, err, jobs.ErrNoJob)
}

func (f *fixture) pending(group string) []jobs.PendingJob {
	f.t.Helper()
	p, err := f.s.PendingJobs(f.ctx, group)
	require.NoError(f.t, err)
	return p
}

// testPendingJobs: a group's jobs with items are listed with their
// highest Seq, another group's are not; a job marked delivered is listed
// again by its next items only.
func testPendingJobs(t *testing.T, f *fixture) {
	job, group, items := f.jobInGroup("j", 2, 3)
	other, otherGroup, _ := f.jobInGroup("k", 1, 1)
	last := items[len(items)-1].Seq
	assert.Equal(t, []jobs.PendingJob{{Job: job, Seq: last}}, f.pending(group))
	assert.Len(t, f.pending(otherGroup), 1)
	assert.Equal(t, other, f.pending(otherGroup)[0].Job)

	require.NoError(t, f.s.SinkJobDone(f.ctx, job, last-1), "done up to an older item")
	assert.Len(t, f.pending(group), 1, "items past what was delivered")
	require.NoError(t, f.s.SinkJobDone(f.ctx, job, last))
	assert.Empty(t, f.pending(group))

	// More items: listed again, with the new highest Seq.
	f.take(job, "b2", 0)
	u := URL("late")
	_, err := f.s.AddSeeds(f.ctx, job, Entries(0, u))
	require.NoError(t, err)
	f.take(job, "b3", 1)
	f.claim(job, "b3", "r1", 1)
	p := Page(job, "b3", "r1", 1, u, 0, "")
	p.Items = 2
	_, err = f.s.Record(f.ctx, jobs.Record{Job: job, Batch: "b3", Runner: "r1", Epoch: 1, URL: u, Page: p, Items: pushed(u, "", 2)})
	require.NoError(t, err)
	all := f.allItems(job, 100)
	assert.Equal(t, []jobs.PendingJob{{Job: job, Seq: all[len(all)-1].Seq}}, f.pending(group))
}

// testItemBatch: a batch is bounded in items and in bytes, at least one
// item, and by UpTo.
func testItemBatch(t *testing.T, f *fixture) {
	job, _, items := f.jobInGroup("j", 2, 4)
	batch := func(q jobs.ItemQuery) []jobs.ItemRecord {
		its, err := f.s.ItemBatch(f.ctx, job, q)
		require.NoError(t, err)
		return its
	}
	assert.Equal(t, items[:3], batch(jobs.ItemQuery{Limit: 3}))
	size := items[0].Size() + items[1].Size()
	assert.Equal(t, items[:2], batch(jobs.ItemQuery{Limit: 10, MaxBytes: size + items[2].Size() - 1}), "bounded in bytes")
	assert.Equal(t, items[2:3], batch(jobs.ItemQuery{After: items[1].Seq, Limit: 10, MaxBytes: 1}), "one item larger than the bound goes alone")
	assert.Equal(t, items[3:5], batch(jobs.ItemQuery{After: items[2].Seq, UpTo: items[4].Seq, Limit: 10}))
	_, err := f.s.ItemBatch(f.ctx, job, jobs.ItemQuery{})
	assert.Error(t, err, "a limit of 0")
	assert.True(t, strings.Contains(fmt.Sprint(err), job))
}

// testConcurrentLease: holders racing for a new sink's lease: exactly one
// gets it, the others ErrLeaseHeld.
func testConcurrentLease(t *testing.T, f *fixture) {
	job := f.newJob("j", 0, "a")
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = f.s.LeaseSink(f.ctx, job, "hook", fmt.Sprintf("w%d", i), time.Hour)
		}()
	}
	wg.Wait()
	won := -1
	for i, err := range errs {
		switch {
		case err == nil:
			assert.Equal(t, -1, won, "w%d and w%d both got the lease", won, i)
			won = i
		case !errors.Is(err, jobs.ErrLeaseHeld):
			t.Errorf("w%d: want ErrLeaseHeld, got %v", i, err)
		}
	}
	require.NotEqual(t, -1, won, "nobody got the lease")
	sinks := f.sinks(job)
	require.Len(t, sinks, 1)
	assert.Equal(t, fmt.Sprintf("w%d", won), sinks[0].Holder)
}
