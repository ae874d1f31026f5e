package render

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Pool renders pages in headless Chromium: at most Config.Tabs at a time,
// over browsers it starts when needed and retires. Safe for concurrent use.
type Pool struct {
	cfg  Config
	path string
	tabs chan struct{}

	mu       sync.Mutex
	browsers []*browser // running, retiring ones included
	idle     []*tab     // tabs waiting for a page
	seq      int64
	closed   bool

	stats counters
}

type counters struct {
	pages, failed, crashes, refused, blocked, started, retired atomic.Int64
}

// Stats are a Pool's counters since New.
type Stats struct {
	Pages    int64 // pages rendered
	Failed   int64 // renders that failed
	Crashes  int64 // tabs that crashed (each retried once)
	Refused  int64 // requests the policy refused
	Blocked  int64 // requests of blocked resource types
	Started  int64 // browsers started
	Retired  int64 // browsers closed
	Browsers int   // browsers running now
}

// ErrClosed is returned by Render on a closed Pool.
var ErrClosed = errors.New("render: pool closed")

// New validates cfg and returns a Pool; no browser starts before the
// first Render.
func New(cfg Config) (*Pool, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	path, err := cfg.execPath()
	if err != nil {
		return nil, err
	}
	return &Pool{cfg: cfg, path: path, tabs: make(chan struct{}, cfg.Tabs)}, nil
}

// Config returns the Pool's configuration.
func (p *Pool) Config() Config { return p.cfg }

// Stats returns the Pool's counters.
func (p *Pool) Stats() Stats {
	p.mu.Lock()
	n := len(p.browsers)
	p.mu.Unlock()
	c := &p.stats
	return Stats{
		Pages: c.pages.Load(), Failed: c.failed.Load(), Crashes: c.crashes.Load(),
		Refused: c.refused.Load(), Blocked: c.blocked.Load(),
		Started: c.started.Load(), Retired: c.retired.Load(), Browsers: n,
	}
}

// Dirs returns the user-data-dirs of the Pool's running browsers.
func (p *Pool) Dirs() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]string, 0, len(p.browsers))
	for _, b := range p.browsers {
		out = append(out, b.dir)
	}
	return out
}

// Groups returns the process groups of the Pool's running browsers.
func (p *Pool) Groups() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]int, 0, len(p.browsers))
	for _, b := range p.browsers {
		out = append(out, b.pgid)
	}
	return out
}

// Close stops every browser (its whole process group) and removes their
// user-data-dirs; renders in flight fail.
func (p *Pool) Close() {
	p.mu.Lock()
	p.closed = true
	bs := p.browsers
	p.browsers, p.idle = nil, nil
	p.mu.Unlock()
	for _, b := range bs {
		b.close()
		p.stats.retired.Add(1)
	}
}

// acquire returns a tab: an idle one, else a new one in a browser with
// room, else in a new browser. Browsers past their pages or age retire.
func (p *Pool) acquire() (*tab, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrClosed
	}
	for _, b := range p.browsers {
		if !b.retiring && (b.pages >= p.cfg.PagesPerBrowser || time.Since(b.started) >= p.cfg.BrowserMaxAge) {
			p.retireLocked(b)
		}
	}
	if n := len(p.idle); n > 0 {
		t := p.idle[n-1]
		p.idle = p.idle[:n-1]
		t.b.open++
		t.b.pages++
		return t, nil
	}
	var b *browser
	for _, x := range p.browsers {
		if !x.retiring && x.tabs < p.cfg.TabsPerBrowser {
			b = x
			break
		}
	}
	if b == nil {
		p.seq++
		var err error
		if b, err = p.start(p.seq); err != nil {
			return nil, err
		}
		p.stats.started.Add(1)
		p.browsers = append(p.browsers, b)
	}
	t, err := openTab(b)
	if err != nil {
		p.retireLocked(b)
		return nil, err
	}
	b.tabs++
	b.open++
	b.pages++
	return t, nil
}

// release ends a page of t: the tab goes back to the idle ones, or is
// closed when discard (it crashed or did not clean); broken retires its
// browser (its process died or stopped answering).
func (p *Pool) release(t *tab, discard, broken bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	b := t.b
	b.open--
	if discard || broken || b.retiring || p.closed {
		t.cancel()
		b.tabs--
	} else {
		p.idle = append(p.idle, t)
	}
	if broken {
		p.retireLocked(b)
	}
	p.reapLocked(b)
}

// retireLocked retires b: its idle tabs close; b closes when its last
// page ends.
func (p *Pool) retireLocked(b *browser) {
	b.retiring = true
	kept := p.idle[:0]
	for _, t := range p.idle {
		if t.b == b {
			t.cancel()
			b.tabs--
			continue
		}
		kept = append(kept, t)
	}
	p.idle = kept
	p.reapLocked(b)
}

// reapLocked closes b when it is retiring and has no page open.
func (p *Pool) reapLocked(b *browser) {
	if !b.retiring || b.open > 0 || b.closed {
		return
	}
	b.closed = true
	for i, x := range p.browsers {
		if x == b {
			p.browsers = append(p.browsers[:i], p.browsers[i+1:]...)
			break
		}
	}
	p.stats.retired.Add(1)
	go b.close()
}

// Render renders req in a tab of its own and returns what the page became.
// A tab that crashes is discarded and the page rendered once more in a new
// one (Result.Crashes counts the crashes); a second crash fails.
func (p *Pool) Render(ctx context.Context, req Request) (Result, error) {
	req, err := req.withDefaults(p.cfg)
	if err != nil {
		return Result{}, err
	}
	select {
	case p.tabs <- struct{}{}:
	case <-ctx.Done():
		return Result{}, fmt.Errorf("render: waiting for a tab: %w", ctx.Err())
	}
	defer func() { <-p.tabs }()

	crashes := 0
	for {
		t, err := p.acquire()
		var crash *CrashError
		if errors.As(err, &crash) && crashes == 0 {
			crashes++ // the browser did not answer: once more, in a new one
			p.stats.crashes.Add(1)
			continue
		}
		if err != nil {
			p.stats.failed.Add(1)
			return Result{}, err
		}
		res, dirty, err := p.renderIn(ctx, t, req)
		p.stats.refused.Add(int64(res.Refused))
		p.stats.blocked.Add(int64(res.Blocked))
		crash = nil
		errors.As(err, &crash)
		p.release(t, crash != nil || dirty, crash != nil && crash.Browser)
		if crash != nil && ctx.Err() == nil {
			p.stats.crashes.Add(1)
			crashes++
			if crashes < 2 {
				continue
			}
			err = fmt.Errorf("render: %s: tab crashed %d times: %w", req.URL, crashes, err)
		}
		res.Crashes = crashes
		if err != nil {
			p.stats.failed.Add(1)
			return res, err
		}
		p.stats.pages.Add(1)
		return res, nil
	}
}
