package jobs

import (
	"context"
	"errors"
	"time"
)

// This file is the bulk carry of a run with --adaptive (docs/recrawl.md):
// the pages of a batch that are not due are recorded inside the store, the
// baseline's rows copied into the job by SQL with their links queued, in
// one transaction per chunk, instead of page by page through fetch and
// the group commits. What the store does not carry (a page due, new, of a
// kind it leaves to the per-page path) is fetched as before, and the
// per-page path still carries a page that is not due (carried).

// CarryRequest asks a store to carry over the entries of a batch whose
// baseline page is not due at Now.
type CarryRequest struct {
	Job, Batch, Runner string
	Epoch              int64
	Baseline           string
	Now                time.Time
	// Follow and MaxDepth say whose links are queued again: a page's at a
	// depth below MaxDepth when the job follows links.
	Follow   bool
	MaxDepth int
	// Label is the label of a link queued (Options.LabelOf).
	Label   func(url string) string
	Entries []Entry
	// Left, when set, is told the entries the carry will not carry (due,
	// new, left to the per-page path), once it knows them and before it
	// writes: their fetches start while it writes. It is called at most
	// once, before CarryNotDue returns; an entry it names is never
	// carried.
	Left func([]Entry)
}

// CarryResult is what a bulk carry recorded: the URLs carried (finished
// in the batch, recorded unchanged) and the links it added to the frontier.
type CarryResult struct {
	Carried []string
	Added   int
}

// BulkCarrier is a store that carries pages not due over in bulk
// (sqlstore does). It records each page exactly as carried would: the
// baseline's page with the run's job, batch, runner, epoch, label and
// depth, no bytes, change unchanged, its validators, hashes, interval and
// next fetch time kept, its bytes counted as not downloaded, its links
// queued at the next depth. It carries a page only when the page's entry
// is unfinished in the batch at its epoch; a page it leaves (due, new,
// failed, rendered, with links refused or items, a sitemap) is the
// caller's to fetch. Idempotent: a page carried before is not carried
// again.
type BulkCarrier interface {
	CarryNotDue(ctx context.Context, req CarryRequest) (CarryResult, error)
}

// bulkCarries reports whether a batch of the job carries its pages not
// due in bulk: a job with adaptive intervals and a baseline, crawled by
// the built-in crawler, on a store that can.
func (r *BatchRunner) bulkCarries(jr *jobRun) (BulkCarrier, bool) {
	bc, ok := r.Store.(BulkCarrier)
	s := jr.spec
	return bc, ok && s.Adaptive != nil && s.Baseline != "" && jr.crawler == nil && !r.NoBulkCarry
}

// carryDone is a bulk carry's answer to the batch's loop.
type carryDone struct {
	seq  int     // the carry's number in the batch
	todo []Entry // the entries it was given
	left []Entry // those it said it leaves (CarryRequest.Left), if any
	res  CarryResult
	err  error
}

// carryLeft is what a bulk carry under way leaves to be fetched.
type carryLeft struct {
	seq     int
	entries []Entry
}

// maxCarry bounds the entries of one bulk carry.
const maxCarry = 500

// pullSize is how many URLs a pull of the batch asks for: n, or maxCarry
// when the batch carries in bulk and its last carry carried most of what
// it was given (a pull of a few URLs would make a carry of a few, each a
// transaction of its own).
func (b *batchRun) pullSize(n int) int {
	if b.carrier != nil && b.carriedMost {
		return max(n, maxCarry)
	}
	return n
}

// enqueue queues entries handed to the batch: to the bulk carry first when
// the batch carries, else to be fetched.
func (b *batchRun) enqueue(entries []Entry) {
	if b.carrier != nil {
		b.toCarry = append(b.toCarry, entries...)
		return
	}
	b.toFetch(entries...)
}

// toFetch queues entries to be fetched, their baseline records to be read
// ahead of their fetches.
func (b *batchRun) toFetch(entries ...Entry) {
	b.queue = append(b.queue, entries...)
	if b.jr.baselines == nil {
		return
	}
	urls := make([]string, 0, len(entries))
	for _, e := range entries {
		if e.Depth != SitemapDepth {
			urls = append(urls, e.URL)
		}
	}
	b.jr.baselines.expect(urls)
}

// startCarry starts a bulk carry of the entries waiting for one.
func (b *batchRun) startCarry() {
	if b.carrier == nil || b.carrying || len(b.toCarry) == 0 || b.stopping() || b.halted != "" {
		return
	}
	n := min(len(b.toCarry), maxCarry)
	todo := b.toCarry[:n:n]
	b.toCarry = b.toCarry[n:]
	b.carrying = true
	b.carrySeq++
	seq := b.carrySeq
	opts := b.jr.spec.Options
	var left []Entry
	req := CarryRequest{Job: b.in.Job, Batch: b.in.Batch, Runner: b.in.Runner, Epoch: b.in.Epoch, Baseline: b.jr.spec.Baseline,
		Now: b.r.now(), Follow: opts.Follow, MaxDepth: opts.MaxDepth, Label: opts.LabelOf, Entries: todo,
		Left: func(es []Entry) {
			left = es
			select {
			case b.carryLeft <- carryLeft{seq: seq, entries: es}:
			default: // (onCarried queues them)
			}
		}}
	go func() {
		res, err := b.carrier.CarryNotDue(b.ctx, req)
		b.carried <- carryDone{seq: seq, todo: todo, left: left, res: res, err: err}
	}()
}

// onCarryLeft queues to be fetched what the carry under way leaves, while
// it writes; a carry's that is over was queued by onCarried.
func (b *batchRun) onCarryLeft(l carryLeft) {
	if !b.carrying || l.seq != b.carrySeq || b.stopping() || b.halted != "" {
		return
	}
	b.leftQueued = l.seq
	b.toFetch(l.entries...)
}

// onCarried counts the pages a bulk carry recorded and queues the rest
// to be fetched.
func (b *batchRun) onCarried(c carryDone) {
	b.carrying = false
	if c.err != nil {
		if b.ctx.Err() == nil || errors.Is(c.err, ErrStale) {
			b.stop(c.err)
		}
		return
	}
	done := make(map[string]bool, len(c.res.Carried)+len(c.left))
	for _, u := range c.res.Carried {
		done[u] = true
	}
	if b.leftQueued == c.seq {
		for _, e := range c.left {
			done[e.URL] = true // queued already
		}
	}
	b.carriedMost = 2*len(c.res.Carried) >= len(c.todo)
	var rest []Entry
	for _, e := range c.todo {
		if !done[e.URL] {
			rest = append(rest, e)
		}
	}
	b.toFetch(rest...)
	b.ran += len(c.res.Carried)
	if c.res.Added > 0 && !b.draining {
		b.exhausted = false
		b.linksGen++
	}
}
