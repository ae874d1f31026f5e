package jobs

import (
	"context"
	"sync"
	"time"
)

// This file opens a batch's run: what it reads before its first fetch,
// read at once.

// opened is what a batch's run read before its first fetch (open).
type opened struct {
	jr   *jobRun
	jerr error // reading or readying the job's run (job)
	info BatchInfo
	herr error // holding the batch (holding)
	todo []Entry
	uerr error // reading its unfinished URLs (only when it is running)
	// first is the batch's first renewal of its host leases (Pull of
	// none, sized to the Runner's concurrency), and when it answered; nil
	// when it was refused or failed: crawl renews them itself then (a
	// batch holding had to claim is refused until the claim is in).
	first *renewal
}

// renewal is a renewal of a batch's host leases and when it answered.
type renewal struct {
	p  Pulled
	at time.Time
}

// open reads what a batch's run needs before its first fetch, the three
// at once: the job's run (job: the spec, read once per worker), the
// batch's row (holding) and then its unfinished URLs, and a first renewal
// of its host leases. On a new job's first batch that is three round
// trips to the store fewer before the seed is fetched. The renewal is a
// write checked against the batch's epoch, like every renewal: sent for
// a batch that is not ours, or no longer running, it is refused and
// changes nothing.
func (r *BatchRunner) open(ctx context.Context, in BatchRun) opened {
	var o opened
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		p, err := r.Store.Pull(ctx, in.Job, in.Batch, in.Epoch, 0, r.concurrency())
		if err == nil {
			o.first = &renewal{p: p, at: time.Now()}
		}
	}()
	go func() {
		defer wg.Done()
		o.info, o.herr = r.holding(ctx, in)
		if o.herr == nil && o.info.State == BatchRunning {
			o.todo, o.uerr = r.Store.Unfinished(ctx, in.Job, in.Batch)
		}
	}()
	o.jr, o.jerr = r.job(ctx, in.Job, in.Log)
	wg.Wait()
	return o
}

// concurrency is the Runner's requests in flight at once.
func (r *BatchRunner) concurrency() int {
	if r.Concurrency <= 0 {
		return DefaultConcurrency
	}
	return r.Concurrency
}
