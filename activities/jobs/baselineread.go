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
// one query per N pages instead of one per page. A read also takes the
// URLs queued to be fetched next (expect), up to readAhead of them, and
// keeps their records until their fetches ask: a batch reads its
// baseline in about one query per readAhead pages.

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
	// ahead are the URLs queued to be fetched and not read yet, in queue
	// order; wanted the same as a set (an ask takes its URL out).
	ahead  []string
	wanted map[string]bool
	// kept are the records read ahead of their fetches' asks (nil: the
	// baseline has no page of the URL).
	kept map[string]*BaselinePage
}

// readAhead bounds the URLs a read takes ahead of their asks; maxKept
// bounds the URLs expected and the records kept (beyond, the oldest
// expected are forgotten and the records kept dropped: their fetches
// read them again).
const (
	readAhead = 256
	maxKept   = 4 * readAhead
)

// expect says the URLs are queued to be fetched, in that order: a read
// takes them ahead of their asks.
func (b *baselineReads) expect(urls []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.wanted == nil {
		b.wanted = map[string]bool{}
	}
	for _, u := range urls {
		if _, kept := b.kept[u]; !b.wanted[u] && !kept {
			b.wanted[u] = true
			b.ahead = append(b.ahead, u)
		}
	}
	if over := len(b.ahead) - maxKept; over > 0 {
		for _, u := range b.ahead[:over] {
			delete(b.wanted, u)
		}
		b.ahead = append([]string(nil), b.ahead[over:]...)
	}
}

// takeAhead pops up to readAhead URLs still wanted from ahead, none of
// them in skip. The caller holds mu.
func (b *baselineReads) takeAhead(skip map[string]bool) []string {
	var out []string
	i := 0
	for ; i < len(b.ahead) && len(out) < readAhead; i++ {
		u := b.ahead[i]
		if b.wanted[u] && !skip[u] {
			delete(b.wanted, u)
			out = append(out, u)
		}
	}
	b.ahead = b.ahead[i:]
	return out
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
	if p, ok := b.kept[url]; ok {
		delete(b.kept, url)
		b.mu.Unlock()
		return p, nil
	}
	delete(b.wanted, url)
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
	urls := make([]string, len(batch))
	asked := make(map[string]bool, len(batch))
	for i, a := range batch {
		urls[i] = a.url
		asked[a.url] = true
	}
	extra := b.takeAhead(asked)
	b.mu.Unlock()
	got, err := b.store.BaselinePages(ctx, b.job, append(urls, extra...))
	for _, a := range batch {
		if p, ok := got[a.url]; ok && err == nil {
			a.page = &p
		}
		a.err = err
	}
	b.mu.Lock()
	b.keep(extra, got, err)
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

// keep keeps the records of urls read ahead (none when the read failed:
// their fetches read them again). The caller holds mu.
func (b *baselineReads) keep(urls []string, got map[string]BaselinePage, err error) {
	if err != nil || len(urls) == 0 {
		return
	}
	if b.kept == nil || len(b.kept)+len(urls) > maxKept {
		b.kept = make(map[string]*BaselinePage, len(urls))
	}
	for _, u := range urls {
		if p, ok := got[u]; ok {
			b.kept[u] = &p
		} else {
			b.kept[u] = nil
		}
	}
}
