package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/roles"
)

// leaseStore is a store whose Pull answers can be changed: renewals
// (n 0) are counted, its TTL shortened, its Wait set, and hosts dropped
// from its answers (as if another batch had taken them).
type leaseStore struct {
	jobs.Store
	renewals atomic.Int32
	pulls    atomic.Int32
	ttl      time.Duration
	wait     time.Duration
	lose     atomic.Bool
}

func (s *leaseStore) Pull(ctx context.Context, job, id string, epoch int64, n, want int) (jobs.Pulled, error) {
	p, err := s.Store.Pull(ctx, job, id, epoch, n, want)
	if n == 0 {
		s.renewals.Add(1)
	}
	s.pulls.Add(1)
	if s.lose.Load() {
		p.Hosts = nil
	}
	if s.ttl > 0 {
		p.TTL = s.ttl
	}
	for i := range p.Hosts {
		p.Hosts[i].Wait = max(p.Hosts[i].Wait, s.wait)
	}
	return p, err
}

// Leases answers as Pull does: a handed-over host's wait.
func (s *leaseStore) Leases(ctx context.Context, job, batch string) ([]jobs.HostLease, error) {
	ls, err := s.Store.Leases(ctx, job, batch)
	for i := range ls {
		ls[i].Wait = max(ls[i].Wait, s.wait)
	}
	return ls, err
}

// heldPulls is a store whose Pulls (renewals only, with renewals) wait
// until held is closed: the job's lock held by other transactions, as the
// hand-outs of a job's other batches hold it at its start.
type heldPulls struct {
	jobs.Store
	held     chan struct{}
	renewals bool
	waiting  atomic.Int32
}

func (s *heldPulls) Pull(ctx context.Context, job, id string, epoch int64, n, want int) (jobs.Pulled, error) {
	if n == 0 || !s.renewals {
		s.waiting.Add(1)
		select {
		case <-s.held:
		case <-ctx.Done():
			return jobs.Pulled{}, ctx.Err()
		}
	}
	return s.Store.Pull(ctx, job, id, epoch, n, want)
}

// A batch's first fetches go out with the leases its hand-out took, read,
// without waiting for the job's lock: the renewal that sizes them is
// made beside them.
func TestRunBatchFetchesBeforeItsLeasesAreRenewed(t *testing.T) {
	e := politeEnv(t, 2, 4, 2)
	hp := &heldPulls{Store: e.store, held: make(chan struct{})}
	e.br.Store = hp
	ch := e.runAsync()
	eventually(t, func() bool { n, _, _ := e.pages.count(); return n >= 2 }, "fetches while every pull waits for the job's lock")
	// The renewal goes out from a goroutine of its own, beside the
	// fetches: it may reach the store after they answered (held is still
	// open, so no pull has answered either way).
	eventually(t, func() bool { return hp.waiting.Load() > 0 }, "the renewal was sent")
	close(hp.held)
	out, err := e.wait(ch)
	require.NoError(t, err)
	assert.Equal(t, 4, out.Ran)
}

// A batch that has fetched and recorded all it holds while the renewal
// of its leases is under way pulls once the renewal has answered (it
// neither ends early nor spins).
func TestRunBatchPullsAfterARenewalUnderWay(t *testing.T) {
	e := newBatchEnv(t, 2, pageURLs(4), func(s *jobs.Spec) {
		s.BatchSize, s.Options.Parallelism, s.Options.IgnoreRobots = 0, 2, true // it grows while the frontier has URLs
	})
	hp := &heldPulls{Store: e.store, held: make(chan struct{}), renewals: true}
	e.br.Store = hp
	ch := e.runAsync()
	eventually(t, func() bool { return e.stats().Recorded == 4 }, "the batch's pages recorded while its renewal waits (%d)", e.stats().Recorded)
	require.Empty(t, ch, "the batch ended before it pulled")
	close(hp.held)
	out, err := e.wait(ch)
	require.NoError(t, err)
	assert.Equal(t, 4, out.Ran)
	assert.Equal(t, jobs.BatchDone, e.info().State)
}

// politeEnv is a batch of n pages of one host, of a job whose parallelism
// is parallelism (robots.txt ignored), taken whole (a batch of n wants n
// in flight) and claimed; the runner's concurrency is conc.
func politeEnv(t *testing.T, conc, n, parallelism int) *batchEnv {
	return newBatchEnv(t, conc, pageURLs(n), func(s *jobs.Spec) {
		s.Options.Parallelism, s.Options.IgnoreRobots = parallelism, true
	})
}

// The Runner fetches a host with its batch's share of the host's
// parallelism (sized to its concurrency before the first fetch), and
// with the job's robots.txt store.
func TestRunBatchFetchesWithItsShareOfTheHost(t *testing.T) {
	e := politeEnv(t, 3, 12, 8)
	ls, err := e.store.Leases(e.ctx, e.spec.ID, e.batch)
	require.NoError(t, err)
	require.Equal(t, []jobs.HostLease{{Host: "example.test", Share: 8}}, ls, "a batch of 12 took all 8")
	out, err := e.run()
	require.NoError(t, err)
	assert.Equal(t, 12, out.Ran)
	for _, c := range e.pages.snapshot() {
		assert.Equal(t, 3, c.opts.Parallelism, "%s: the share sized to the Runner's 3", c.req.URL)
		require.NotNil(t, c.opts.Robots, "the job's robots.txt store")
		assert.Equal(t, e.spec.ID, c.opts.Robots.Scope())
	}
	ls, err = e.store.Leases(e.ctx, e.spec.ID, e.batch)
	require.NoError(t, err)
	assert.Empty(t, ls, "released with the batch")
}

// A host handed over waits: the first fetch starts no earlier than the
// lease's Wait from the answer.
func TestRunBatchWaitsForAHandedOverHost(t *testing.T) {
	e := politeEnv(t, 2, 2, 2)
	ls := &leaseStore{Store: e.store, wait: 300 * time.Millisecond}
	e.br.Store = ls
	start := time.Now()
	_, err := e.run()
	require.NoError(t, err)
	for _, c := range e.pages.snapshot() {
		assert.False(t, c.opts.NotBefore.Before(start.Add(300*time.Millisecond)), "%s not before %v", c.req.URL, c.opts.NotBefore.Sub(start))
	}
}

// While its fetches take long, the Runner renews its leases every TTL/4
// without a pull.
func TestRunBatchRenewsItsLeases(t *testing.T) {
	e := politeEnv(t, 2, 2, 2)
	ls := &leaseStore{Store: e.store, ttl: 200 * time.Millisecond}
	e.br.Store = ls
	e.pages.gate = make(chan struct{})
	ch := e.runAsync()
	eventually(t, func() bool { return ls.renewals.Load() >= 4 }, "renewals while the fetches hang (%d)", ls.renewals.Load())
	close(e.pages.gate)
	out, err := e.wait(ch)
	require.NoError(t, err)
	assert.Equal(t, 2, out.Ran)
}

// A batch that finds it lost a host (its lease expired and another batch
// took it) starts no more fetches, gives what it did not fetch back to
// the frontier and ends.
func TestRunBatchGivesBackALostHost(t *testing.T) {
	root := "http://example.test/"
	e := newBatchEnv(t, 2, []string{root}, func(s *jobs.Spec) {
		s.BatchSize, s.Options.Parallelism, s.Options.IgnoreRobots = 0, 2, true
	})
	var links []string
	for i := range 20 {
		links = append(links, fmt.Sprintf("http://example.test/%d", i))
	}
	e.pages.pages[root] = crawl.Page{URL: root, StatusCode: 200, Links: links}
	ls := &leaseStore{Store: e.store}
	ls.lose.Store(true) // from the first pull on: the batch starts with the leases its hand-out took (read)
	e.br.Store = ls
	out, err := e.run()
	require.NoError(t, err)
	assert.Equal(t, jobs.BatchDone, e.info().State, "the batch ends")
	st := e.stats()
	assert.Equal(t, out.Ran, st.Recorded)
	assert.Less(t, st.Recorded, 21, "it stopped")
	assert.Equal(t, 21, st.Recorded+st.Queued, "what it did not fetch is queued again")
	calls, _, _ := e.pages.count()
	assert.LessOrEqual(t, calls, st.Recorded+2, "no fetch after it found the host lost but those in flight")
}

// availCounter counts the Available calls of a supervisor's store.
type availCounter struct {
	jobs.SupervisorStore
	calls atomic.Int32
}

func (a *availCounter) Available(ctx context.Context, job string) (bool, error) {
	a.calls.Add(1)
	return a.SupervisorStore.Available(ctx, job)
}

// While every queued URL is of a host another batch holds whole, an idle
// Runner is no reason for JobAwait to return (JobAssign would hand it an
// empty batch, round after round): it waits, and returns when the holder's
// batch ends; then the idle Runner gets the host.
func TestJobAwaitDoesNotHandOutAHostHeldByAnotherBatch(t *testing.T) {
	f := newFixture(t, 2, 0)
	spec := jobs.Spec{ID: "job-held", Group: testGroup, Seeds: seedURLs(4), BatchSize: 2, Timers: f.timers,
		Options: crawl.Options{Parallelism: 2, Delay: 10 * time.Millisecond, IgnoreRobots: true}}
	f.start(spec)
	res := f.assign(spec, 0)
	require.Len(t, res.Assigned, 1, "one host with a delay: one batch holds it")
	ref := res.Assigned[0]
	counter := &availCounter{SupervisorStore: f.store}
	f.a.Store = counter
	ch := f.awaitAsync(spec, res.Assigned)
	eventually(t, func() bool { return counter.calls.Load() >= 3 }, "JobAwait to ask whether a batch is available")
	select {
	case r := <-ch:
		t.Fatalf("JobAwait returned while the host is held: %+v, %v", r.res, r.err)
	default:
	}

	tk := f.task(ref.Runner)
	for _, u := range urlsOf(f.entries(spec.ID, ref.Batch)) {
		require.NoError(t, f.record(spec.ID, ref.Batch, ref.Runner, tk.Epoch, u))
	}
	_, err := f.store.FinishBatch(f.ctx, spec.ID, ref.Batch, tk.Epoch)
	require.NoError(t, err)
	tk.RunningStatus = roles.TaskDone
	f.setTask(ref.Runner, tk)
	aw, err := f.awaitReturn(ch)
	require.NoError(t, err)
	assert.Equal(t, []jobs.BatchRef{ref}, aw.Done)
	next := f.assign(spec, 1)
	require.Len(t, next.Assigned, 1, "the host is free again, for one batch")
	assert.Positive(t, next.Assigned[0].Size)
}

// failingRenewals is a store whose renewals (Pull of n 0) fail after the
// first, with a short TTL: the store unreachable for the leases.
type failingRenewals struct {
	jobs.Store
	ttl   time.Duration
	calls atomic.Int32
}

func (s *failingRenewals) Pull(ctx context.Context, job, id string, epoch int64, n, want int) (jobs.Pulled, error) {
	if n == 0 && s.calls.Add(1) > 1 {
		return jobs.Pulled{}, errors.New("store unreachable")
	}
	p, err := s.Store.Pull(ctx, job, id, epoch, n, want)
	p.TTL = s.ttl
	return p, err
}

// A Runner that could not renew its leases for a TTL starts no more
// fetches (another batch may hold its hosts by then) and gives the rest
// back.
func TestRunBatchStopsWhenItsLeasesMayHaveExpired(t *testing.T) {
	e := politeEnv(t, 1, 40, 2)
	e.br.Store = &failingRenewals{Store: e.store, ttl: 200 * time.Millisecond}
	e.pages.gate = make(chan struct{})
	ch := e.runAsync()
	done := make(chan struct{})
	go func() { // one page every 50 ms
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for range 40 {
			<-tick.C
			select {
			case e.pages.gate <- struct{}{}:
			case <-done:
				return
			}
		}
	}()
	out, err := e.wait(ch)
	close(done)
	require.NoError(t, err)
	assert.Less(t, out.Ran, 40, "it stopped")
	st := e.stats()
	assert.Equal(t, 40, st.Recorded+st.Queued, "the rest is queued again")
	assert.Equal(t, jobs.BatchDone, e.info().State)
}

// claimAfterLeases is a store whose Claim waits until the batch's leases
// were read, and notes when it claimed.
type claimAfterLeases struct {
	jobs.Store
	read      chan struct{}
	once      atomic.Bool
	claimedAt atomic.Int64
}

func (s *claimAfterLeases) Leases(ctx context.Context, job, batch string) ([]jobs.HostLease, error) {
	ls, err := s.Store.Leases(ctx, job, batch)
	if s.once.CompareAndSwap(false, true) {
		close(s.read)
	}
	return ls, err
}

func (s *claimAfterLeases) Claim(ctx context.Context, job, id, holder string, epoch int64) (jobs.BatchInfo, error) {
	select {
	case <-s.read:
	case <-ctx.Done():
		return jobs.BatchInfo{}, ctx.Err()
	}
	s.claimedAt.Store(time.Now().UnixNano())
	return s.Store.Claim(ctx, job, id, holder, epoch)
}

// A Runner that has to claim its batch as it opens it (its Task written
// before the claim) does not fetch with the leases it read before its
// claim: the claim renewed them for the new holder, whose first request
// to a host waits for the job's delay from the hand-over.
func TestRunBatchClaimingAsItOpensWaitsForTheHost(t *testing.T) {
	const delay = 300 * time.Millisecond
	e := newBatchEnv(t, 2, pageURLs(2), func(s *jobs.Spec) {
		s.Options.Delay, s.Options.IgnoreRobots = delay, true
	})
	cs := &claimAfterLeases{Store: e.store, read: make(chan struct{})}
	e.br.Store = cs
	out, err := e.runAs(nodeName(2), 2)
	require.NoError(t, err)
	assert.Equal(t, 2, out.Ran)
	require.NotZero(t, cs.claimedAt.Load(), "it claimed")
	claimed := time.Unix(0, cs.claimedAt.Load())
	for _, c := range e.pages.snapshot() {
		// (The store's clock is read after the claim began: a few ms of
		// slack.)
		assert.False(t, c.opts.NotBefore.Before(claimed.Add(delay-20*time.Millisecond)),
			"%s not before %v after the claim", c.req.URL, c.opts.NotBefore.Sub(claimed))
	}
}
