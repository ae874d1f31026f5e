package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/crawler"
	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/activities/jobs/sqlstore"
	"github.com/batoncrawl/baton/activities/jobs/storetest"
	"github.com/batoncrawl/baton/testsuite"
)

// onEngines runs fn on a SQLite store and on a PostgreSQL one (a server
// of its own; skipped under -short).
func onEngines(t *testing.T, fn func(t *testing.T, s *sqlstore.Store)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, openStore(t)) })
	t.Run("postgres", func(t *testing.T) {
		pg := testsuite.StartPostgres(t)
		s, err := sqlstore.OpenPostgres(testCtx(t), pg.DSN(), "")
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		fn(t, s)
	})
}

// sinkJob creates a job of crawler shop pinned to version in group, with
// one page per value of values, each pushing that value as its one item;
// it returns the job's ID and its items.
func sinkJob(t *testing.T, s *sqlstore.Store, group, version string, values ...string) (string, []jobs.ItemRecord) {
	t.Helper()
	ctx := testCtx(t)
	id := storetest.JobID(t, "sinks")
	urls := make([]string, max(len(values), 1)) // a job needs a seed
	for i := range urls {
		urls[i] = storetest.URL(fmt.Sprintf("p%03d", i))
	}
	spec := storetest.Spec(id, 0, urls...)
	spec.Group, spec.Crawler, spec.CrawlerVersion = group, "shop", version
	_, err := s.CreateJob(ctx, spec, storetest.Entries(0, urls...))
	require.NoError(t, err)
	_, err = s.TakeBatch(ctx, id, "b1", len(urls))
	require.NoError(t, err)
	_, err = s.Claim(ctx, id, "b1", "r1", 1)
	require.NoError(t, err)
	for i, u := range urls[:len(values)] {
		p := storetest.Page(id, "b1", "r1", 1, u, 0, "")
		p.Items = 1
		v, _ := json.Marshal(values[i])
		_, err := s.Record(ctx, jobs.Record{Job: id, Batch: "b1", Runner: "r1", Epoch: 1, URL: u, Page: p,
			Items: []crawler.Pushed{{Index: 0, Value: v}}})
		require.NoError(t, err)
	}
	its, err := s.Items(ctx, id, 0, 1000)
	require.NoError(t, err)
	require.Len(t, its, len(values))
	return id, its
}

// receiver is a sink keeping the batches it took, refusing (or finding
// unavailable) those holding an item whose value has refuse in it.
type receiver struct {
	mu          sync.Mutex
	refuse      string
	unavailable bool
	batches     [][]string
	refusals    []time.Time
}

func (r *receiver) sink(name string) crawler.Sink {
	return crawler.Sink{Name: name, Deliver: func(_ context.Context, _ string, items []crawler.StoredItem) error {
		r.mu.Lock()
		defer r.mu.Unlock()
		var vals []string
		for _, it := range items {
			var v string
			_ = json.Unmarshal(it.Value, &v)
			if r.refuse != "" && strings.Contains(v, r.refuse) {
				r.refusals = append(r.refusals, time.Now())
				if r.unavailable {
					return fmt.Errorf("POST https://hooks.example/T0/B0/s3cr3t?token=abc: %w", crawler.ErrSinkUnavailable)
				}
				return errors.New(`Post "https://user:pw@hooks.example/T0/B0/s3cr3t?token=abc": HTTP 500`)
			}
			vals = append(vals, v)
		}
		r.batches = append(r.batches, vals)
		return nil
	}}
}

func (r *receiver) got() (vals []string, batches int, refusals []time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, b := range r.batches {
		vals = append(vals, b...)
	}
	return vals, len(r.batches), append([]time.Time(nil), r.refusals...)
}

func shopCrawler(version string, sinks ...crawler.Sink) map[string]*crawler.Crawler {
	c := crawler.New("shop", version)
	for _, s := range sinks {
		c.Sink(s)
	}
	return map[string]*crawler.Crawler{"shop": c}
}

// passUntil runs d's passes until cond holds (a deadline of 30 s).
func passUntil(t *testing.T, d *jobs.Deliverer, what string, cond func() bool) {
	t.Helper()
	ctx := testCtx(t)
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		require.True(t, time.Now().Before(deadline), "after 30s: not %s", what)
		d.Pass(ctx)
		time.Sleep(5 * time.Millisecond) // the deliverer's pace, shortened
	}
}

// A batch the sink refuses is retried with backoff, then dead-lettered
// after MaxFailures refusals, and the items after it are delivered; the
// dead letter is in the sink's state with an error without the URL's
// path, query or user; retried by an operator it is delivered, and the
// job is marked delivered.
func TestDelivererDeadLettersARefusedBatchAndGoesOn(t *testing.T) {
	onEngines(t, func(t *testing.T, s *sqlstore.Store) {
		ctx := testCtx(t)
		values := []string{"a0", "a1", "POISON", "a3", "a4", "a5", "a6"}
		job, items := sinkJob(t, s, "g1", "1", values...)
		rc := &receiver{refuse: "POISON"}
		d := &jobs.Deliverer{Store: s, Crawlers: shopCrawler("1", withBatch(rc.sink("hook"), 2)), Group: "g1", Holder: "w1",
			Backoff: 20 * time.Millisecond, MaxFailures: 3, Log: quiet()}
		var st jobs.SinkState
		passUntil(t, d, "a dead letter and the items after it delivered", func() bool {
			sinks, err := s.Sinks(ctx, job)
			require.NoError(t, err)
			if len(sinks) == 1 {
				st = sinks[0]
			}
			vals, _, _ := rc.got()
			return len(st.DeadLetters) == 1 && len(vals) == 5
		})
		vals, _, refusals := rc.got()
		assert.Equal(t, []string{"a0", "a1", "a4", "a5", "a6"}, vals, "every item but the refused batch's, in order")
		require.Len(t, refusals, 3, "refused MaxFailures times, then set aside")
		assert.GreaterOrEqual(t, refusals[1].Sub(refusals[0]), 20*time.Millisecond, "a backoff after the first refusal")
		assert.GreaterOrEqual(t, refusals[2].Sub(refusals[1]), 40*time.Millisecond, "the backoff doubles")
		dl := st.DeadLetters[0]
		assert.Equal(t, items[2].Seq, dl.First)
		assert.Equal(t, items[3].Seq, dl.Last)
		assert.Equal(t, 2, dl.Items)
		assert.Equal(t, 3, dl.Failures)
		assert.Equal(t, `Post "https://hooks.example": HTTP 500`, dl.LastError, "the error without the URL's user, path and query")
		assert.Equal(t, items[6].Seq, st.Cursor)
		assert.Equal(t, 0, st.Failures)
		pend, err := s.PendingJobs(ctx, "g1")
		require.NoError(t, err)
		assert.Empty(t, pend, "a dead letter does not keep the job listed")

		// An operator retries it once the receiver takes it.
		rc.mu.Lock()
		rc.refuse = ""
		rc.mu.Unlock()
		_, err = s.RetryDeadLetters(ctx, job, "hook")
		require.NoError(t, err)
		passUntil(t, d, "the dead letter delivered", func() bool {
			vals, _, _ := rc.got()
			return len(vals) == 7
		})
		sinks, err := s.Sinks(ctx, job)
		require.NoError(t, err)
		assert.Empty(t, sinks[0].DeadLetters)
		assert.Equal(t, int64(7), sinks[0].Delivered)
		vals, _, _ = rc.got()
		assert.Equal(t, []string{"POISON", "a3"}, vals[5:])
		pend, err = s.PendingJobs(ctx, "g1")
		require.NoError(t, err)
		assert.Empty(t, pend)
	})
}

func withBatch(s crawler.Sink, n int) crawler.Sink {
	s.Batch = n
	return s
}

// A sink that cannot be reached is retried for as long as it lasts and
// never dead-letters the batch: the items wait in order.
func TestDelivererNeverDeadLettersAnUnavailableSink(t *testing.T) {
	s := openStore(t)
	ctx := testCtx(t)
	job, _ := sinkJob(t, s, "g1", "1", "a0", "DOWN", "a2")
	rc := &receiver{refuse: "DOWN", unavailable: true}
	d := &jobs.Deliverer{Store: s, Crawlers: shopCrawler("1", withBatch(rc.sink("hook"), 1)), Group: "g1", Holder: "w1",
		Backoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond, MaxFailures: 2, Log: quiet()}
	passUntil(t, d, "five failed tries", func() bool {
		_, _, refusals := rc.got()
		return len(refusals) >= 5
	})
	sinks, err := s.Sinks(ctx, job)
	require.NoError(t, err)
	assert.Empty(t, sinks[0].DeadLetters)
	assert.GreaterOrEqual(t, sinks[0].Failures, 5)
	assert.Equal(t, 0, sinks[0].Refusals)
	assert.NotContains(t, sinks[0].LastError, "s3cr3t")
	assert.NotContains(t, sinks[0].LastError, "token")
	vals, _, _ := rc.got()
	assert.Equal(t, []string{"a0"}, vals, "nothing delivered past the batch that waits")
}

// A batch is bounded in bytes as well as items: the worker's cap lowers
// the sink's own bound, and an item larger than it goes alone.
func TestDelivererBoundsBatchesInBytes(t *testing.T) {
	s := openStore(t)
	big := strings.Repeat("x", 3000)
	_, items := sinkJob(t, s, "g1", "1", "s0", "s1", big, "s3", "s4", "s5")
	rc := &receiver{}
	sink := rc.sink("hook")
	sink.MaxBytes = 1 << 20
	bound := items[0].Size() + items[1].Size() + items[3].Size() - 1
	d := &jobs.Deliverer{Store: s, Crawlers: shopCrawler("1", sink), Group: "g1", Holder: "w1", MaxBatchBytes: bound, Log: quiet()}
	passUntil(t, d, "every item delivered", func() bool {
		vals, _, _ := rc.got()
		return len(vals) == 6
	})
	rc.mu.Lock()
	defer rc.mu.Unlock()
	assert.Equal(t, [][]string{{"s0", "s1"}, {big}, {"s3", "s4"}, {"s5"}}, rc.batches)
}

// A job pinned to a crawler's older version is delivered by the sink of
// the same name of the version the worker carries.
func TestDelivererDeliversAPinnedJobAfterAnUpgrade(t *testing.T) {
	s := openStore(t)
	job, _ := sinkJob(t, s, "g1", "1.0.0", "a", "b")
	rc := &receiver{}
	d := &jobs.Deliverer{Store: s, Crawlers: shopCrawler("2.0.0", rc.sink("hook")), Group: "g1", Holder: "w1", Log: quiet()}
	passUntil(t, d, "the pinned job's items delivered", func() bool {
		vals, _, _ := rc.got()
		return len(vals) == 2
	})
	sinks, err := s.Sinks(testCtx(t), job)
	require.NoError(t, err)
	assert.Equal(t, int64(2), sinks[0].Delivered)
}

// countingStore counts the reads of sinks' states.
type countingStore struct {
	*sqlstore.Store
	mu    sync.Mutex
	reads map[string]int
}

func (c *countingStore) Sinks(ctx context.Context, job string) ([]jobs.SinkState, error) {
	c.mu.Lock()
	c.reads[job]++
	c.mu.Unlock()
	return c.Store.Sinks(ctx, job)
}

// A pass reads only the jobs of the worker's group with items to
// deliver: another group's job is neither read nor delivered, and a job
// whose sinks have every item is not read again until it has more.
func TestDelivererReadsOnlyItsGroupsJobsWithItemsToDeliver(t *testing.T) {
	s := openStore(t)
	mine, _ := sinkJob(t, s, "g1", "1", "a", "b")
	theirs, _ := sinkJob(t, s, "g2", "1", "x")
	none, _ := sinkJob(t, s, "g1", "1")
	cs := &countingStore{Store: s, reads: map[string]int{}}
	rc := &receiver{}
	d := &jobs.Deliverer{Store: cs, Crawlers: shopCrawler("1", rc.sink("hook")), Group: "g1", Holder: "w1", Log: quiet()}
	passUntil(t, d, "the group's job delivered", func() bool {
		vals, _, _ := rc.got()
		return len(vals) == 2
	})
	for range 3 {
		d.Pass(testCtx(t))
	}
	vals, _, _ := rc.got()
	assert.Equal(t, []string{"a", "b"}, vals, "another group's items are not delivered here")
	cs.mu.Lock()
	defer cs.mu.Unlock()
	assert.Equal(t, 0, cs.reads[theirs], "another group's job read")
	assert.Equal(t, 0, cs.reads[none], "a job without items read")
	assert.LessOrEqual(t, cs.reads[mine], 2, "a delivered job read again")
}

// renewStore lets a test hold or break the renewal of sink leases.
type renewStore struct {
	*sqlstore.Store
	renew func(ctx context.Context, l jobs.SinkLease, ttl time.Duration) error
}

func (r *renewStore) RenewSink(ctx context.Context, l jobs.SinkLease, ttl time.Duration) error {
	return r.renew(ctx, l, ttl)
}

// slowSink blocks each delivery until release is closed, or its context
// ends.
func slowSink(started chan<- struct{}, release <-chan struct{}, cancelled *bool) crawler.Sink {
	var once sync.Once
	return crawler.Sink{Name: "hook", Deliver: func(ctx context.Context, _ string, _ []crawler.StoredItem) error {
		once.Do(func() { close(started) })
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			*cancelled = true
			return ctx.Err()
		}
	}}
}

// The lease is renewed while a slow batch is delivered: another worker
// cannot take the sink, and the batch is acknowledged.
func TestDelivererRenewsTheLeaseWhileABatchIsDelivered(t *testing.T) {
	onEngines(t, func(t *testing.T, s *sqlstore.Store) {
		ctx := testCtx(t)
		job, items := sinkJob(t, s, "g1", "1", "a", "b")
		started, release := make(chan struct{}), make(chan struct{})
		var cancelled bool
		d := &jobs.Deliverer{Store: s, Crawlers: shopCrawler("1", slowSink(started, release, &cancelled)), Group: "g1", Holder: "w1",
			Lease: time.Second, Log: quiet()}
		done := make(chan int)
		go func() { done <- d.Pass(ctx) }()
		<-started
		until := time.Now().Add(3 * time.Second) // three leases
		for time.Now().Before(until) {
			_, err := s.LeaseSink(ctx, job, "hook", "w2", time.Minute)
			require.ErrorIs(t, err, jobs.ErrLeaseHeld, "another worker took the sink while its batch was delivered")
			time.Sleep(50 * time.Millisecond) // polling pace
		}
		close(release)
		assert.Equal(t, 2, <-done)
		sinks, err := s.Sinks(ctx, job)
		require.NoError(t, err)
		assert.Equal(t, items[1].Seq, sinks[0].Cursor)
		assert.False(t, cancelled)
	})
}

// A delivery that outlives its lease is not acknowledged: the lease that
// could not be renewed cancels it, and one whose renewals did not reach
// the store is refused at its acknowledgement; the cursor stays, and the
// next holder delivers the batch.
func TestDelivererDoesNotAcknowledgeADeliveryThatOutlivedItsLease(t *testing.T) {
	onEngines(t, func(t *testing.T, s *sqlstore.Store) {
		ctx := testCtx(t)
		job, _ := sinkJob(t, s, "g1", "1", "a")

		// The renewal answers that the lease is lost: the delivery's
		// context ends.
		lost := &renewStore{Store: s, renew: func(context.Context, jobs.SinkLease, time.Duration) error { return jobs.ErrLeaseLost }}
		started, release := make(chan struct{}), make(chan struct{})
		var cancelled bool
		d := &jobs.Deliverer{Store: lost, Crawlers: shopCrawler("1", slowSink(started, release, &cancelled)), Group: "g1", Holder: "w1",
			Lease: 300 * time.Millisecond, Log: quiet()}
		assert.Equal(t, 0, d.Pass(ctx))
		assert.True(t, cancelled, "the delivery went on without a lease")

		// The renewals never reach the store (a stalled worker): the
		// delivery ends after the lease ran out, and its ack is refused.
		silent := &renewStore{Store: s, renew: func(context.Context, jobs.SinkLease, time.Duration) error { return nil }}
		started2, release2 := make(chan struct{}), make(chan struct{})
		var cancelled2 bool
		d2 := &jobs.Deliverer{Store: silent, Crawlers: shopCrawler("1", slowSink(started2, release2, &cancelled2)), Group: "g1", Holder: "w2",
			Lease: 300 * time.Millisecond, Log: quiet()}
		done := make(chan int)
		go func() {
			for { // until w1's lease ran out and w2 took the sink
				n := d2.Pass(ctx)
				select {
				case <-started2:
					done <- n
					return
				case <-ctx.Done():
					return
				case <-time.After(20 * time.Millisecond): // the deliverer's pace, shortened
				}
			}
		}()
		<-started2
		var st jobs.SinkState
		testsuite.Eventually(t, 30*time.Second, "the lease ran out", func() (bool, error) {
			sinks, err := s.Sinks(ctx, job)
			if err != nil || len(sinks) == 0 {
				return false, err
			}
			st = sinks[0]
			return time.Now().After(st.LeaseUntil.Add(100 * time.Millisecond)), nil
		})
		close(release2)
		assert.Equal(t, 0, <-done, "acknowledged after the lease ran out")
		sinks, err := s.Sinks(ctx, job)
		require.NoError(t, err)
		assert.Equal(t, int64(0), sinks[0].Cursor)
		assert.Equal(t, int64(0), sinks[0].Delivered)

		// A worker with a lease delivers it.
		rc := &receiver{}
		d3 := &jobs.Deliverer{Store: s, Crawlers: shopCrawler("1", rc.sink("hook")), Group: "g1", Holder: "w3", Log: quiet()}
		passUntil(t, d3, "the batch delivered by the next holder", func() bool {
			vals, _, _ := rc.got()
			return len(vals) == 1
		})
	})
}

func TestRedactURLs(t *testing.T) {
	for in, want := range map[string]string{
		`Post "https://user:pw@hooks.example:8443/T0/B0/s3cr3t?token=abc#x": EOF`: `Post "https://hooks.example:8443": EOF`,
		`webhook hook: POST http://127.0.0.1:9/a?b=c: HTTP 500`:                   `webhook hook: POST http://127.0.0.1:9: HTTP 500`,
		`s3://bucket/key?X-Amz-Signature=abc and ftp://h/p`:                       `s3://bucket and ftp://h`,
		`no URL here`:           `no URL here`,
		`bad url http://[::1/x`: `bad url http://…`,
	} {
		assert.Equal(t, want, jobs.RedactURLs(in), in)
	}
}
