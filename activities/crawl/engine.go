package crawl

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/andybalholm/cascadia"
	"github.com/gocolly/colly/v2"
	"golang.org/x/net/html"

	"github.com/batoncrawl/baton/roles"
)

// Bounds on what one page can add to a result.
const (
	MaxLinksPerPage = 10000   // further links are dropped
	MaxFieldBytes   = 1 << 20 // total text of a page's fields; further matches are dropped
)

// Page is what Fetch saw of one page.
type Page struct {
	URL         string              `json:"url"`
	FinalURL    string              `json:"final_url"`
	StatusCode  int                 `json:"status_code"`
	ContentType string              `json:"content_type"`
	Bytes       int64               `json:"bytes"`
	DurationMS  int64               `json:"duration_ms"` // the whole Fetch: waits, retries and backoff included
	Title       string              `json:"title"`
	Fields      map[string][]string `json:"fields,omitempty"`
	// Links are absolute, normalised (NormalizeURL), deduplicated, within
	// AllowedDomains, http(s) only, in document order; empty when !Follow,
	// when Depth >= MaxDepth or when the page failed.
	Links    []string `json:"links,omitempty"`
	Depth    int      `json:"depth"`
	Attempts int      `json:"attempts"`
	// Error is empty on success, else a clear reason: "disallowed by
	// robots.txt", "body exceeds 10485760 bytes", "stopped after 10
	// redirects", "timeout after 15s", "HTTP 404", ...
	Error string `json:"error,omitempty"`
	// Disallowed is set when robots.txt forbids the page: it was not
	// fetched, and a crawl job does not record it.
	Disallowed bool `json:"disallowed,omitempty"`
}

// OK reports whether the page was fetched without error.
func (p Page) OK() bool { return p.Error == "" }

// Engine fetches pages. It is safe for concurrent use and meant to be shared
// by a worker process: it holds the per-domain limits, the robots.txt cache
// and the connection pools.
type Engine struct {
	plain, guarded *http.Transport
	limits         *limiter
	robots         *robotsCache
}

// NewEngine returns an Engine with empty caches.
func NewEngine() *Engine {
	return &Engine{
		plain:   newTransport(false),
		guarded: newTransport(true),
		limits:  newLimiter(),
		robots:  newRobotsCache(),
	}
}

// CloseIdleConnections closes the Engine's idle connections.
func (e *Engine) CloseIdleConnections() {
	e.plain.CloseIdleConnections()
	e.guarded.CloseIdleConnections()
}

// Fetch fetches one page found at depth (0 for a seed) and never panics:
// every failure is in Page.Error. It honours the request's method, URL,
// query parameters, headers and body, and auth's cookies and authorization
// (the conventions of activities.BuildRequest); obeys robots.txt unless
// opts.IgnoreRobots; waits for the domain's delay and parallelism; retries
// transient failures; bounds body, time and redirects.
func (e *Engine) Fetch(ctx context.Context, req roles.Request, auth Auth, depth int, opts Options) (page Page) {
	start := time.Now()
	page = Page{URL: req.URL, Depth: depth}
	defer func() {
		if r := recover(); r != nil {
			page.Error = fmt.Sprintf("internal error: %v", r)
		}
		page.DurationMS = time.Since(start).Milliseconds()
	}()

	opts = opts.withDefaults()
	if err := opts.Validate(); err != nil {
		page.Error = "invalid options: " + err.Error()
		return page
	}
	if depth < 0 {
		page.Error = fmt.Sprintf("invalid depth %d", depth)
		return page
	}
	b, err := buildRequest(req, auth)
	if err != nil {
		page.Error = err.Error()
		return page
	}
	guard := opts.DenyPrivate && depth > 0
	if guard {
		if err := checkPrivateHost(ctx, b.url.Hostname()); err != nil {
			page.Error = err.Error()
			return page
		}
	}
	agent := b.header.Get("User-Agent")
	if agent == "" {
		agent = opts.UserAgent
	}
	domain := hostKey(b.url)
	delay := opts.Delay
	if !opts.IgnoreRobots {
		origin := strings.ToLower(b.url.Scheme) + "://" + domain
		key := origin
		tr := e.plain
		if guard {
			key, tr = origin+" guarded", e.guarded
		}
		rules, err := e.robots.get(ctx, key, func(c context.Context) *robotsRules {
			return fetchRobots(c, &http.Client{Transport: tr}, origin, agent, min(opts.Timeout, 30*time.Second))
		})
		if err != nil {
			page.Error = "waiting for robots.txt: " + err.Error()
			return page
		}
		ok, crawlDelay := rules.allowed(robotsPath(b.url), agent)
		if !ok {
			page.Error, page.Disallowed = errRobots{status: rules.status}.Error(), true
			return page
		}
		delay = max(delay, crawlDelay)
	}

	wantLinks := opts.Follow && depth < opts.MaxDepth
	var res attemptResult
	for attempt := 1; ; attempt++ {
		release, err := e.limits.acquire(ctx, domain, opts.Parallelism, delay)
		if err != nil {
			if attempt == 1 {
				res = attemptResult{err: fmt.Errorf("waiting for %s: %w", domain, err)}
			} else {
				res.err = fmt.Errorf("%w; gave up retrying: %v", res.err, err)
			}
			break
		}
		page.Attempts = attempt
		res = e.attempt(ctx, b, opts, guard, depth > 0, wantLinks, release)
		release()
		if !res.transient || attempt > opts.Retries {
			break
		}
		wait, why := retryWait(ctx, opts, attempt, res.retryAfter)
		if why != "" {
			res.err = fmt.Errorf("%w; %s", res.err, why)
			break
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			res.err = fmt.Errorf("%w; gave up retrying: %v", res.err, ctx.Err())
		case <-t.C:
		}
		if ctx.Err() != nil {
			break
		}
	}

	page.FinalURL = res.finalURL
	page.StatusCode = res.status
	page.ContentType = res.contentType
	page.Bytes = res.bytes
	page.Title = res.title
	page.Fields = res.fields
	if res.err != nil {
		page.Error = res.err.Error()
	} else {
		page.Links = res.links
	}
	return page
}

// attemptResult is what one attempt saw.
type attemptResult struct {
	status      int
	contentType string
	finalURL    string
	bytes       int64
	title       string
	fields      map[string][]string
	links       []string
	err         error
	transient   bool
	retryAfter  time.Duration // -1: none
}

// attempt makes one request with a Colly collector of its own (its own
// cookie jar, so that cookies set by one site never reach another task),
// over the Engine's shared transport. A followed link (not a seed) may not
// redirect out of the allowed domains.
func (e *Engine) attempt(ctx context.Context, b *built, o Options, guard, followed, wantLinks bool, release func()) (r attemptResult) {
	r.retryAfter = -1
	actx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()

	base := e.plain
	if guard {
		base = e.guarded
	}
	var read int64
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
	c.Context = actx
	c.WithTransport(&boundedTransport{base: base, max: o.MaxBodyBytes, read: &read})
	c.SetRequestTimeout(0) // actx bounds the attempt, body included
	c.SetRedirectHandler(func(req *http.Request, via []*http.Request) error {
		if o.MaxRedirects < 0 {
			return http.ErrUseLastResponse
		}
		if len(via) > o.MaxRedirects {
			return &redirectError{max: o.MaxRedirects, last: req.URL.String()}
		}
		if followed && !domainAllowed(req.URL.Scheme, req.URL.Host, o.AllowedDomains) {
			return &offDomainRedirectError{to: req.URL.String()}
		}
		return nil
	})

	c.OnResponseHeaders(func(resp *colly.Response) {
		r.status = resp.StatusCode
		r.contentType = resp.Headers.Get("Content-Type")
		r.finalURL = resp.Request.URL.String()
	})
	gotBody := false
	c.OnResponse(func(resp *colly.Response) {
		release() // the body is read: the domain's slot is free while we parse
		gotBody = true
		r.status = resp.StatusCode
		r.contentType = resp.Headers.Get("Content-Type")
		r.finalURL = resp.Request.URL.String()
		r.bytes = int64(len(resp.Body))
		if ra := resp.Headers.Get("Retry-After"); ra != "" {
			if d, ok := parseRetryAfter(ra, time.Now()); ok {
				r.retryAfter = d
			}
		}
		if len(o.Selectors) > 0 {
			r.fields = make(map[string][]string, len(o.Selectors))
			for name := range o.Selectors {
				r.fields[name] = []string{}
			}
		}
	})
	var parseErr error
	c.OnError(func(_ *colly.Response, err error) {
		// Colly reports an HTML parse error (e.g. nesting deeper than
		// x/net/html's 512 levels) only here: Request returns nil.
		if gotBody && parseErr == nil {
			parseErr = err
		}
	})
	titled := false
	c.OnHTML("title", func(el *colly.HTMLElement) {
		if !titled {
			titled = true
			r.title = strings.TrimSpace(el.Text)
		}
	})
	if len(o.Selectors) > 0 {
		rooted := false
		c.OnHTML("html", func(el *colly.HTMLElement) {
			if rooted || len(el.DOM.Nodes) == 0 {
				return
			}
			rooted = true
			r.fields = extractFields(el.DOM.Nodes[0], o.Selectors)
		})
	}
	var rawLinks []string
	if wantLinks {
		c.OnHTML("a[href]", func(el *colly.HTMLElement) {
			if len(rawLinks) < 4*MaxLinksPerPage {
				if abs := el.Request.AbsoluteURL(el.Attr("href")); abs != "" {
					rawLinks = append(rawLinks, abs)
				}
			}
		})
	}

	var body io.Reader
	if b.body != nil {
		body = bytes.NewReader(b.body)
	}
	err := c.Request(b.method, b.url.String(), body, nil, b.header.Clone())
	if !gotBody {
		r.bytes = read
	}
	switch {
	case err != nil:
		r.err, r.transient = classify(ctx, actx, o, err)
		if gotBody { // the failure came after the body: keep what was read
			return r
		}
		r.title, r.fields = "", nil
		return r
	case parseErr != nil:
		r.err = fmt.Errorf("parse HTML: %v", parseErr)
		return r
	case r.status == http.StatusTooManyRequests || r.status >= 500:
		r.err, r.transient = statusError(r.status), true
		return r
	case r.status >= 400:
		r.err = statusError(r.status)
		return r
	}
	if wantLinks {
		r.links = filterLinks(rawLinks, o.AllowedDomains, o.KeepTrackingParams)
	}
	return r
}

func statusError(code int) error { return fmt.Errorf("HTTP %d", code) }

// classify turns an attempt's error into a clear reason, and says whether
// it is transient (worth a retry).
func classify(ctx, actx context.Context, o Options, err error) (error, bool) {
	var (
		tooLarge *bodyTooLargeError
		redirect *redirectError
		offsite  *offDomainRedirectError
		private  *privateAddrError
		dnsErr   *net.DNSError
		certErr  *tls.CertificateVerificationError
	)
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("canceled: %v", context.Cause(ctx)), false
	case errors.As(err, &tooLarge):
		return tooLarge, false
	case errors.As(err, &redirect):
		return redirect, false
	case errors.As(err, &offsite):
		return offsite, false
	case errors.As(err, &private):
		return private, false
	case errors.Is(actx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("timeout after %s", o.Timeout), true
	case errors.As(err, &dnsErr) && dnsErr.IsNotFound:
		return fmt.Errorf("no such host %s", dnsErr.Name), false
	case errors.As(err, &certErr):
		return fmt.Errorf("TLS: %v", certErr), false
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		if ue.Timeout() {
			return fmt.Errorf("timeout: %v", ue.Err), true
		}
		return fmt.Errorf("connection error: %v", ue.Err), true
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return fmt.Errorf("connection error: %v", err), true
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return fmt.Errorf("connection error: %v", err), true
	}
	return err, false
}

// offDomainRedirectError stops a followed link redirecting out of the
// allowed domains (links are filtered by domain; their redirects too).
type offDomainRedirectError struct{ to string }

func (e *offDomainRedirectError) Error() string {
	return fmt.Sprintf("redirect to %s leaves the allowed domains", e.to)
}

type redirectError struct {
	max  int
	last string
}

func (e *redirectError) Error() string {
	return fmt.Sprintf("stopped after %d redirects (next %s)", e.max, e.last)
}

// filterLinks normalises (keeping tracking parameters if keepTracking),
// keeps http(s) links within allowed, and deduplicates, in document order.
func filterLinks(raw []string, allowed []string, keepTracking bool) []string {
	seen := make(map[string]bool, len(raw))
	var out []string
	for _, l := range raw {
		n, u, err := linkURL(l, keepTracking)
		if err != nil || seen[n] || !domainAllowed(u.Scheme, u.Host, allowed) {
			continue
		}
		seen[n] = true
		out = append(out, n)
		if len(out) == MaxLinksPerPage {
			break
		}
	}
	return out
}

// extractFields evaluates each selector over the document of root and
// returns the trimmed text of every match, bounded to MaxFieldBytes in all
// (Colly's own OnHTML computes the whole text of every match, which nested
// matches make quadratic).
func extractFields(root *html.Node, selectors map[string]string) map[string][]string {
	doc := root
	for doc.Parent != nil {
		doc = doc.Parent
	}
	out := make(map[string][]string, len(selectors))
	budget := MaxFieldBytes
	for name, sel := range selectors {
		out[name] = []string{}
		m, err := cascadia.Compile(sel) // validated already
		if err != nil {
			continue
		}
		goquery.NewDocumentFromNode(doc).FindMatcher(m).Each(func(_ int, s *goquery.Selection) {
			for _, n := range s.Nodes {
				if budget <= 0 {
					return
				}
				t := strings.TrimSpace(boundedText(n, budget))
				budget -= len(t)
				out[name] = append(out[name], t)
			}
		})
	}
	return out
}

// boundedText is the text of n (as goquery's Text), at most limit bytes.
func boundedText(n *html.Node, limit int) string {
	var b strings.Builder
	var walk func(*html.Node) bool
	walk = func(n *html.Node) bool {
		if n.Type == html.TextNode {
			if b.Len()+len(n.Data) > limit {
				b.WriteString(n.Data[:limit-b.Len()])
				return false
			}
			b.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			if !walk(c) {
				return false
			}
		}
		return true
	}
	walk(n)
	return b.String()
}

// retryWait returns the wait before retry number attempt (1-based), or why
// there is no retry: exponential backoff from RetryBackoff, at least the
// Retry-After, at most MaxRetryWait; a Retry-After beyond MaxRetryWait or
// beyond ctx's deadline ends the retries.
func retryWait(ctx context.Context, o Options, attempt int, retryAfter time.Duration) (time.Duration, string) {
	wait := o.RetryBackoff
	for i := 1; i < attempt && wait < o.MaxRetryWait; i++ {
		wait *= 2
	}
	wait = min(wait, o.MaxRetryWait)
	if retryAfter >= 0 {
		if retryAfter > o.MaxRetryWait {
			return 0, fmt.Sprintf("not retried: Retry-After %s exceeds max_retry_wait %s", retryAfter, o.MaxRetryWait)
		}
		wait = max(wait, retryAfter)
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
		return 0, fmt.Sprintf("not retried: the %s wait would end after the deadline", wait)
	}
	return wait, ""
}

// parseRetryAfter reads a Retry-After value: delay-seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		if s < 0 {
			return 0, false
		}
		if s > int64(24*time.Hour/time.Second) {
			s = int64(24 * time.Hour / time.Second)
		}
		return time.Duration(s) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}
