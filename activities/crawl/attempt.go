package crawl

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/gocolly/colly/v2"
	"github.com/tidwall/gjson"
)

// attemptResult is what one attempt saw.
type attemptResult struct {
	status      int
	contentType string
	finalURL    string
	bytes       int64
	title       string
	fields      map[string][]string
	links       []string
	sitemaps    []string
	canonical   string
	jsonld      []json.RawMessage
	charset     string
	hash        string
	etag        string // the ETag response field
	modified    string // the Last-Modified response field
	body        []byte
	header      http.Header
	err         error
	sitemapErr  error
	transient   bool
	retryAfter  time.Duration // -1: none
	rendered    string        // why the page was rendered; empty: it was not
	render      renderOutcome // what the render left besides the DOM
}

// attempt makes one request with a Colly collector of its own (its own
// cookie jar, so that cookies set by one site never reach another task),
// over base (the Engine's shared transport). The collector is not reused
// across attempts because Colly binds the request context (the attempt's
// deadline), the transport (which counts this attempt's bytes) and the
// cookie jar to the collector, not to a request; what does not change per
// attempt — defaults, validation, parsed selectors — is worked out once per
// job (Options.Compile). A followed link (not a seed)
// may not redirect out of the allowed domains; checkRedirect, when set,
// checks every redirect's request; a redirect that leaves the request's
// host drops the headers that may hold credentials (hostHeaders).
func (e *Engine) attempt(ctx context.Context, b *built, o Options, base http.RoundTripper, checkRedirect func(*http.Request) error, followed, wantLinks, sitemap bool, release func()) attemptResult {
	a := &attemptRun{e: e, ctx: ctx, b: b, o: o, followed: followed, wantLinks: wantLinks, sitemap: sitemap, release: release,
		r: attemptResult{retryAfter: -1}, sels: o.compiled.selectorsFor(o.Label), rules: &o.compiled.rules}
	a.jsonLinks = wantLinks && !sitemap && len(a.rules.linksJSON) > 0
	var cancel context.CancelFunc
	a.actx, cancel = context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	c := a.collector(base, checkRedirect)
	c.OnResponseHeaders(func(resp *colly.Response) {
		a.r.status = resp.StatusCode
		a.r.contentType = resp.Headers.Get("Content-Type")
		a.r.finalURL = resp.Request.URL.String()
	})
	c.OnResponse(a.onResponse)
	var body io.Reader
	if b.body != nil {
		body = bytes.NewReader(b.body)
	}
	err := c.Request(b.method, b.url.String(), body, nil, b.header.Clone())
	if !a.gotBody {
		a.r.bytes = a.read
	}
	return a.result(err)
}

// attemptRun is one attempt (Engine.attempt): what it was asked and what
// its collector's callbacks saw.
type attemptRun struct {
	e                            *Engine
	ctx, actx                    context.Context // the fetch's, and the attempt's (o.Timeout)
	b                            *built
	o                            Options
	followed, wantLinks, sitemap bool
	jsonLinks                    bool   // links from JSON responses (o's LinksJSON)
	release                      func() // frees the domain's slot once the body is read
	sels                         map[string]Selector
	rules                        *rules

	r                attemptResult
	rawLinks         []string
	read             int64 // bytes read, for a body that never completed
	gotBody          bool
	parseErr, selErr error
}

// collector is the attempt's Colly collector, over base with the
// attempt's body bound, request hook and redirect rules.
func (a *attemptRun) collector(base http.RoundTripper, checkRedirect func(*http.Request) error) *colly.Collector {
	o := a.o
	c := colly.NewCollector()
	// Set everything Colly's COLLY_* environment variables could change.
	c.UserAgent = o.UserAgent
	c.Headers = nil
	c.MaxDepth, c.MaxRequests = 0, 0
	c.AllowedDomains, c.DisallowedDomains = nil, nil
	c.URLFilters, c.DisallowedURLFilters = nil, nil
	c.AllowURLRevisit = true
	c.MaxBodySize = 0 // bounded by boundedTransport, which fails instead of truncating
	c.CacheDir = ""
	c.IgnoreRobotsTxt = true // obeyed by the Engine, Crawl-delay included
	c.Async = false
	c.ParseHTTPErrorResponse = true
	c.DetectCharset = false
	c.CheckHead = false
	c.TraceHTTP = false
	c.Context = a.actx
	var rt http.RoundTripper = &boundedTransport{base: base, max: o.MaxBodyBytes, read: &a.read}
	if o.RequestHook != nil {
		rt = &hookTransport{base: rt, hook: o.RequestHook}
	}
	c.WithTransport(rt)
	c.SetRequestTimeout(0) // actx bounds the attempt, body included
	drop := hostHeaders(a.b.header)
	c.SetRedirectHandler(func(req *http.Request, via []*http.Request) error {
		if o.MaxRedirects < 0 {
			return http.ErrUseLastResponse
		}
		if len(via) > o.MaxRedirects {
			return &redirectError{max: o.MaxRedirects, last: req.URL.String()}
		}
		if a.followed && !domainAllowed(req.URL.Scheme, req.URL.Host, o.AllowedDomains) {
			return &offDomainRedirectError{to: req.URL.String()}
		}
		if checkRedirect != nil {
			if err := checkRedirect(req); err != nil {
				return err
			}
		}
		if leftHost(req, via) {
			for _, k := range drop {
				req.Header.Del(k)
			}
		}
		return nil
	})
	return c
}

// onResponse takes the response's body: its hash, what the attempt keeps
// of it, and, by its type, its sitemap entries, its conversion to UTF-8
// for the HTML callbacks, or its JSON fields and links.
func (a *attemptRun) onResponse(resp *colly.Response) {
	r, o := &a.r, a.o
	a.release() // the body is read: the domain's slot is free while we parse
	a.gotBody = true
	r.status = resp.StatusCode
	r.contentType = resp.Headers.Get("Content-Type")
	r.finalURL = resp.Request.URL.String()
	r.bytes = int64(len(resp.Body))
	if ra := resp.Headers.Get("Retry-After"); ra != "" {
		if d, ok := parseRetryAfter(ra, time.Now()); ok {
			r.retryAfter = d
		}
	}
	sum := sha256.Sum256(resp.Body)
	r.hash = hex.EncodeToString(sum[:])
	r.etag, r.modified = resp.Headers.Get("ETag"), resp.Headers.Get("Last-Modified")
	if o.KeepBody {
		r.body = resp.Body
		r.header = resp.Headers.Clone()
	}
	if len(a.sels) > 0 {
		r.fields = make(map[string][]string, len(a.sels))
		for name := range a.sels {
			r.fields[name] = []string{}
		}
	}
	ct := resp.Headers.Get("Content-Type")
	switch {
	case a.sitemap:
		r.links, r.sitemaps, r.sitemapErr = parseSitemap(resp.Body, resp.Request.URL, o.MaxBodyBytes)
	case isHTML(ct) || ct == "" && isHTML(http.DetectContentType(resp.Body)):
		// Parsed here, once (no OnHTML callback: Colly parses nothing).
		resp.Body, r.charset = toUTF8(resp.Body, ct)
		a.readHTML(resp.Body, resp.Request.URL)
	case isJSON(ct) && (len(a.sels) > 0 || a.jsonLinks), (hasJSONSelector(a.sels) || a.jsonLinks) && gjson.ValidBytes(resp.Body):
		// A JSON type, or a body that is JSON served under another type
		// (text/plain, octet-stream) when a json: field or a JSON link
		// path asks.
		if len(a.sels) > 0 {
			r.fields = extractJSON(resp.Body, a.sels)
		}
		if a.jsonLinks && gjson.ValidBytes(resp.Body) {
			a.rawLinks = jsonLinksOf(resp.Body, a.rules.linksJSON, resp.Request.URL, 4*MaxLinksPerPage)
		}
	}
}

// result is the attempt's outcome once its request returned err: the
// failure and whether it is transient, or the page with its links.
func (a *attemptRun) result(err error) attemptResult {
	r, o := &a.r, a.o
	switch {
	case err != nil:
		r.err, r.transient = classify(a.ctx, a.actx, o, err)
		if a.gotBody { // the failure came after the body: keep what was read
			return *r
		}
		r.title, r.fields, r.canonical, r.jsonld, r.hash, r.body, r.header = "", nil, "", nil, "", nil, nil
		return *r
	case a.parseErr != nil:
		r.err = fmt.Errorf("parse HTML: %v", a.parseErr)
		return *r
	case a.selErr != nil:
		r.err = a.selErr // not transient: the next fetch would cost the same
		return *r
	case r.status == http.StatusTooManyRequests || r.status >= 500:
		r.err, r.transient = statusError(r.status), true
		return *r
	case r.status >= 400:
		r.err = statusError(r.status)
		return *r
	}
	if a.sitemap {
		return a.sitemapResult()
	}
	if a.wantLinks {
		r.links = filterLinksMax(a.rawLinks, o.AllowedDomains, MaxLinksPerPage, o.KeepTrackingParams, a.rules)
	}
	return *r
}

// sitemapResult is a sitemap's outcome: the pages and sitemaps it lists,
// filtered.
func (a *attemptRun) sitemapResult() attemptResult {
	r, o := &a.r, a.o
	if r.sitemapErr != nil {
		r.err = fmt.Errorf("sitemap: %w", r.sitemapErr)
		return *r
	}
	// The follow rules apply to the pages listed, not to the sitemaps (a
	// sitemap is no page of the results).
	r.links = filterLinksMax(r.links, o.AllowedDomains, MaxSitemapURLs, o.KeepTrackingParams, a.rules)
	r.sitemaps = filterLinksMax(r.sitemaps, o.AllowedDomains, MaxSitemapURLs, o.KeepTrackingParams, nil)
	if o.DenyPrivate {
		// Their fetches are guarded (they are not typed URLs); a private
		// host is dropped here already, so that it is not queued only to
		// be refused.
		private := map[string]bool{}
		r.links = a.e.dropPrivate(a.ctx, r.links, private)
		r.sitemaps = a.e.dropPrivate(a.ctx, r.sitemaps, private)
	}
	return *r
}

// hookTransport runs a request hook (Options.RequestHook) once per
// attempt, on a copy of its first request, before base sends it. The
// headers the hook sets are the request's own: sent again on the
// redirects that stay on the first request's host, dropped for good once
// the chain leaves it (as the request's credential headers are,
// hostHeaders). One per attempt; not for concurrent use (a client sends a
// redirect chain's requests one after the other).
type hookTransport struct {
	base  http.RoundTripper
	hook  func(*http.Request) error
	first *url.URL
	added http.Header // what the hook set or changed
	left  bool
}

func (t *hookTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	if t.first == nil {
		t.first = req.URL
		if err := t.hook(r); err != nil {
			if req.Body != nil {
				req.Body.Close()
			}
			return nil, fmt.Errorf("request hook: %w", err)
		}
		t.added = http.Header{}
		for k, v := range r.Header {
			if !slices.Equal(v, req.Header[k]) {
				t.added[k] = v
			}
		}
		return t.base.RoundTrip(r)
	}
	if !sameHost(t.first, req.URL) {
		t.left = true
	}
	if !t.left {
		for k, v := range t.added {
			r.Header[k] = slices.Clone(v)
		}
	}
	return t.base.RoundTrip(r)
}
