package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/batoncrawl/baton/activities/crawler"
)

// sinkRun is one delivery of a job's items to a sink under a lease.
type sinkRun struct {
	d     *Deliverer
	log   *slog.Logger
	sink  crawler.Sink
	lease SinkLease
	ttl   time.Duration
	key   string
	// failures and refusals of the batch at the cursor.
	failures, refusals int
}

// deliver leases st's sink and delivers to it: the dead letters to retry
// first, then the items past its cursor, until none is left or a
// delivery fails. It returns the items delivered and whether the sink
// has every item up to seq.
func (d *Deliverer) deliver(ctx context.Context, log *slog.Logger, st SinkState, s crawler.Sink, seq int64) (int, bool) {
	key := st.Job + "\x00" + s.Name
	if d.waiting(key) {
		return 0, false
	}
	ttl := d.Lease
	if ttl <= 0 {
		ttl = 30 * time.Second
	}
	retries := st.DeadLetters
	st, err := d.Store.LeaseSink(ctx, st.Job, s.Name, d.Holder, ttl)
	if errors.Is(err, ErrLeaseHeld) || errors.Is(err, ErrSinkBackoff) {
		return 0, false
	}
	if err != nil {
		if ctx.Err() == nil {
			log.Warn("sink lease", "err", err)
		}
		return 0, false
	}
	r := &sinkRun{d: d, log: log, sink: s, lease: st.Lease(d.Holder), ttl: ttl, key: key, failures: st.Failures, refusals: st.Refusals}
	n := 0
	for _, dl := range retries {
		if !dl.Retry {
			continue
		}
		got, ok := r.redeliver(ctx, dl)
		n += got
		if !ok {
			return n, false
		}
	}
	got, cursor, ok := r.forward(ctx, st.Cursor)
	return n + got, ok && cursor >= seq
}

// limits are the sink's batch bounds: items, and bytes under the
// worker's cap.
func (r *sinkRun) limits() (int, int64) {
	items := r.sink.Batch
	if items <= 0 {
		items = crawler.DefaultSinkBatch
	}
	bytes := r.sink.MaxBytes
	if bytes <= 0 {
		bytes = crawler.DefaultSinkBatchBytes
	}
	capB := r.d.MaxBatchBytes
	if capB <= 0 {
		capB = DefaultMaxSinkBatchBytes
	}
	return items, min(bytes, capB)
}

// maxFailures is how many refusals in a row dead-letter a batch (<= 0:
// never).
func (r *sinkRun) maxFailures() int {
	switch {
	case r.sink.MaxFailures != 0:
		return r.sink.MaxFailures
	case r.d.MaxFailures != 0:
		return r.d.MaxFailures
	}
	return crawler.DefaultSinkMaxFailures
}

// forward delivers the items past cursor; a batch refused too often is
// dead-lettered and the next one delivered. It returns the items
// delivered, the cursor, and whether no item is left.
func (r *sinkRun) forward(ctx context.Context, cursor int64) (int, int64, bool) {
	limit, maxBytes := r.limits()
	n := 0
	for ctx.Err() == nil {
		items, err := r.d.Store.ItemBatch(ctx, r.lease.Job, ItemQuery{After: cursor, Limit: limit, MaxBytes: maxBytes})
		if err != nil {
			return n, cursor, false
		}
		if len(items) == 0 {
			return n, cursor, true
		}
		first, last := items[0].Seq, items[len(items)-1].Seq
		if err := r.send(ctx, items); err != nil {
			if !r.failed(ctx, err, DeadLetter{First: first, Last: last, Items: len(items)}) {
				return n, cursor, false
			}
			cursor = last // dead-lettered: on to the next batch
			continue
		}
		if err := r.d.Store.AckSink(ctx, r.lease, last, len(items)); err != nil {
			// Lost the lease: the next holder delivers from the cursor
			// again (at least once).
			if ctx.Err() == nil {
				r.log.Warn("sink: cursor not moved", "err", err)
			}
			return n, cursor, false
		}
		r.failures, r.refusals = 0, 0
		r.d.wait(r.key, 0)
		cursor = last
		n += len(items)
	}
	return n, cursor, false
}

// redeliver delivers a dead letter's items again (baton sink retry); it
// returns the items delivered and whether the sink may go on (the dead
// letter was delivered, or refused again and stays).
func (r *sinkRun) redeliver(ctx context.Context, dl DeadLetter) (int, bool) {
	limit, maxBytes := r.limits()
	n, after := 0, dl.First-1
	for ctx.Err() == nil {
		items, err := r.d.Store.ItemBatch(ctx, r.lease.Job, ItemQuery{After: after, UpTo: dl.Last, Limit: limit, MaxBytes: maxBytes})
		if err != nil {
			return n, false
		}
		upTo, k := dl.Last, 0
		if len(items) > 0 {
			if err := r.send(ctx, items); err != nil {
				return n, r.failedAgain(ctx, err, dl)
			}
			upTo, k = items[len(items)-1].Seq, len(items)
		}
		if err := r.d.Store.AckDeadLetter(ctx, r.lease, dl.Last, upTo, k); err != nil {
			return n, false
		}
		n += k
		r.log.Info("sink: dead letter delivered", "first_seq", after+1, "last_seq", upTo, "items", k)
		if upTo >= dl.Last {
			return n, true
		}
		after = upTo
	}
	return n, false
}

// send delivers items under the lease, renewing it every third of its
// ttl while Deliver runs; a lease that could not be renewed cancels the
// delivery, which is then an error (ErrLeaseLost) and not acknowledged.
func (r *sinkRun) send(ctx context.Context, items []ItemRecord) error {
	timeout := r.d.Timeout
	if timeout <= 0 {
		timeout = time.Minute
	}
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if r.d.Client != nil {
		dctx = crawler.WithClient(dctx, r.d.Client)
	}
	var lost atomic.Bool
	stop, renewed := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(renewed)
		t := time.NewTicker(r.ttl / 3)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			// A store that does not answer is tried again at the next
			// tick; once the lease ran out the renewal is refused.
			if err := r.d.Store.RenewSink(ctx, r.lease, r.ttl); errors.Is(err, ErrLeaseLost) {
				lost.Store(true)
				cancel()
				return
			}
		}
	}()
	out := make([]crawler.StoredItem, len(items))
	for i, it := range items {
		out[i] = it.StoredItem
	}
	err := deliverSafely(dctx, r.sink, r.lease.Job, out)
	close(stop)
	<-renewed
	if lost.Load() {
		return fmt.Errorf("the sink's lease was lost during the delivery: %w", ErrLeaseLost)
	}
	return err
}

// failed records the failed delivery of batch at the cursor; it returns
// true when the batch was dead-lettered (the sink goes on past it).
func (r *sinkRun) failed(ctx context.Context, err error, batch DeadLetter) bool {
	if errors.Is(err, ErrLeaseLost) {
		r.log.Warn("sink: delivery not acknowledged", "err", err)
		return false
	}
	r.d.Metrics.SinkDelivery(r.sink.Name, false)
	reason := RedactURLs(err.Error())
	refused := !errors.Is(err, crawler.ErrSinkUnavailable)
	r.failures++
	if refused {
		r.refusals++
	}
	if most := r.maxFailures(); refused && most > 0 && r.refusals >= most {
		batch.Failures, batch.LastError = r.failures, reason
		if derr := r.d.Store.DeadLetter(ctx, r.lease, batch); derr != nil {
			if ctx.Err() == nil {
				r.log.Warn("sink: dead letter not recorded", "err", derr)
			}
			return false
		}
		r.log.Warn("sink: batch refused too often, dead-lettered; delivery goes on after it (baton sink skip|retry)",
			"err", reason, "first_seq", batch.First, "last_seq", batch.Last, "items", batch.Items, "failures", r.failures)
		r.failures, r.refusals = 0, 0
		r.d.wait(r.key, 0)
		return true
	}
	backoff := r.d.backoff(r.failures)
	r.d.wait(r.key, backoff)
	r.log.Warn("sink delivery failed; retried with backoff", "err", reason, "items", batch.Items, "failures", r.failures,
		"refused", refused, "retry_in", backoff)
	if ferr := r.d.Store.FailSink(ctx, r.lease, SinkFailure{Reason: reason, Refused: refused, Backoff: backoff}); ferr != nil &&
		ctx.Err() == nil && !errors.Is(ferr, ErrLeaseLost) {
		r.log.Warn("sink: record failure", "err", ferr)
	}
	return false
}

// failedAgain records a retried dead letter's failed delivery: refused,
// it stays a dead letter (not retried again) and the sink goes on; the
// sink unavailable, it waits and the dead letter stays to be retried.
func (r *sinkRun) failedAgain(ctx context.Context, err error, dl DeadLetter) bool {
	if errors.Is(err, ErrLeaseLost) || errors.Is(err, crawler.ErrSinkUnavailable) {
		r.failed(ctx, err, DeadLetter{First: dl.First, Last: dl.Last, Items: dl.Items})
		return false
	}
	r.d.Metrics.SinkDelivery(r.sink.Name, false)
	reason := RedactURLs(err.Error())
	r.log.Warn("sink: dead letter refused again; it stays (baton sink skip|retry)", "err", reason, "last_seq", dl.Last)
	if ferr := r.d.Store.FailDeadLetter(ctx, r.lease, dl.Last, reason); ferr != nil {
		return false
	}
	return true
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
