// Package crawl is Baton's fetch engine: it fetches one page with Colly,
// honouring the request's method, URL, query parameters, headers, body,
// cookies and authorization (and a job's User-Agent, headers and proxy),
// decodes gzip, brotli and zstd and the page's charset, extracts named
// fields (CSS text or attributes, XPath, JSON paths), the canonical URL,
// the JSON-LD blocks and the links to follow, reads sitemaps, and bounds
// what a hostile site can cost: robots.txt (Crawl-delay included),
// per-domain delay and parallelism, retries with backoff honouring
// Retry-After, body size, time and redirects.
//
// An Engine is shared by all the activities of a worker process; the
// per-domain limits and the robots.txt cache it holds apply across them.
package crawl

import (
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/batoncrawl/baton/activities/archive"
)

// Version is Baton's version, named by DefaultUserAgent (set at build time
// with -ldflags "-X github.com/batoncrawl/baton/activities/crawl.Version=…").
var Version = "0.2.0"

// DefaultUserAgent is the User-Agent of DefaultOptions: Baton and its
// version, with where to read about it.
var DefaultUserAgent = "Baton/" + Version + " (+https://github.com/batoncrawl/baton)"

// Defaults applied by DefaultOptions, and by Fetch to a zero field that has
// no meaning of its own (see the field comments of Options).
const (
	DefaultParallelism  = 4
	DefaultRetries      = 2
	DefaultMaxBodyBytes = 10 << 20
	DefaultTimeout      = 15 * time.Second
	DefaultMaxRedirects = 10
	DefaultRetryBackoff = 500 * time.Millisecond
	DefaultMaxRetryWait = 30 * time.Second
)

// Options controls one Fetch. The zero value of Parallelism, MaxBodyBytes,
// Timeout, MaxRedirects, UserAgent, RetryBackoff and MaxRetryWait means the
// default; the zero value of the other fields means what it says (no delay,
// no retries, robots obeyed, no following).
type Options struct {
	// Selectors maps a field name to a selector (see Selector): CSS for
	// the trimmed text of every match ("h1"), CSS with "@attr" for an
	// attribute ("a.next@href"), "xpath:…" or, on JSON responses,
	// "json:…"; the field's value lists every match in document order.
	Selectors map[string]string `json:"selectors,omitempty"`
	// FieldOrder is the order of the fields as they were given (baton
	// crawl's --select order): the names of Selectors and of
	// LabelSelectors' fields, each once. Exports put their columns in it
	// (FieldNames); a field it does not name follows, sorted. A map has
	// no order: without it the columns come out sorted.
	FieldOrder []string `json:"field_order,omitempty"`
	// Headers are sent with every request, unless the request sets the
	// same header (cookies and authorization are separate).
	Headers map[string]string `json:"headers,omitempty"`
	// Proxy is the URL of the proxy every request goes through
	// (http://, https:// or socks5://, with user:password@ if needed);
	// empty: the environment's (HTTP_PROXY, HTTPS_PROXY, NO_PROXY) on a
	// worker with no Policy, else none. The proxy is the one address its
	// requests dial: it is dialled under the worker's Policy, and under
	// DenyPrivate unless given as an IP address; the proxy dials the
	// targets, so their host names are checked (before the request and
	// on each redirect).
	Proxy string `json:"proxy,omitempty"`
	// KeepBody returns the body read in Page.Body (for storing it); it is
	// not part of a job's spec.
	KeepBody bool `json:"-"`
	// RequestHook, when set, may adjust the request of a page's fetch
	// before it is sent: once per attempt, before its first hop, robots.txt
	// excluded — a user crawler's BeforeRequest (headers, request
	// signing). The headers it sets are treated as credentials: sent again
	// on redirects within the request's host, dropped once the redirect
	// chain leaves it. An error fails the attempt. Never serialised.
	RequestHook func(*http.Request) error `json:"-"`
	// compiled is set by Compile: the defaults are applied, the options
	// valid and the selectors parsed (never serialised).
	compiled *compiled
	// Follow collects the page's links for following.
	Follow bool `json:"follow"`
	// FollowAllow and FollowDeny are regexps (Go syntax) matched against
	// a link's normalised URL: a link is followed only if it matches no
	// FollowDeny pattern and, when FollowAllow has any, at least one of
	// them. They apply to the links of pages (HTML and LinksJSON), to the
	// pages a sitemap lists and to a user crawler's Enqueue (FollowLink);
	// not to the seeds, nor to the sitemaps a sitemap index lists.
	FollowAllow []string `json:"follow_allow,omitempty"`
	FollowDeny  []string `json:"follow_deny,omitempty"`
	// Labels give a page a label (recorded with it): the first rule whose
	// Pattern matches the page's normalised URL names it; none, no label.
	// The label picks the page's LabelSelectors.
	Labels []LabelRule `json:"labels,omitempty"`
	// LabelSelectors maps a label (of Labels) to fields extracted from
	// that label's pages only (field name to selector, as Selectors), in
	// addition to Selectors; a field of the same name replaces the
	// Selectors one on those pages.
	LabelSelectors map[string]map[string]string `json:"label_selectors,omitempty"`
	// LinksJSON are GJSON paths (https://github.com/tidwall/gjson#path-syntax,
	// no "json:" prefix) whose string results, on a JSON response, are
	// links to follow, resolved against the response's URL and then
	// filtered as a page's links (within AllowedDomains, FollowAllow and
	// FollowDeny); an array's strings are each a link.
	LinksJSON []string `json:"links_json,omitempty"`
	// Label is the label of the page being fetched, which picks its
	// LabelSelectors: set per fetch (a job's runner sets the label the
	// URL was queued with); never serialised.
	Label string `json:"-"`
	// MaxDepth: links found at depth >= MaxDepth are not returned for
	// following (0 = seeds only).
	MaxDepth int `json:"max_depth"`
	// AllowedDomains are the hosts links (and the redirects of followed
	// links) may stay within: an entry matches its exact host and its
	// subdomains; an entry with a port ("host:8080") matches that host and
	// port only. Empty = no restriction at the engine level (the job fills
	// it with the seeds' domains).
	AllowedDomains []string `json:"allowed_domains,omitempty"`
	// KeepTrackingParams keeps tracking parameters (utm_*, fbclid, gclid,
	// ...; see IsTrackingParam) in the links found; by default
	// normalisation removes them, so that they do not multiply the pages.
	KeepTrackingParams bool `json:"keep_tracking_params,omitempty"`
	// IgnoreRobots: by default robots.txt is obeyed, Crawl-delay included.
	IgnoreRobots bool `json:"ignore_robots"`
	// Delay is the minimum time between requests to one domain (host:port):
	// a request starts at least Delay after the previous one to the same
	// domain started and after it ended. A robots.txt Crawl-delay larger
	// than Delay replaces it.
	Delay time.Duration `json:"delay"`
	// Parallelism is the maximum number of concurrent requests to one
	// domain (host:port), across all the Fetch calls of an Engine.
	Parallelism int `json:"parallelism"`
	// NotBefore, when set, is the earliest a request of the fetch may
	// start (the domain's last request by another Engine, plus the delay:
	// a crawl job's host lease hands it over); never serialised.
	NotBefore time.Time `json:"-"`
	// Robots, when set, keeps the robots.txt files of the fetch's crawl
	// job for every Engine crawling it (the job store): a file kept there
	// and fresh is used instead of fetching robots.txt again, and a file
	// fetched is kept there. Never serialised.
	Robots RobotsStore `json:"-"`
	// Archive, when set, receives every HTTP exchange of the fetch as it
	// went over the wire (archive.Capture: raw body, Content-Encoding
	// kept), robots.txt and redirects included: a job's --warc writer.
	// Never serialised.
	Archive archive.Sink `json:"-"`
	// Retries is how many times a transient failure (timeout, connection
	// error, HTTP 429 or 5xx) is retried, with exponential backoff from
	// RetryBackoff, honouring Retry-After (seconds or HTTP date); no wait
	// exceeds MaxRetryWait: a Retry-After beyond it ends the retries.
	Retries int `json:"retries"`
	// MaxBodyBytes bounds the (decoded) body; a larger body is an error,
	// never silently truncated.
	MaxBodyBytes int64 `json:"max_body_bytes"`
	// Timeout bounds each request attempt, body included.
	Timeout time.Duration `json:"timeout"`
	// MaxRedirects bounds the redirects followed; -1 follows none (the 3xx
	// response is the result).
	MaxRedirects int `json:"max_redirects"`
	// UserAgent is sent unless the request's header sets one; robots.txt
	// groups are matched against it.
	UserAgent string `json:"user_agent"`
	// DenyPrivate refuses private, loopback, link-local and the other
	// non-public addresses (see isPrivate) for every request of a fetch:
	// links, pages a sitemap lists (queued at depth 0 like seeds), the
	// sitemaps a sitemap or robots.txt lists, robots.txt, and every
	// redirect, checked on the address dialled (a DNS answer cannot get
	// round it). The one exception is the first request of a page at depth
	// 0, or of a sitemap, whose URL is in TypedURLs and names its host by
	// an IP address: the user typed that address (its redirects are
	// guarded; a typed host name is guarded, as its DNS answers may point
	// anywhere). With a Proxy, the proxy dials: host names are checked
	// instead, before the request and on each redirect. The worker's
	// Policy applies whatever this says.
	DenyPrivate bool `json:"deny_private"`
	// TypedURLs are the seed and sitemap URLs the user typed, normalised
	// (as a job's frontier holds them): under DenyPrivate the requests for
	// them, and no others, may reach a private address (if typed as an IP
	// address). Not part of a
	// job's stored spec: jobs.Spec.TypedURLs derives it from the spec's
	// seeds and sitemaps.
	TypedURLs []string `json:"-"`

	// RetryBackoff is the first retry's wait; it doubles on each retry.
	RetryBackoff time.Duration `json:"retry_backoff,omitempty"`
	// MaxRetryWait caps one wait between retries.
	MaxRetryWait time.Duration `json:"max_retry_wait,omitempty"`

	// RenderOptions: which pages are rendered in headless Chromium, and
	// how (render_options.go).
	RenderOptions
}

// isTyped reports whether raw is one of TypedURLs, as given or normalised.
func (o Options) isTyped(raw string) bool {
	if len(o.TypedURLs) == 0 {
		return false
	}
	forms := []string{raw}
	if n, err := o.NormalizeURL(raw); err == nil {
		forms = append(forms, n)
	}
	if n, err := NormalizeURL(raw); err == nil {
		forms = append(forms, n)
	}
	for _, t := range o.TypedURLs {
		if slices.Contains(forms, t) {
			return true
		}
	}
	return false
}

// DefaultOptions returns sensible options: robots.txt obeyed, 4 concurrent
// requests per domain, 2 retries, a 10 MiB body, a 15 s timeout, 10
// redirects, Baton's User-Agent.
func DefaultOptions() Options {
	return Options{
		Parallelism:  DefaultParallelism,
		Retries:      DefaultRetries,
		MaxBodyBytes: DefaultMaxBodyBytes,
		Timeout:      DefaultTimeout,
		MaxRedirects: DefaultMaxRedirects,
		UserAgent:    DefaultUserAgent,
		RetryBackoff: DefaultRetryBackoff,
		MaxRetryWait: DefaultMaxRetryWait,
	}
}

// compiled is what Compile works out once for a job.
type compiled struct {
	sels map[string]Selector
	// byLabel are the selectors of each label's pages: sels with the
	// label's LabelSelectors.
	byLabel map[string]map[string]Selector
	rules   rules
}

// Compile applies the defaults, validates o (naming the first bad field)
// and parses its selectors, and returns the options with that work kept:
// fetching with compiled options does none of it again, so a job's options
// are compiled once (by the Runner, per job) rather than for every page.
// Changing a compiled Options' Selectors, LabelSelectors, FollowAllow,
// FollowDeny, Labels or LinksJSON afterwards is not allowed (the compiled
// form is shared by every copy); KeepBody, Label, Follow and the other
// scalar fields may be changed freely.
func (o Options) Compile() (Options, error) {
	o = o.withDefaults()
	if err := o.Validate(); err != nil {
		return o, err
	}
	sels := parseSelectors(o.Selectors)
	o.compiled = &compiled{sels: sels, byLabel: compileLabelSelectors(o, sels), rules: compileRules(o)}
	return o, nil
}

// withDefaults fills the zero fields that mean "default".
func (o Options) withDefaults() Options {
	if o.Parallelism == 0 {
		o.Parallelism = DefaultParallelism
	}
	if o.MaxBodyBytes == 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxRedirects == 0 {
		o.MaxRedirects = DefaultMaxRedirects
	}
	if o.UserAgent == "" {
		o.UserAgent = DefaultUserAgent
	}
	if o.RetryBackoff == 0 {
		o.RetryBackoff = DefaultRetryBackoff
	}
	if o.MaxRetryWait == 0 {
		o.MaxRetryWait = DefaultMaxRetryWait
	}
	return o
}

// Validate checks the options and names the first bad field, e.g.
// `selectors["price"]: invalid CSS selector "a[": ...`.
// validateSelector checks one named selector; field names it in the
// error.
func validateSelector(field, name, sel string) error {
	switch {
	case strings.TrimSpace(name) == "":
		return fieldErr(field, "empty field name")
	case strings.TrimSpace(sel) == "":
		return fieldErr(field, "empty selector")
	}
	if _, err := ParseSelector(sel); err != nil {
		return fieldErr(field, "%v", err)
	}
	return nil
}

func (o Options) Validate() error {
	if err := o.RenderOptions.validate(); err != nil {
		return err
	}
	names := slices.Sorted(maps.Keys(o.Selectors))
	for _, name := range names {
		sel := o.Selectors[name]
		if err := validateSelector(fmt.Sprintf("selectors[%q]", name), name, sel); err != nil {
			return err
		}
	}
	hnames := slices.Sorted(maps.Keys(o.Headers))
	for _, k := range hnames {
		switch {
		case !httpguts.ValidHeaderFieldName(k):
			return fieldErr(fmt.Sprintf("headers[%q]", k), "not a valid header name")
		case !httpguts.ValidHeaderFieldValue(o.Headers[k]):
			return fieldErr(fmt.Sprintf("headers[%q]", k), "value contains a control character")
		case strings.EqualFold(k, "Host"), strings.EqualFold(k, "Content-Length"), strings.EqualFold(k, "Transfer-Encoding"):
			return fieldErr(fmt.Sprintf("headers[%q]", k), "is set by the transport, not by a job")
		}
	}
	if err := o.validateRules(); err != nil {
		return err
	}
	if o.Proxy != "" {
		if err := checkProxy(o.Proxy); err != nil {
			return fieldErr("proxy", "%v", err)
		}
	}
	for i, d := range o.AllowedDomains {
		if err := checkDomain(d); err != nil {
			return fieldErr(fmt.Sprintf("allowed_domains[%d]", i), "%q %v", d, err)
		}
	}
	type bound struct {
		field string
		bad   bool
		val   any
		want  string
	}
	for _, b := range []bound{
		{"max_depth", o.MaxDepth < 0, o.MaxDepth, "must be >= 0"},
		{"delay", o.Delay < 0, o.Delay, "must be >= 0"},
		{"parallelism", o.Parallelism < 0, o.Parallelism, "must be >= 0 (0 = default)"},
		{"parallelism", o.Parallelism > 1024, o.Parallelism, "must be <= 1024"},
		{"retries", o.Retries < 0, o.Retries, "must be >= 0"},
		{"retries", o.Retries > 100, o.Retries, "must be <= 100"},
		{"max_body_bytes", o.MaxBodyBytes < 0, o.MaxBodyBytes, "must be >= 0 (0 = default)"},
		{"timeout", o.Timeout < 0, o.Timeout, "must be >= 0 (0 = default)"},
		{"max_redirects", o.MaxRedirects < -1, o.MaxRedirects, "must be >= -1 (-1 = follow none, 0 = default)"},
		{"retry_backoff", o.RetryBackoff < 0, o.RetryBackoff, "must be >= 0 (0 = default)"},
		{"max_retry_wait", o.MaxRetryWait < 0, o.MaxRetryWait, "must be >= 0 (0 = default)"},
	} {
		if b.bad {
			return fieldErr(b.field, "is %v, %s", b.val, b.want)
		}
	}
	if strings.ContainsAny(o.UserAgent, "\r\n\x00") {
		return fieldErr("user_agent", "contains a control character")
	}
	return nil
}

// checkProxy accepts an absolute http, https or socks5 proxy URL.
func checkProxy(p string) error {
	u, err := url.Parse(p)
	if err != nil {
		return fmt.Errorf("%q is not a URL", redactURL(p))
	}
	switch u.Scheme {
	case "http", "https", "socks5", "socks5h":
	default:
		return fmt.Errorf("%q: want http://, https:// or socks5://host:port", redactURL(p))
	}
	if u.Host == "" {
		return fmt.Errorf("%q has no host", redactURL(p))
	}
	return nil
}

// redactURL hides the password of a URL's user info.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	if pw, ok := u.User.Password(); ok && pw != "" {
		return strings.Replace(s, ":"+pw+"@", ":***@", 1)
	}
	return s
}

// OptionsError names the bad field of Options.
type OptionsError struct {
	Field string
	Msg   string
}

func (e *OptionsError) Error() string { return e.Field + ": " + e.Msg }

func fieldErr(field, format string, args ...any) error {
	return &OptionsError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// checkDomain accepts a host name or IP, optionally with a port.
func checkDomain(d string) error {
	if d == "" {
		return fmt.Errorf("is empty")
	}
	if strings.ContainsAny(d, "/?#@ \t\r\n") || strings.Contains(d, "://") {
		return fmt.Errorf("is not a host name (want e.g. example.com or example.com:8080)")
	}
	host := d
	if h, _, err := net.SplitHostPort(d); err == nil {
		host = h
	}
	if strings.Trim(host, ".") == "" {
		return fmt.Errorf("is not a host name (want e.g. example.com or example.com:8080)")
	}
	return nil
}
