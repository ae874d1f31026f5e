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
	// first is the batch's host leases as its hand-out (or its last
	// renewal) left them, read (RunnerStore.Leases), and when; nil when
	// they were not read, may have been read before holding claimed the
	// batch, or do not cover its unfinished URLs (a hand-over's, expired
	// meanwhile): crawl renews them before its first fetch then.
	first *renewal
}

// renewal is a batch's host leases, renewed (a Pull of none) or read
// (read: crawl renews them at once, beside its first fetches), and when
// they were answered.
type renewal struct {
	p    Pulled
	at   time.Time
	read bool
}

// open reads what a batch's run needs before its first fetch, the three
// at once: the job's run (job: the spec, read once per worker), the
// batch's row (holding) and then its unfinished URLs, and its host
// leases. None of them waits for the job's lock, which the hand-outs of
// the job's other batches hold at its start: its first fetches go out at
// once, with the leases its hand-out took (TakeBatch leases the hosts of
// the URLs it hands out), and crawl renews and sizes them to the Runner's
// concurrency (a Pull, a write checked against the batch's epoch: for a
// batch that is not ours it is refused, and the run stops) beside them.
func (r *BatchRunner) open(ctx context.Context, in BatchRun) opened {
	var o opened
	claimed := false
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		hosts, err := r.Store.Leases(ctx, in.Job, in.Batch)
		if err == nil {
			o.first = &renewal{p: Pulled{Hosts: hosts}, at: time.Now(), read: true}
		}
	}()
	go func() {
		defer wg.Done()
		o.info, claimed, o.herr = r.holding(ctx, in)
		if o.herr == nil && o.info.State == BatchRunning {
			o.todo, o.uerr = r.Store.Unfinished(ctx, in.Job, in.Batch)
		}
	}()
	o.jr, o.jerr = r.job(ctx, in.Job, in.Log)
	wg.Wait()
	if claimed {
		// Claimed here (its Task written before its claim: an older
		// Baton's), the claim renewing the leases for the new holder
		// (the wait since the old holder's last request) maybe after
		// they were read.
		o.first = nil
	}
	if o.first == nil || o.jr == nil {
		return o
	}
	o.first.p.TTL = LeaseTTL(o.jr.spec.Timers)
	held := make(map[string]bool, len(o.first.p.Hosts))
	for i, l := range o.first.p.Hosts {
		held[l.Host] = true
		if !l.Exclusive {
			// As the renewal sizes it: a hand-out of n URLs leased a
			// shared host for n requests at once.
			o.first.p.Hosts[i].Share = min(l.Share, r.concurrency())
		}
	}
	for _, e := range o.todo {
		if h := HostOf(e.URL); h != "" && !held[h] {
			o.first = nil // renewed (or found lost) before any fetch
			break
		}
	}
	return o
}

// concurrency is the Runner's requests in flight at once.
func (r *BatchRunner) concurrency() int {
	if r.Concurrency <= 0 {
		return DefaultConcurrency
	}
	return r.Concurrency
}
