package jobs

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/batoncrawl/baton/activities/crawler"
	"github.com/batoncrawl/baton/activities/telemetry"
)

// DeliveryStore is what a Deliverer needs of the store: the jobs' specs,
// their sinks' states, and the delivery of their items.
type DeliveryStore interface {
	Spec(ctx context.Context, job string) (Spec, error)
	Sinks(ctx context.Context, job string) ([]SinkState, error)
	SinkDelivery
}

// DefaultMaxSinkBatchBytes caps the bytes of one batch of any sink unless
// the worker sets its own cap (--max-sink-batch-bytes).
const DefaultMaxSinkBatchBytes = 16 << 20

// Deliverer delivers the recorded items of the jobs of its group to the
// sinks (crawler.Sink) of the crawlers this worker carries, beside the
// crawl and never in its way: each (job, sink) is delivered by one worker
// of the group at a time (a lease in the store, renewed while a batch is
// delivered), in Seq order, from the sink's durable cursor, which moves
// only after Deliver returned nil under a lease that still runs (at
// least once). A failing sink is retried with backoff (Backoff, doubling
// up to MaxBackoff); a batch it refused MaxFailures times in a row is
// set aside as a dead letter and the items after it are delivered. Its
// failures, last error and dead letters are in the store (baton status)
// and in metrics.
//
// A job's items go to the sinks of the crawler of the job's name carried
// here, whatever version the job was pinned to: a sink is known by its
// name, so the jobs of a crawler's older versions are delivered after an
// upgrade. Each pass reads only the jobs of the group with items to
// deliver (SinkDelivery.PendingJobs). Run it in its own goroutine; it
// returns when ctx ends.
type Deliverer struct {
	Store    DeliveryStore
	Crawlers map[string]*crawler.Crawler
	// Group is the worker's group: only its jobs are delivered.
	Group string
	// Holder names this worker in the sinks' leases (its instance name).
	Holder string
	// Every is how often the jobs are looked at (default 1 s); Lease how
	// long a lease lasts without renewal (default 30 s); Timeout how long
	// one Deliver call may take (default 1 min).
	Every, Lease, Timeout time.Duration
	// Backoff is the first wait after a failed delivery (default 1 s),
	// MaxBackoff the longest (default 1 min).
	Backoff, MaxBackoff time.Duration
	// MaxBatchBytes caps every sink's batch in bytes
	// (DefaultMaxSinkBatchBytes if 0); MaxFailures is how many refusals
	// in a row dead-letter a batch of a sink that does not say
	// (crawler.DefaultSinkMaxFailures if 0).
	MaxBatchBytes int64
	MaxFailures   int
	Log           *slog.Logger
	Metrics       *telemetry.Metrics
	// Client is the client sinks get (crawler.Client): the worker's,
	// dialling under the operator's rules (crawl.Engine.Client); nil
	// leaves crawler.Client's default.
	Client *http.Client

	mu    sync.Mutex
	specs map[string]Spec      // job → spec (immutable)
	next  map[string]time.Time // job/sink → no delivery before (backoff)
}

// Run delivers until ctx ends.
func (d *Deliverer) Run(ctx context.Context) {
	every := d.Every
	if every <= 0 {
		every = time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		d.Pass(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (d *Deliverer) log() *slog.Logger {
	if d.Log == nil {
		return slog.Default()
	}
	return d.Log
}

// Pass looks once at each job of the group with items to deliver: for a
// job of a crawler carried here, each sink whose lease it gets is
// delivered to until it has no more items or fails; a job whose sinks all
// have its items is marked delivered. It returns the items delivered.
func (d *Deliverer) Pass(ctx context.Context) int {
	pending, err := d.Store.PendingJobs(ctx, d.Group)
	if err != nil {
		if ctx.Err() == nil {
			d.log().Warn("sinks: jobs with items to deliver", "err", err)
		}
		return 0
	}
	n := 0
	for _, p := range pending {
		spec, err := d.spec(ctx, p.Job)
		if errors.Is(err, ErrNoJob) {
			_ = d.Store.SinkJobDone(ctx, p.Job, p.Seq) // a job deleted: nothing to deliver
			continue
		}
		if err != nil {
			continue
		}
		c := d.Crawlers[spec.Crawler]
		if c == nil {
			continue // another worker's crawler
		}
		got, done := d.deliverJob(ctx, p, c)
		n += got
		if done {
			if err := d.Store.SinkJobDone(ctx, p.Job, p.Seq); err != nil && ctx.Err() == nil {
				d.log().Warn("sinks: mark job delivered", "job", p.Job, "err", err)
			}
		}
	}
	return n
}

// deliverJob delivers p's items to each of c's sinks that lacks some; it
// returns the items delivered and whether every sink has them all.
func (d *Deliverer) deliverJob(ctx context.Context, p PendingJob, c *crawler.Crawler) (int, bool) {
	// Read-only first: a sink that has the job's items is neither
	// leased nor written.
	states, err := d.Store.Sinks(ctx, p.Job)
	if err != nil {
		return 0, false
	}
	n, done := 0, true
	for _, s := range c.Sinks() {
		st := SinkState{Job: p.Job, Sink: s.Name}
		for _, x := range states {
			if x.Sink == s.Name {
				st = x
			}
		}
		if caughtUp(st, p.Seq) {
			continue
		}
		got, ok := d.deliver(ctx, d.log().With("job", p.Job, "sink", s.Name), st, s, p.Seq)
		n += got
		done = done && ok
	}
	return n, done
}

// caughtUp: the sink has every item up to seq, and no dead letter of it
// waits to be retried.
func caughtUp(st SinkState, seq int64) bool {
	for _, dl := range st.DeadLetters {
		if dl.Retry {
			return false
		}
	}
	return st.Cursor >= seq
}

func (d *Deliverer) spec(ctx context.Context, job string) (Spec, error) {
	d.mu.Lock()
	s, ok := d.specs[job]
	d.mu.Unlock()
	if ok {
		return s, nil
	}
	s, err := d.Store.Spec(ctx, job)
	if err != nil {
		return s, err
	}
	d.mu.Lock()
	if d.specs == nil {
		d.specs = map[string]Spec{}
	}
	d.specs[job] = s
	d.mu.Unlock()
	return s, nil
}

// waiting: the sink failed here and its backoff has not passed.
func (d *Deliverer) waiting(key string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return time.Now().Before(d.next[key])
}

// wait records that the sink is not tried here again before backoff.
func (d *Deliverer) wait(key string, backoff time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.next == nil {
		d.next = map[string]time.Time{}
	}
	if backoff <= 0 {
		delete(d.next, key)
		return
	}
	d.next[key] = time.Now().Add(backoff)
}

// backoff is the wait after the failures-th failure in a row.
func (d *Deliverer) backoff(failures int) time.Duration {
	b := d.Backoff
	if b <= 0 {
		b = time.Second
	}
	maxB := d.MaxBackoff
	if maxB <= 0 {
		maxB = time.Minute
	}
	for i := 1; i < failures && b < maxB; i++ {
		b *= 2
	}
	return min(b, maxB)
}
