package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/crawler"
	"github.com/batoncrawl/baton/roles"
)

// ErrNoCrawler is the error of a batch whose job names a crawler this
// worker does not carry (at the job's version).
var ErrNoCrawler = errors.New("crawler not carried by this worker")

// jobRun is what a Runner keeps of a job while it runs its batches: the
// spec (options compiled, secrets opened) and, for a user crawler, the
// crawler and the job's decoded options. Immutable once made.
type jobRun struct {
	spec    Spec
	crawler *crawler.Crawler // nil: the built-in crawler
	options any              // the crawler's decoded --set options
	// session are the cookies the crawler's Start hook got for the job on
	// this worker (a log-in): sent with its pages like the job's --cookie,
	// held in memory only.
	session map[string]string
	// bodiesRoot is the operator's bodies root (its symbolic links
	// resolved) when the job keeps its bodies in a directory under one.
	bodiesRoot string
	// client is the client crawler code gets for the job (crawler.Client
	// in the context of its Start hook and handlers): under the worker's
	// rules and the job's --deny-private.
	client *http.Client
	// baselines reads the baseline's records of the job's fetches in
	// batches (nil: the store reads them one by one).
	baselines *baselineReads
}

// startTimeout bounds a crawler's Start hook.
const startTimeout = time.Minute

// start runs the crawler's Start hook for a job once on this worker and
// keeps the cookies it returns (never logged: only their names are).
func (jr *jobRun) start(ctx context.Context, log *slog.Logger) error {
	if jr.crawler == nil || jr.crawler.Start == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(crawler.WithClient(ctx, jr.client), startTimeout)
	defer cancel()
	cookies, err := jr.crawler.Start(ctx, crawler.JobInfo{ID: jr.spec.ID, Seeds: jr.spec.Seeds, Options: jr.options})
	if err != nil {
		return fmt.Errorf("crawler %s: start hook of job %s: %w", jr.crawler.Name(), jr.spec.ID, err)
	}
	jr.session = map[string]string{}
	var names []string
	for _, c := range cookies {
		if c != nil && c.Name != "" {
			jr.session[c.Name] = c.Value
			names = append(names, c.Name)
		}
	}
	log.Info("crawler start hook: session cookies kept in memory", "job_crawler", jr.crawler.Name(), "cookies", names)
	return nil
}

// auth is the job's credentials with the session's cookies added.
func (jr *jobRun) auth() crawl.Auth {
	a := crawl.Auth{Cookie: jr.spec.Cookie, Authorization: jr.spec.Authorization, URLSecrets: jr.spec.URLSecrets}
	if len(jr.session) > 0 {
		merged := make(map[string]string, len(a.Cookie)+len(jr.session))
		for k, v := range a.Cookie {
			merged[k] = v
		}
		for k, v := range jr.session {
			merged[k] = v
		}
		a.Cookie = merged
	}
	return a
}

// crawlerClient is the client crawler code gets for a job: the fetcher's
// (crawl.Engine.Client, under the worker's rules), else one under the
// job's --deny-private alone.
func (r *BatchRunner) crawlerClient(denyPrivate bool) *http.Client {
	if c, ok := r.Pages.(interface{ Client(bool) *http.Client }); ok {
		return c.Client(denyPrivate)
	}
	return crawl.Policy{DenyPrivate: denyPrivate}.Client(crawl.CrawlerClientTimeout)
}

// crawlerFor returns the user crawler a job names, at the job's version,
// and its decoded options; nil for the built-in crawler.
func (r *BatchRunner) crawlerFor(s Spec) (*crawler.Crawler, any, error) {
	if s.Crawler == "" || s.Crawler == crawler.BuiltinName {
		return nil, nil, nil
	}
	c := r.Crawlers[s.Crawler]
	if c == nil {
		return nil, nil, fmt.Errorf("%w: job %s needs crawler %s", ErrNoCrawler, s.ID, s.Crawler)
	}
	if s.CrawlerVersion != "" && c.Version() != s.CrawlerVersion {
		return nil, nil, fmt.Errorf("%w: job %s needs crawler %s version %s, this worker carries %s",
			ErrNoCrawler, s.ID, s.Crawler, s.CrawlerVersion, c.Version())
	}
	opts, err := c.DecodeOptions(s.CrawlerOptions)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrBadSpec, err)
	}
	return c, opts, nil
}

// handled is what a user crawler's handler made of a page: the links and
// items to record with it, or the error that fails it.
type handled struct {
	links   []Entry
	items   []crawler.Pushed
	skipped string
	err     error
	// stop stops the batch, the page unfetched (a worker past its cap of
	// abandoned handlers).
	stop error
}

// fetchHandled fetches a page of a user crawler's job and runs the
// handler of its label on it. A handler error marked crawler.Retry fetches
// and handles the page again after the job's backoff, up to its retries.
// The page's own fetch failures are the engine's (robots.txt, retries,
// bounds) and reach no handler.
//
// With a baseline page (base), the request is conditional; a 304 to it
// reaches no handler: the page is the baseline's (fetch).
func (r *BatchRunner) fetchHandled(ctx context.Context, in BatchRun, jr *jobRun, auth crawl.Auth, e Entry, opts crawl.Options, base *BaselinePage) (crawl.Page, handled) {
	req := roles.Request{URL: e.URL, Method: "GET", Depth: max(e.Depth, 0)}
	opts.KeepBody, opts.Follow = true, false
	opts.RequestHook = conditional(base, jr.crawler.BeforeRequest)
	if spec, ok := jr.crawler.Rendering(e.Label); ok {
		opts.RenderOptions = labelRender(opts.RenderOptions, spec)
	}
	filter := func(abs string, depth int) (string, error) {
		if opts.MaxDepth > 0 && depth > opts.MaxDepth {
			return "", fmt.Errorf("depth %d beyond %d", depth, opts.MaxDepth)
		}
		n, err := opts.FollowLink(abs)
		if err != nil {
			return "", err
		}
		return n, CheckURLLength(n)
	}
	if n, limit := crawler.Abandoned(), r.Limits.abandonedCap(); n >= limit {
		r.Metrics.HandlersRunningAbandoned(n)
		return crawl.Page{}, handled{stop: fmt.Errorf("%d handlers of user crawlers ran past their budget and still run on this worker (cap %d, --max-abandoned-handlers): it takes no more pages of user crawlers until some return", n, limit)}
	}
	ctx = crawler.WithClient(ctx, jr.client)
	for attempt := 0; ; attempt++ {
		page := r.Pages.Fetch(ctx, req, auth, e.Depth, opts)
		if page.Error != "" || ctx.Err() != nil || notModified(page, base) {
			return page, handled{}
		}
		p := crawler.NewPage(ctx, crawler.Request{URL: e.URL, Label: e.Label, Depth: e.Depth, Data: e.Data},
			crawler.Response{StatusCode: page.StatusCode, Header: page.Header, Body: page.Body, FinalURL: page.FinalURL,
				Rendered: page.Rendered, Scripts: page.Scripts, Screenshot: page.Screenshot}, filter).
			WithOptions(jr.options).WithMaxItemBytes(r.Limits.MaxPageItemBytes)
		log := in.Log
		if log == nil {
			log = slog.Default()
		}
		out, err := jr.crawler.Run(ctx, p, log)
		if errors.Is(err, crawler.ErrBudget) {
			r.Metrics.HandlerAbandoned(jr.crawler.Name())
		}
		r.Metrics.HandlersRunningAbandoned(crawler.Abandoned())
		if err != nil && crawler.IsRetry(err) && attempt < opts.Retries && ctx.Err() == nil {
			if wait, ok := opts.RetryWait(ctx, attempt+1); ok {
				t := time.NewTimer(wait)
				select {
				case <-ctx.Done():
					t.Stop()
				case <-t.C:
				}
				if ctx.Err() == nil {
					continue
				}
			}
		}
		if err != nil {
			r.Metrics.HandlerError(jr.crawler.Name())
			return page, handled{err: err}
		}
		h := handled{items: out.Items, skipped: out.Skipped}
		h.links = make([]Entry, 0, len(out.Links))
		for _, l := range out.Links {
			h.links = append(h.links, Entry{URL: auth.URLSecrets.Redact(l.URL), Depth: e.Depth + 1, Label: l.Label, Data: l.Data})
		}
		r.Metrics.Items(jr.crawler.Name(), len(h.items))
		return page, h
	}
}

// labelRender is the job's render options for a page of a label its
// crawler renders (crawler.Rendered): rendered first, with the label's
// wait, budget, resources and steps (the job's --render-tabs and
// --render-resources kept).
func labelRender(o crawl.RenderOptions, spec crawler.RenderSpec) crawl.RenderOptions {
	o.Render, o.RenderReason = crawl.RenderAlways, crawl.ReasonLabel
	if spec.Wait != "" {
		o.RenderWait = spec.Wait
	}
	if spec.Timeout > 0 {
		o.RenderTimeout = spec.Timeout
	}
	o.RenderResources = append(slices.Clip(o.RenderResources), spec.Resources...)
	o.RenderActions = spec.Actions
	o.RenderScreenshots = o.RenderScreenshots || spec.Screenshot
	return o
}
