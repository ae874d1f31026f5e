package crawl

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// limiter holds the per-domain limits of an Engine: at most Parallelism
// concurrent requests per domain, and Delay between requests (a request
// starts Delay after the last start and the last end of a request to the
// domain). The limits are those of each caller's Options, so callers with
// different Options share the domain fairly: each waits for its own bound.
type limiter struct {
	mu      sync.Mutex
	domains map[string]*domainState
}

type domainState struct {
	active  int
	waiting int
	last    time.Time     // last start or end of a request
	changed chan struct{} // closed and replaced on every release
}

func newLimiter() *limiter { return &limiter{domains: map[string]*domainState{}} }

// acquire waits for a slot of domain and returns its release function;
// the request starts no earlier than notBefore (when set). It fails when
// ctx ends, or at once when ctx's deadline comes before the delay would
// let the request start.
func (l *limiter) acquire(ctx context.Context, domain string, parallelism int, delay time.Duration, notBefore time.Time) (func(), error) {
	if parallelism < 1 {
		parallelism = 1
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l.mu.Lock()
	d := l.domains[domain]
	if d == nil {
		d = &domainState{changed: make(chan struct{})}
		l.domains[domain] = d
	}
	d.waiting++
	defer func() {
		l.mu.Lock()
		d.waiting--
		l.mu.Unlock()
	}()
	for {
		if d.active < parallelism {
			now := time.Now()
			next := d.last.Add(delay)
			if notBefore.After(next) {
				next = notBefore
			}
			if !next.After(now) {
				d.active++
				d.last = now
				l.mu.Unlock()
				var once sync.Once
				return func() { once.Do(func() { l.release(domain, d) }) }, nil
			}
			l.mu.Unlock()
			if dl, ok := ctx.Deadline(); ok && dl.Before(next) {
				return nil, fmt.Errorf("per-domain delay of %s for %s would end after the deadline", delay, domain)
			}
			t := time.NewTimer(next.Sub(now))
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
			case <-t.C:
			}
		} else {
			ch := d.changed
			l.mu.Unlock()
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-ch:
			}
		}
		l.mu.Lock()
	}
}

func (l *limiter) release(domain string, d *domainState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	d.active--
	d.last = time.Now()
	close(d.changed)
	d.changed = make(chan struct{})
	if len(l.domains) > 4096 {
		l.pruneLocked()
	}
}

// pruneLocked forgets idle domains whose last request is old enough that no
// delay can still apply.
func (l *limiter) pruneLocked() {
	for k, d := range l.domains {
		if d.active == 0 && d.waiting == 0 && time.Since(d.last) > 10*time.Minute {
			delete(l.domains, k)
		}
	}
}
