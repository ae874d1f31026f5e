// Package crawler is the API for writing your own crawler and running it
// on a Baton cluster, with every guarantee the cluster gives its built-in
// crawler: each page's items and links are recorded once, in the same
// transaction as the page (a group commit with other pages of its batch),
// across SIGKILLs and fail-overs.
//
// A crawler is a set of handlers keyed by request label, as net/http's
// handlers are keyed by path:
//
//	c := crawler.New("shop", "1.0.0")
//	c.HandleFunc("", func(ctx context.Context, p *crawler.Page) error {
//		p.EnqueueLinks("a.category", "listing", nil) // the start page
//		return nil
//	})
//	c.HandleFunc("listing", func(ctx context.Context, p *crawler.Page) error {
//		p.EnqueueLinks("a.product-link", "detail", nil)
//		p.EnqueueLinks("a.next", "listing", nil)
//		return nil
//	})
//	c.HandleFunc("detail", func(ctx context.Context, p *crawler.Page) error {
//		return p.Push(Product{Name: p.Text("h1.name")})
//	})
//
// A worker binary registers its crawlers (package worker) and a job names
// one: `baton crawl --crawler shop URL`. The Runner fetches each URL of the
// job with the cluster's engine (robots.txt, per-domain politeness, retries,
// body and time bounds, --deny-private), then calls the handler of the
// URL's label with the Page: the request (URL, label, depth, user data),
// the response (status, headers, bounded body), the parsed HTML with CSS
// (goquery), XPath and JSON helpers, and the page's actions — Enqueue,
// Push, Skip.
//
// What is once and what is at least once: the items a page pushes and
// the links it enqueues are recorded with the page in one transaction, at
// most once per page and job (a page fetched again after a fail-over runs
// its handler again, and what it pushed the first time was never recorded
// unless the page was); a handler may therefore run more than once for a
// page and must not have side effects of its own beyond the Page's
// actions. Items reach your systems through sinks, at least once, each with
// a stable ID (job, page URL, index) to deduplicate on.
//
// A handler's error fails the page with the error recorded; wrap it with
// Retry to have the page fetched and handled again (up to the job's
// retries). A panic is caught, its stack logged, and the page failed; the
// worker lives on. A handler that runs past the crawler's Budget is
// cancelled and the page failed.
package crawler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"runtime/debug"
	"sync/atomic"
	"time"
)

// DefaultBudget is how long a handler may run on one page unless the
// crawler sets its own Budget.
const DefaultBudget = 30 * time.Second

// BuiltinName is the name of Baton's built-in crawler (the --select,
// --follow flags): the crawler a job runs when it names none.
const BuiltinName = "builtin"

var validName = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,62}$`)

// ValidName checks a crawler name: lower-case letters, digits, '-' and
// '_', starting with a letter, at most 63 bytes.
func ValidName(name string) error {
	if !validName.MatchString(name) {
		return fmt.Errorf("crawler name %q: want lower-case letters, digits, '-' or '_', starting with a letter", name)
	}
	return nil
}

// Crawler is one named, versioned crawler: a router of handlers by label,
// middleware around them, item pipelines, a request hook and typed
// options. Configure it before the worker starts; afterwards it is
// read-only and safe for concurrent use by any number of pages.
type Crawler struct {
	name, version string
	router        *Router
	labels        map[string]labelConfig // how a label's pages are fetched (Rendered)
	middleware    []Middleware
	pipelines     []Pipeline
	sinks         []Sink
	archive       *WARC // Archive
	options       *optionsSchema
	// Budget bounds a handler's time on one page (DefaultBudget if 0).
	Budget time.Duration
	// BeforeRequest, when set, may adjust each outgoing request of a job
	// of this crawler (headers, request signing). It runs once per attempt,
	// before the first hop, robots.txt excluded; an error fails the page.
	// The headers it sets are treated as credentials: sent again on a
	// redirect within the request's host, dropped once the redirect chain
	// leaves it (it does not run again on a redirect).
	BeforeRequest func(*http.Request) error
	// Start, when set, runs once per job on each worker before its first
	// page (a log-in): the cookies it returns are the job's session
	// cookies on that worker, held in memory only (never in a history, a
	// znode or a log).
	Start func(ctx context.Context, job JobInfo) ([]*http.Cookie, error)
}

// JobInfo is what a Start hook knows of its job.
type JobInfo struct {
	ID    string
	Seeds []string
	// Options are the job's decoded options (see Crawler.Options), or nil.
	Options any
}

// New returns a crawler with no handlers. name must pass ValidName;
// version is free text (e.g. a semantic version or a commit) and is
// recorded with every job the crawler runs.
func New(name, version string) *Crawler {
	return &Crawler{name: name, version: version, router: NewRouter()}
}

// Name is the crawler's name.
func (c *Crawler) Name() string { return c.name }

// Version is the crawler's version.
func (c *Crawler) Version() string { return c.version }

// Handle registers h for requests labelled label ("" is the label of a
// job's seeds unless they say otherwise); opts say how the label's pages
// are fetched (Rendered: in headless Chromium).
func (c *Crawler) Handle(label string, h Handler, opts ...HandleOption) {
	c.router.Handle(label, h)
	if len(opts) == 0 {
		return
	}
	var lc labelConfig
	for _, o := range opts {
		o.applyHandle(&lc)
	}
	if c.labels == nil {
		c.labels = map[string]labelConfig{}
	}
	c.labels[label] = lc
}

// HandleFunc registers f for requests labelled label.
func (c *Crawler) HandleFunc(label string, f func(ctx context.Context, p *Page) error, opts ...HandleOption) {
	c.Handle(label, HandlerFunc(f), opts...)
}

// Use wraps every handler in mw, the first outermost.
func (c *Crawler) Use(mw ...Middleware) { c.middleware = append(c.middleware, mw...) }

// Pipe adds item pipelines: every pushed item passes through them, in
// order, before it is recorded.
func (c *Crawler) Pipe(p ...Pipeline) { c.pipelines = append(c.pipelines, p...) }

// Labels are the labels with a handler, sorted.
func (c *Crawler) Labels() []string { return c.router.Labels() }

// Validate checks the crawler's configuration: its name, at least one
// handler, its options type.
func (c *Crawler) Validate() error {
	if err := ValidName(c.name); err != nil {
		return err
	}
	if c.name == BuiltinName {
		return fmt.Errorf("crawler name %q is the built-in crawler's", c.name)
	}
	if len(c.router.Labels()) == 0 && c.router.fallback == nil {
		return fmt.Errorf("crawler %s: no handler", c.name)
	}
	for _, label := range c.router.Labels() {
		if s := c.labels[label].render; s != nil {
			if err := s.validate(); err != nil {
				return fmt.Errorf("crawler %s: label %q: Rendered: %w", c.name, label, err)
			}
		}
	}
	if c.archive != nil {
		if err := c.archive.validate(); err != nil {
			return fmt.Errorf("crawler %s: Archive: %w", c.name, err)
		}
	}
	for _, s := range c.sinks {
		if err := ValidName(s.Name); err != nil {
			return fmt.Errorf("crawler %s: sink: %w", c.name, err)
		}
	}
	return nil
}

// Outcome is what running a page's handler produced.
type Outcome struct {
	Links   []Link
	Items   []Pushed
	Skipped string // Skip's reason; the page is recorded with it
	Dropped int    // items dropped by a pipeline
}

// Pushed is an item as a page pushed it, encoded: what is recorded.
type Pushed struct {
	Label string          `json:"label,omitempty"`
	Index int             `json:"index"`
	Value json.RawMessage `json:"value"`
}

// PanicError is a handler's panic, recovered.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("handler panicked: %v", e.Value) }

// abandoned counts the handlers of this process abandoned past their
// budget and still running; abandonedTotal all those ever abandoned.
var abandoned, abandonedTotal atomic.Int64

// Abandoned is how many handlers of this process ran past their budget
// (or their page's cancellation) and are still running: Go cannot stop a
// goroutine, so a handler that ignores its context keeps its CPU and
// memory until it returns. A worker caps them (--max-abandoned-handlers).
func Abandoned() int64 { return abandoned.Load() }

// AbandonedTotal is how many handlers of this process were ever
// abandoned.
func AbandonedTotal() int64 { return abandonedTotal.Load() }

// ErrBudget is the error of a handler that ran past its crawler's Budget.
var ErrBudget = errors.New("handler ran past its time budget")

// Run runs the handler of p's label on p, with the crawler's middleware,
// under its Budget; a panic becomes a *PanicError (logged on log with its
// stack). It returns what the page produced; on error, nothing of it is
// to be recorded but the error. Run is what the Runner calls; a test may
// call it on a Page made by NewPage.
func (c *Crawler) Run(ctx context.Context, p *Page, log *slog.Logger) (Outcome, error) {
	budget := c.Budget
	if budget <= 0 {
		budget = DefaultBudget
	}
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	p.pipelines = c.pipelines
	var h Handler = c.router
	for i := len(c.middleware) - 1; i >= 0; i-- {
		h = c.middleware[i](h)
	}
	done := make(chan error, 1)
	// state: 0 running, 1 returned, 2 abandoned (past its budget).
	var state atomic.Int32
	go func() {
		defer func() {
			if !state.CompareAndSwap(0, 1) {
				abandoned.Add(-1) // an abandoned handler returns at last
			}
		}()
		defer func() {
			if v := recover(); v != nil {
				pe := &PanicError{Value: v, Stack: debug.Stack()}
				if log != nil {
					log.Error("crawler handler panicked", "job_crawler", c.name, "url", p.Request.URL, "label", p.Request.Label,
						"panic", fmt.Sprint(v), "stack", string(pe.Stack))
				}
				done <- pe
			}
		}()
		done <- h.ServePage(ctx, p)
	}()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		if state.CompareAndSwap(0, 2) {
			// The handler goroutine is abandoned (it ends when it
			// returns, counted meanwhile: Abandoned); the page is closed
			// so that nothing it does later counts.
			abandoned.Add(1)
			abandonedTotal.Add(1)
			err = ErrBudget
			if ctx.Err() != context.DeadlineExceeded {
				err = ctx.Err()
			}
		} else {
			err = <-done // it returned meanwhile
		}
	}
	out := p.close()
	if err == nil {
		err = p.failed() // a cap or budget the page ran past, its handler notwithstanding
	}
	if err != nil {
		return Outcome{}, err
	}
	return out, nil
}
