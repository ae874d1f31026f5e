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

// SinkStore is what a Deliverer needs of the store: the jobs, their specs,
// their items and the sinks' leases.
type SinkStore interface {
	Jobs(ctx context.Context) ([]JobInfo, error)
	Spec(ctx context.Context, job string) (Spec, error)
	ItemStore
}

// Deliverer delivers the recorded items of the jobs of this worker's
// crawlers to their sinks (crawler.Sink), beside the crawl and never in
// its way: each (job, sink) is delivered by one worker of the group at a
// time (a lease in the store, renewed while it delivers), in Seq order,
// from the sink's durable cursor, which moves only after Deliver returned
// nil (at least once). A failing sink is retried with backoff (Backoff,
// doubling up to MaxBackoff); its failures and last error are in the store
// (baton status) and in metrics. Run it in its own goroutine; it returns
// when ctx ends.
type Deliverer struct {
	Store    SinkStore
	Crawlers map[string]*crawler.Crawler
	// Holder names this worker in the sinks' leases (its instance name).
	Holder string
	// Every is how often the jobs are looked at (default 1 s); Lease how
	// long a lease lasts without renewal (default 30 s).
	Every, Lease time.Duration
	// Backoff is the first wait after a failed delivery (default 1 s),
	// MaxBackoff the longest (default 1 min).
	Backoff, MaxBackoff time.Duration
	Log                 *slog.Logger
	Metrics             *telemetry.Metrics
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

// Pass looks at every job once: for each job of a crawler carried here,
// each of its sinks whose lease it gets is delivered to until it has no
// more items or fails. It returns the items delivered.
func (d *Deliverer) Pass(ctx context.Context) int {
	log := d.Log
	if log == nil {
		log = slog.Default()
	}
	jobs, err := d.Store.Jobs(ctx)
	if err != nil {
		if ctx.Err() == nil {
			log.Warn("sinks: list jobs", "err", err)
		}
		return 0
	}
	n := 0
	for _, j := range jobs {
		if j.Stats.Items == 0 {
			continue // nothing to deliver, whatever its crawler
		}
		spec, err := d.spec(ctx, j.ID)
		if err != nil {
			continue
		}
		c := d.Crawlers[spec.Crawler]
		if c == nil || (spec.CrawlerVersion != "" && c.Version() != spec.CrawlerVersion) {
			continue
		}
		// Read-only first: a sink whose cursor has caught up with the
		// job's items is neither leased nor written.
		states, err := d.Store.Sinks(ctx, j.ID)
		if err != nil {
			continue
		}
		for _, s := range c.Sinks() {
			var cursor int64
			for _, st := range states {
				if st.Sink == s.Name {
					cursor = st.Cursor
				}
			}
			if more, err := d.Store.Items(ctx, j.ID, cursor, 1); err != nil || len(more) == 0 {
				continue
			}
			n += d.deliver(ctx, log.With("job", j.ID, "sink", s.Name), j.ID, s)
		}
	}
	return n
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

// deliver delivers job's items to s while it holds the lease, has items
// and succeeds; it returns how many it delivered.
func (d *Deliverer) deliver(ctx context.Context, log *slog.Logger, job string, s crawler.Sink) int {
	key := job + "\x00" + s.Name
	d.mu.Lock()
	wait := d.next[key]
	d.mu.Unlock()
	if time.Now().Before(wait) {
		return 0
	}
	lease := d.Lease
	if lease <= 0 {
		lease = 30 * time.Second
	}
	batch := s.Batch
	if batch <= 0 {
		batch = crawler.DefaultSinkBatch
	}
	st, err := d.Store.LeaseSink(ctx, job, s.Name, d.Holder, lease)
	if errors.Is(err, ErrLeaseHeld) {
		return 0
	}
	if err != nil {
		if ctx.Err() == nil {
			log.Warn("sink lease", "err", err)
		}
		return 0
	}
	delivered := 0
	cursor := st.Cursor
	for ctx.Err() == nil {
		items, err := d.Store.Items(ctx, job, cursor, batch)
		if err != nil || len(items) == 0 {
			return delivered
		}
		out := make([]crawler.StoredItem, len(items))
		for i, it := range items {
			out[i] = it.StoredItem
		}
		dctx, cancel := context.WithTimeout(ctx, lease/2)
		if d.Client != nil {
			dctx = crawler.WithClient(dctx, d.Client)
		}
		err = deliverSafely(dctx, s, job, out)
		cancel()
		if err != nil {
			d.Metrics.SinkDelivery(s.Name, false)
			failures := st.Failures + 1
			st.Failures = failures
			backoff := d.Backoff
			if backoff <= 0 {
				backoff = time.Second
			}
			maxB := d.MaxBackoff
			if maxB <= 0 {
				maxB = time.Minute
			}
			for i := 1; i < failures && backoff < maxB; i++ {
				backoff *= 2
			}
			backoff = min(backoff, maxB)
			d.mu.Lock()
			if d.next == nil {
				d.next = map[string]time.Time{}
			}
			d.next[key] = time.Now().Add(backoff)
			d.mu.Unlock()
			log.Warn("sink delivery failed; retried with backoff", "err", err, "items", len(out), "failures", failures, "retry_in", backoff)
			if ferr := d.Store.FailSink(ctx, job, s.Name, d.Holder, err.Error()); ferr != nil && ctx.Err() == nil && !errors.Is(ferr, ErrLeaseLost) {
				log.Warn("sink: record failure", "err", ferr)
			}
			return delivered
		}
		d.Metrics.SinkDelivery(s.Name, true)
		st.Failures = 0
		last := items[len(items)-1].Seq
		if err := d.Store.AckSink(ctx, job, s.Name, d.Holder, last, len(items)); err != nil {
			// Lost the lease mid-delivery: the next holder delivers from
			// the cursor again (at least once).
			if ctx.Err() == nil {
				log.Warn("sink: cursor not moved", "err", err)
			}
			return delivered
		}
		cursor = last
		delivered += len(items)
		// Renew the lease for the next round.
		if _, err := d.Store.LeaseSink(ctx, job, s.Name, d.Holder, lease); err != nil {
			return delivered
		}
	}
	return delivered
}

// deliverSafely calls s.Deliver, turning a panic into an error.
func deliverSafely(ctx context.Context, s crawler.Sink, job string, items []crawler.StoredItem) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = errors.New("sink panicked")
		}
	}()
	return s.Deliver(ctx, job, items)
}
