package crawl

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/PuerkitoBio/goquery"
	"golang.org/x/net/html"

	"github.com/batoncrawl/baton/activities/render"
)

// Renderer renders a page in a browser (a *render.Pool).
type Renderer interface {
	Render(ctx context.Context, req render.Request) (render.Result, error)
}

// Auto's learning per host: after autoUseless pages of a host whose
// rendering added nothing, the host's pages are no longer rendered but
// for one in autoSample.
const (
	autoUseless = 5
	autoSample  = 20
)

// rendering is an Engine's browser pool (started by the first page to
// render) and what RenderAuto learnt of each host.
type rendering struct {
	mu       sync.Mutex
	renderer Renderer
	pool     *render.Pool // the pool the Engine started, closed by CloseRenderer
	err      error
	hosts    map[string]*hostLearning
	stats    RenderStats
}

type hostLearning struct {
	useless int // renders in a row that added nothing
	skipped int // pages not rendered since
}

// RenderStats count an Engine's rendered pages and why.
type RenderStats struct {
	Always      int64 // rendered under RenderAlways
	Label       int64 // rendered for a user crawler's label (crawler.Rendered)
	EmptyFields int64 // RenderAuto: a selected field was empty
	NoLinks     int64 // RenderAuto: the page had no link to follow
	Sampled     int64 // RenderAuto: re-checks of a host rendering added nothing to
	Skipped     int64 // RenderAuto: not rendered, rendering added nothing to the host's pages
	Useless     int64 // RenderAuto: rendered, and it added nothing
	Failed      int64 // renders that failed
}

// SetRenderer makes r render the Engine's pages (a test's, or a pool the
// worker configured); without one the Engine starts a render.Pool of its
// own when a page first needs it.
func (e *Engine) SetRenderer(r Renderer) {
	e.rendering.mu.Lock()
	defer e.rendering.mu.Unlock()
	e.rendering.renderer = r
}

// RenderStats returns the Engine's render counters.
func (e *Engine) RenderStats() RenderStats {
	e.rendering.mu.Lock()
	defer e.rendering.mu.Unlock()
	return e.rendering.stats
}

// CloseRenderer stops the browsers of the pool the Engine started.
func (e *Engine) CloseRenderer() {
	e.rendering.mu.Lock()
	p := e.rendering.pool
	e.rendering.pool, e.rendering.renderer = nil, nil
	e.rendering.mu.Unlock()
	if p != nil {
		p.Close()
	}
}

// renderer returns the Engine's Renderer, starting a pool of tabs tabs
// (swept of what a killed worker left first) when it has none.
func (e *Engine) renderer(tabs int) (Renderer, error) {
	r := &e.rendering
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.renderer != nil || r.err != nil {
		return r.renderer, r.err
	}
	cfg := render.DefaultConfig()
	if tabs > 0 {
		cfg.Tabs = tabs
	}
	_, _ = render.Sweep(cfg.TempDir)
	p, err := render.New(cfg)
	if err != nil {
		r.err = err
		return nil, err
	}
	r.pool, r.renderer = p, p
	return p, nil
}

func (e *Engine) count(f func(*RenderStats)) {
	e.rendering.mu.Lock()
	f(&e.rendering.stats)
	e.rendering.mu.Unlock()
}

// renderAttempt renders a prepared page in place of an HTTP attempt: the
// browser's every request is judged by the fetch's guard, the job's user
// agent, headers and cookie go with it, and the rendered DOM is
// extracted as a plain page's body is. why is recorded with the page.
func (e *Engine) renderAttempt(ctx context.Context, pr prepared, wantLinks bool, release func(), why string) (r attemptResult) {
	r.retryAfter = -1
	defer release()
	o := pr.opts
	rd, err := e.renderer(o.RenderTabs)
	if err != nil {
		e.count(func(s *RenderStats) { s.Failed++ })
		r.err = err
		return r
	}
	headers, cookie := renderHeaders(pr.b.header)
	req := render.Request{
		URL: pr.b.url.String(), Wait: o.RenderWait, Timeout: o.RenderTimeout, Resources: o.RenderResources,
		UserAgent: pr.agent, Headers: headers, Cookie: cookie,
	}
	if req.Timeout <= 0 {
		req.Timeout = o.Timeout
	}
	if o.DenyPrivate || e.Policy.Active() {
		g := RenderGuard{Engine: e, DenyPrivate: o.DenyPrivate}
		if pr.typed {
			g.Typed = pr.b.url
		}
		req.Policy = render.PolicyOf(g)
	}
	if req.Dial, err = e.renderDial(pr); err != nil {
		e.count(func(s *RenderStats) { s.Failed++ })
		r.err = err
		return r
	}
	req.Actions, req.Screenshot = o.RenderActions, o.RenderScreenshots
	if strings.HasPrefix(why, "auto") && o.RenderWait == "" {
		req.Until = autoUntil(o, why)
	}
	switch why {
	case ReasonAlways:
		e.count(func(s *RenderStats) { s.Always++ })
	case ReasonLabel:
		e.count(func(s *RenderStats) { s.Label++ })
	}
	res, err := rd.Render(ctx, req)
	r.rendered = why
	r.render = renderOutcome{scripts: res.Scripts, screenshot: res.Screenshot, crashes: res.Crashes, timedOut: errors.Is(err, render.ErrNotSettled)}
	if err != nil {
		e.count(func(s *RenderStats) { s.Failed++ })
		r.err = err
		var refused *render.RefusedError
		r.transient = !errors.As(err, &refused) && !errors.Is(err, render.ErrNotSettled) && !errors.Is(err, render.ErrAction) && ctx.Err() == nil
		return r
	}
	r.status, r.finalURL, r.contentType = res.Status, res.FinalURL, res.Header.Get("Content-Type")
	r.bytes = int64(len(res.HTML))
	sum := sha256.Sum256([]byte(res.HTML))
	r.hash = hex.EncodeToString(sum[:])
	if o.KeepBody {
		r.body, r.header = []byte(res.HTML), res.Header
	}
	switch {
	case r.status == http.StatusTooManyRequests || r.status >= 500:
		r.err, r.transient = statusError(r.status), true
		return r
	case r.status >= 400:
		r.err = statusError(r.status)
		return r
	}
	if err := e.extractRendered(&r, res, o, wantLinks); err != nil {
		r.err = err
	}
	return r
}

// extractRendered extracts the fields, links, canonical, JSON-LD and
// title of a rendered DOM with the plain pages' extraction.
func (e *Engine) extractRendered(r *attemptResult, res render.Result, o Options, wantLinks bool) error {
	doc, err := html.Parse(strings.NewReader(res.HTML))
	if err != nil {
		return fmt.Errorf("parse rendered HTML: %v", err)
	}
	final, err := pageURL(res.FinalURL)
	if err != nil {
		return err
	}
	base := baseOf(doc, final)
	r.title = truncateUTF8(strings.TrimSpace(res.Title), MaxTitleBytes)
	if sels := o.compiled.selectorsFor(o.Label); len(sels) > 0 {
		if r.fields, err = extractHTML(doc, sels, base); err != nil {
			return err
		}
	}
	r.canonical = canonicalOf(doc, base)
	r.jsonld = jsonLDOf(doc)
	r.charset = "utf-8"
	if !wantLinks {
		return nil
	}
	b, err := linkParser.Parse(base.String())
	if err != nil {
		return nil
	}
	var raw []string
	goquery.NewDocumentFromNode(doc).Find("a[href]").EachWithBreak(func(_ int, s *goquery.Selection) bool {
		href, _ := s.Attr("href")
		if strings.HasPrefix(href, "#") {
			return true
		}
		if u, err := b.Parse(href); err == nil {
			raw = append(raw, u.Href(false))
		}
		return len(raw) < 4*MaxLinksPerPage
	})
	r.links = filterLinksMax(raw, o.AllowedDomains, MaxLinksPerPage, o.KeepTrackingParams, &o.compiled.rules)
	return nil
}

// renderAuto renders, under RenderAuto, a page plain HTTP fetched whose
// selected fields or links came out empty, unless rendering added nothing
// to the last pages of its host (then one page in autoSample is rendered
// to re-check). The render holds the host's politeness slot, as a fetch.
func (e *Engine) renderAuto(ctx context.Context, pr prepared, res attemptResult, wantLinks bool, delay time.Duration, sitemap bool) attemptResult {
	o := pr.opts
	if o.Render != RenderAuto || sitemap || res.err != nil || res.rendered != "" || pr.b.method != http.MethodGet || !isHTML(res.contentType) {
		return res
	}
	why := ""
	switch {
	case emptyField(res.fields):
		why = ReasonEmptyFields
	case wantLinks && len(res.links) == 0:
		why = ReasonNoLinks
	default:
		return res
	}
	host := pr.domain + " " + o.Label
	yes, sample := e.autoDecide(host)
	if !yes {
		return res
	}
	e.count(func(s *RenderStats) {
		switch {
		case sample:
			why = ReasonSample
		case why == ReasonEmptyFields:
			s.EmptyFields++
		default:
			s.NoLinks++
		}
	})
	release, err := e.limits.acquire(ctx, pr.domain, o.Parallelism, delay, o.NotBefore)
	if err != nil {
		return res
	}
	rr := e.renderAttempt(ctx, pr, wantLinks, release, why)
	e.autoLearn(host, rr.err == nil && addedSomething(res, rr))
	return rr
}

// emptyField reports whether a selected field has no value.
func emptyField(fields map[string][]string) bool {
	for _, v := range fields {
		if len(v) == 0 {
			return true
		}
	}
	return false
}

// addedSomething reports whether the render found a field value or a
// link the plain fetch did not.
func addedSomething(plain, rendered attemptResult) bool {
	for k, v := range rendered.fields {
		if len(v) > len(plain.fields[k]) {
			return true
		}
	}
	return len(rendered.links) > len(plain.links)
}

// autoDecide reports whether a page of host should be rendered, and
// whether as a re-check of a host rendering added nothing to.
func (e *Engine) autoDecide(host string) (render, sample bool) {
	r := &e.rendering
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.hosts == nil {
		r.hosts = map[string]*hostLearning{}
	}
	h := r.hosts[host]
	if h == nil {
		h = &hostLearning{}
		r.hosts[host] = h
	}
	if h.useless < autoUseless {
		return true, false
	}
	h.skipped++
	if h.skipped%autoSample == 0 {
		r.stats.Sampled++
		return true, true
	}
	r.stats.Skipped++
	return false, false
}

// autoLearn records whether rendering a page of host added something.
func (e *Engine) autoLearn(host string, added bool) {
	r := &e.rendering
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.hosts[host]
	if added {
		h.useless, h.skipped = 0, 0
		return
	}
	h.useless++
	r.stats.Useless++
}

// pageURL parses a rendered page's final URL.
func pageURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("rendered page's URL %q: not absolute", s)
	}
	return u, nil
}

// autoUntil is what ends the wait of a page rendered under RenderAuto
// before the network is idle: each selected field there (with text, or
// its attribute), and a link when the page had none. None when a field
// is not CSS (the page then waits for the network to be idle).
func autoUntil(o Options, why string) []render.Want {
	var out []render.Want
	for _, s := range o.compiled.selectorsFor(o.Label) {
		if s.Kind != KindCSS {
			return nil
		}
		out = append(out, render.Want{CSS: s.Expr, Attr: s.Attr})
	}
	if why == ReasonNoLinks {
		out = append(out, render.Want{CSS: "a[href]", Attr: "href"})
	}
	return out
}
