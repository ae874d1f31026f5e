package jobs

import (
	"context"
	"errors"
	"sync"
)

// This file reads a run's baseline records for its fetches in batches: a
// fetch asks for its URL's record, and the asks that arrive while a read
// runs go together into the next read (one indexed query for all of
// them), so a Runner with N fetches in flight reads its baseline in about
// one query per N pages instead of one per page.

// BaselineBatchReader is a store that reads many URLs' baseline records at
// once (sqlstore does); a RunnerStore without it is read page by page.
type BaselineBatchReader interface {
	// BaselinePages returns job's pages of urls with their revisit rows,
	// by URL; a URL job has no page of is absent.
	BaselinePages(ctx context.Context, job string, urls []string) (map[string]BaselinePage, error)
}

// baselineReads coalesces the baseline reads of one job's fetches on
// this worker.
type baselineReads struct {
	store   BaselineBatchReader
	job     string
	mu      sync.Mutex
	pending []*baselineAsk
	reading bool
}

// baselineAsk is one fetch's ask; wake says it is answered (false) or
// that its fetch is to make the next read (true).
type baselineAsk struct {
	url  string
	page *BaselinePage
	err  error
	wake chan bool
}

// page returns job's baseline record of url (nil: none), read together
// with the other asks waiting at the time.
func (b *baselineReads) page(ctx context.Context, url string) (*BaselinePage, error) {
	for {
		p, err := b.ask(ctx, url)
		// A read made for another fetch whose context ended: ask again.
		if err != nil && ctx.Err() == nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
			continue
		}
		return p, err
	}
}

func (b *baselineReads) ask(ctx context.Context, url string) (*BaselinePage, error) {
	a := &baselineAsk{url: url, wake: make(chan bool, 1)}
	b.mu.Lock()
	b.pending = append(b.pending, a)
	lead := !b.reading
	b.reading = true
	b.mu.Unlock()
	if !lead && !<-a.wake {
		return a.page, a.err
	}
	b.read(ctx)
	return a.page, a.err
}

// read answers the asks pending, its caller's among them, in one read,
// then hands the next read to the first ask that came meanwhile.
func (b *baselineReads) read(ctx context.Context) {
	b.mu.Lock()
	batch := b.pending
	b.pending = nil
	b.mu.Unlock()
	urls := make([]string, len(batch))
	for i, a := range batch {
		urls[i] = a.url
	}
	got, err := b.store.BaselinePages(ctx, b.job, urls)
	for _, a := range batch {
		if p, ok := got[a.url]; ok && err == nil {
			a.page = &p
		}
		a.err = err
	}
	b.mu.Lock()
	var next *baselineAsk
	if len(b.pending) > 0 {
		next = b.pending[0]
	} else {
		b.reading = false
	}
	b.mu.Unlock()
	for _, a := range batch {
		a.wake <- false
	}
	if next != nil {
		next.wake <- true
	}
}
