package crawl

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/net/html"

	"github.com/batoncrawl/baton/roles"
)

// Bounds on what one page can add to a result.
const (
	MaxLinksPerPage = 10000   // further links are dropped
	MaxFieldBytes   = 1 << 20 // total text of a page's fields; further matches are dropped
	// MaxTitleBytes bounds Page.Title (cut on a character boundary): a
	// plain Task records the title in its znode, which ZooKeeper caps.
	MaxTitleBytes = 1 << 10
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
	// AllowedDomains, passing FollowAllow and FollowDeny, http(s) only, in
	// document order (an HTML page's a[href], a JSON response's LinksJSON);
	// empty when !Follow, when Depth >= MaxDepth or when the page failed.
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
	// Canonical is the absolute URL of the page's <link rel="canonical">.
	Canonical string `json:"canonical,omitempty"`
	// JSONLD are the page's valid <script type="application/ld+json">
	// blocks, compacted, in document order (see MaxJSONLDBlocks).
	JSONLD []json.RawMessage `json:"jsonld,omitempty"`
	// Charset is the encoding the body was read as (HTML only): the
	// Content-Type's, else the byte-order mark's or the <meta> one's.
	Charset string `json:"charset,omitempty"`
	// BodyHash is the SHA-256 (hex) of the body; pages of one job with
	// the same hash are duplicates.
	BodyHash string `json:"body_hash,omitempty"`
	// Sitemap marks the fetch of a sitemap (FetchSitemap): Links are the
	// page URLs it lists, Sitemaps the sitemaps it lists.
	Sitemap  bool     `json:"sitemap,omitempty"`
	Sitemaps []string `json:"sitemaps,omitempty"`
	// ETag and LastModified are the response's validators, as received
	// (a recrawl sends them back: jobs.RevisitRecord keeps them).
	ETag         string `json:"-"`
	LastModified string `json:"-"`
	// Body is the body read, when Options.KeepBody (never in JSON).
	Body []byte `json:"-"`
	// Header is the response's header, with KeepBody only (a user
	// crawler's handler reads it); never recorded.
	Header http.Header `json:"-"`
	// Rendered: the fields, links and title come from the DOM headless
	// Chromium rendered (Options.Render); RenderReason says why it was
	// rendered ("always", "auto: empty fields", "auto: no links", ...).
	Rendered     bool   `json:"rendered,omitempty"`
	RenderReason string `json:"render_reason,omitempty"`
	// RenderCrashes counts the tabs that crashed rendering the page (it
	// is rendered once more in a new tab after a crash);
	// RenderTimedOut says the page did not settle within its budget.
	RenderCrashes  int  `json:"render_crashes,omitempty"`
	RenderTimedOut bool `json:"render_timed_out,omitempty"`
	// Scripts are the values of a user crawler's Evaluate steps and
	// Screenshot a PNG of the rendered viewport (RenderScreenshots or a
	// crawler's Screenshot); never in JSON.
	Scripts    map[string]json.RawMessage `json:"-"`
	Screenshot []byte                     `json:"-"`
}

// OK reports whether the page was fetched without error.
func (p Page) OK() bool { return p.Error == "" }

// Engine fetches pages. It is safe for concurrent use and meant to be shared
// by a worker process: it holds the per-domain limits, the robots.txt cache
// and the connection pools.
type Engine struct {
	// Policy is the operator's rule (the worker's --deny-private and
	// address lists): every fetch is dialled under it, with no exception —
	// the URLs a job's user typed (Options.TypedURLs), a plain Task's
	// requests and a job's proxy included. A job's Options.DenyPrivate
	// adds private addresses to it. Set it before the first fetch.
	Policy Policy

	plain, guarded *http.Transport
	limits         *limiter
	robots         *robotsCache

	mu      sync.Mutex
	proxied map[string]*http.Transport // by proxy URL and guard
	clients [2]*http.Client            // crawler code's (Client), by the job's guard

	rendering rendering // the browser pool and what auto learnt (render.go)
}

// NewEngine returns an Engine with empty caches.
func NewEngine() *Engine {
	e := &Engine{
		limits:  newLimiter(),
		robots:  newRobotsCache(),
		proxied: map[string]*http.Transport{},
	}
	e.plain = newTransport(func(a netip.Addr) error { return e.Policy.check(a, false) }, nil)
	// The environment's proxy (HTTP_PROXY...) serves the unguarded fetches
	// of a worker with no policy only: a proxy dials for us, out of the
	// policy's sight.
	e.plain.Proxy = func(r *http.Request) (*url.URL, error) {
		if e.Policy.Active() {
			return nil, nil
		}
		return http.ProxyFromEnvironment(r)
	}
	e.guarded = newTransport(func(a netip.Addr) error { return e.Policy.check(a, true) }, nil)
	return e
}

// checkHost refuses a host name that is, or resolves to, an address the
// Engine may not reach (private ones too when denyPrivate).
func (e *Engine) checkHost(ctx context.Context, hostname string, denyPrivate bool) error {
	return e.Policy.checkHost(ctx, hostname, denyPrivate)
}

// maxProxies bounds the proxies whose connection pools an Engine keeps.
const maxProxies = 64

// transport returns the transport of a fetch: through proxy when set
// (one pool per proxy and guard), else guarded or plain. A proxy is the
// only address its transport dials: it is dialled under the Policy, and
// under the job's own guard unless the job's user typed it as an IP
// address (proxyGuard).
func (e *Engine) transport(guard bool, proxy string) (*http.Transport, error) {
	if proxy == "" {
		if guard {
			return e.guarded, nil
		}
		return e.plain, nil
	}
	u, err := url.Parse(proxy)
	if err != nil {
		return nil, fmt.Errorf("proxy: %v", err)
	}
	deny := proxyGuard(guard, u)
	key := proxy + "\x00" + strconv.FormatBool(deny)
	e.mu.Lock()
	defer e.mu.Unlock()
	if t, ok := e.proxied[key]; ok {
		return t, nil
	}
	if len(e.proxied) >= maxProxies {
		for k, t := range e.proxied {
			t.CloseIdleConnections()
			delete(e.proxied, k)
			break
		}
	}
	t := newTransport(func(a netip.Addr) error { return e.Policy.check(a, deny) }, u)
	e.proxied[key] = t
	return t, nil
}

// proxyGuard reports whether a job's own guard refuses a private address
// for its proxy u: unless the job's user typed the proxy as an IP
// address (a host name may resolve anywhere). The operator's Policy
// applies whatever this says.
func proxyGuard(guard bool, u *url.URL) bool { return guard && !isIPLiteral(u.Hostname()) }

// isIPLiteral reports whether a URL's host name is an IP address.
func isIPLiteral(hostname string) bool {
	_, err := netip.ParseAddr(strings.Trim(hostname, "[]"))
	return err == nil
}

// CloseIdleConnections closes the Engine's idle connections.
func (e *Engine) CloseIdleConnections() {
	e.plain.CloseIdleConnections()
	e.guarded.CloseIdleConnections()
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, t := range e.proxied {
		t.CloseIdleConnections()
	}
}

// Fetch fetches one page found at depth (0 for a seed) and never panics:
// every failure is in Page.Error. It honours the request's method, URL,
// query parameters, headers and body, and auth's cookies and authorization
// (the conventions of NewHTTPRequest); obeys robots.txt unless
// opts.IgnoreRobots; waits for the domain's delay and parallelism; retries
// transient failures; bounds body, time and redirects.
func (e *Engine) Fetch(ctx context.Context, req roles.Request, auth Auth, depth int, opts Options) Page {
	return e.fetch(ctx, req, auth, depth, opts, false)
}

// FetchSitemap fetches a sitemap as Fetch fetches a page (robots.txt,
// politeness, retries and bounds alike) and returns the URLs it lists:
// Page.Links are its pages, Page.Sitemaps the sitemaps of a sitemap index,
// both absolute, normalised, deduplicated and within
// Options.AllowedDomains, at most MaxSitemapURLs each. It reads the XML
// sitemap protocol (urlset and sitemapindex, gzip-compressed too), a plain
// text sitemap (one URL per line), and a robots.txt (its Sitemap: lines).
func (e *Engine) FetchSitemap(ctx context.Context, req roles.Request, auth Auth, opts Options) Page {
	return e.fetch(ctx, req, auth, 0, opts, true)
}

func (e *Engine) fetch(ctx context.Context, req roles.Request, auth Auth, depth int, opts Options, sitemap bool) (page Page) {
	start := time.Now()
	page = Page{URL: req.URL, Depth: depth, Sitemap: sitemap}
	defer func() {
		if r := recover(); r != nil {
			page.Error = fmt.Sprintf("internal error: %v", r)
		}
		page.DurationMS = time.Since(start).Milliseconds()
	}()

	pr, errText := e.prepare(ctx, req, auth, depth, opts, sitemap)
	if errText != "" {
		page.Error = auth.URLSecrets.Scrub(errText)
		return page
	}
	opts, b, base, checkRedirect := pr.opts, pr.b, pr.base, pr.checkRedirect
	domain := pr.domain
	delay := opts.Delay
	if !opts.IgnoreRobots {
		rules, err := e.robotsRules(ctx, pr)
		if err != nil {
			page.Error = "waiting for robots.txt: " + err.Error()
			return page
		}
		ok, crawlDelay := rules.allowed(robotsPath(b.url), pr.agent)
		if !ok {
			page.Error, page.Disallowed = errRobots{status: rules.status}.Error(), true
			return page
		}
		delay = max(delay, crawlDelay)
		// Every redirect's target is asked of its own robots.txt too.
		checkRedirect = e.robotsRedirect(pr, checkRedirect)
	}

	wantLinks := opts.Follow && depth < opts.MaxDepth
	var res attemptResult
	for attempt := 1; ; attempt++ {
		release, err := e.limits.acquire(ctx, domain, opts.Parallelism, delay, opts.NotBefore)
		if err != nil {
			if attempt == 1 {
				res = attemptResult{err: fmt.Errorf("waiting for %s: %w", domain, err)}
			} else {
				res.err = fmt.Errorf("%w; gave up retrying: %v", res.err, err)
			}
			break
		}
		page.Attempts = attempt
		if renderFirst(opts, b, sitemap) {
			why := ReasonAlways
			if opts.RenderReason != "" {
				why = opts.RenderReason
			}
			res = e.renderAttempt(ctx, pr, wantLinks, release, why)
		} else {
			res = e.attempt(ctx, b, opts, base(), checkRedirect, depth > 0, wantLinks, sitemap, release)
		}
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

	res = e.renderAuto(ctx, pr, res, wantLinks, delay, sitemap)
	page.Rendered, page.RenderReason = res.rendered != "", res.rendered
	page.RenderCrashes, page.RenderTimedOut = res.render.crashes, res.render.timedOut
	page.Scripts, page.Screenshot = res.render.scripts, res.render.screenshot
	page.FinalURL = res.finalURL
	page.StatusCode = res.status
	page.ContentType = res.contentType
	page.Bytes = res.bytes
	page.Title = res.title
	page.Fields = res.fields
	page.Canonical = res.canonical
	page.JSONLD = res.jsonld
	page.Charset = res.charset
	page.BodyHash = res.hash
	page.ETag, page.LastModified = res.etag, res.modified
	page.Body = res.body
	page.Header = res.header
	if res.err != nil {
		page.Error = res.err.Error()
	} else {
		page.Links = res.links
		page.Sitemaps = res.sitemaps
	}
	auth.URLSecrets.redactPage(&page)
	return page
}

// dropPrivate drops the URLs whose host is (or resolves to) a private
// address; private caches the answer per host.
func (e *Engine) dropPrivate(ctx context.Context, urls []string, private map[string]bool) []string {
	out := urls[:0]
	for _, s := range urls {
		u, err := url.Parse(s)
		if err != nil {
			continue
		}
		h := u.Hostname()
		bad, ok := private[h]
		if !ok {
			bad = e.checkHost(ctx, h, true) != nil
			private[h] = bad
		}
		if !bad {
			out = append(out, s)
		}
	}
	return out
}

// hostHeaders are the names of the headers of a request that stay on its
// host: every header of the request (its own, the job's, cookies and
// authorization, which may all hold credentials) but the User-Agent and
// the body's Content-Type. Go's client drops only Authorization and
// Cookie on a redirect to another domain.
func hostHeaders(h http.Header) []string {
	var out []string
	for k := range h {
		switch http.CanonicalHeaderKey(k) {
		case "User-Agent", "Content-Type":
		default:
			out = append(out, k)
		}
	}
	return out
}

// leftHost reports whether a redirect chain (via, then req) has left the
// host of its first request: another host or port, or from https to http.
// Once left, always left (as Go's client does for Authorization and
// Cookie): a host the chain went through cannot have the credentials sent
// back to a path of its choosing on the first host.
func leftHost(req *http.Request, via []*http.Request) bool {
	if len(via) == 0 {
		return false
	}
	first := via[0].URL
	if !sameHost(first, req.URL) {
		return true
	}
	for _, r := range via[1:] {
		if !sameHost(first, r.URL) {
			return true
		}
	}
	return false
}

// sameHost reports whether to is on from's host and port, and not a
// downgrade from https to http.
func sameHost(from, to *url.URL) bool {
	if strings.EqualFold(from.Scheme, "https") && !strings.EqualFold(to.Scheme, "https") {
		return false
	}
	return hostKey(from) == hostKey(to)
}

func statusError(code int) error { return fmt.Errorf("HTTP %d", code) }

// classify turns an attempt's error into a clear reason, and says whether
// it is transient (worth a retry).
func classify(ctx, actx context.Context, o Options, err error) (error, bool) {
	var (
		tooLarge    *bodyTooLargeError
		redirect    *redirectError
		offsite     *offDomainRedirectError
		private     *privateAddrError
		robotsRedir *robotsRedirectError
		dnsErr      *net.DNSError
		certErr     *tls.CertificateVerificationError
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
	case errors.As(err, &robotsRedir):
		return robotsRedir, false
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
	return filterLinksMax(raw, allowed, MaxLinksPerPage, keepTracking, nil)
}

// filterLinksMax is filterLinks keeping at most limit links that pass r's
// follow rules (none when r is nil).
func filterLinksMax(raw []string, allowed []string, limit int, keepTracking bool, r *rules) []string {
	seen := make(map[string]bool, len(raw))
	check := r != nil && len(r.allow)+len(r.deny) > 0
	var out []string
	for _, l := range raw {
		n, u, err := linkURL(l, keepTracking)
		if err != nil || seen[n] || !domainAllowed(u.Scheme, u.Host, allowed) {
			continue
		}
		seen[n] = true
		if check {
			if ok, _ := r.follows(n); !ok {
				continue
			}
		}
		out = append(out, n)
		if len(out) == limit {
			break
		}
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

// truncateUTF8 cuts s to at most n bytes, on a character boundary.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// retryWait returns the wait before retry number attempt (1-based), or why
// there is no retry: exponential backoff from RetryBackoff, at least the
// Retry-After, at most MaxRetryWait; a Retry-After beyond MaxRetryWait or
// beyond ctx's deadline ends the retries.
// RetryWait is the wait before retry number attempt (1-based) of a
// request under o — the engine's own backoff, for a retry its caller
// decides (a user crawler's crawler.Retry) — and false when there is none
// (it would end after ctx's deadline).
func (o Options) RetryWait(ctx context.Context, attempt int) (time.Duration, bool) {
	w, why := retryWait(ctx, o, attempt, -1)
	return w, why == ""
}

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
