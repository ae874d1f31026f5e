// Package crawl is Baton's fetch engine: it fetches one page with Colly,
// honouring the request's method, URL, query parameters, headers, body,
// cookies and authorization, extracts named fields with CSS selectors and
// the links to follow, and bounds what a hostile site can cost: robots.txt
// (Crawl-delay included), per-domain delay and parallelism, retries with
// backoff honouring Retry-After, body size, time and redirects.
//
// An Engine is shared by all the activities of a worker process; the
// per-domain limits and the robots.txt cache it holds apply across them.
package crawl

import (
	"fmt"
	"net"
	"sort"
	"strings"
	"time"

	"github.com/andybalholm/cascadia"
)

// DefaultUserAgent is the User-Agent of DefaultOptions.
const DefaultUserAgent = "baton/0.1 (+https://github.com/batoncrawl/baton)"

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
	// Selectors maps a field name to a CSS selector; the field's value is
	// the trimmed text of every match, in document order.
	Selectors map[string]string `json:"selectors,omitempty"`
	// Follow collects the page's links for following.
	Follow bool `json:"follow"`
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
	// DenyPrivate refuses private, loopback and link-local addresses for
	// followed links (depth > 0), redirects included; seeds are allowed.
	DenyPrivate bool `json:"deny_private"`

	// RetryBackoff is the first retry's wait; it doubles on each retry.
	RetryBackoff time.Duration `json:"retry_backoff,omitempty"`
	// MaxRetryWait caps one wait between retries.
	MaxRetryWait time.Duration `json:"max_retry_wait,omitempty"`
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
func (o Options) Validate() error {
	names := make([]string, 0, len(o.Selectors))
	for name := range o.Selectors {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		sel := o.Selectors[name]
		field := fmt.Sprintf("selectors[%q]", name)
		switch {
		case strings.TrimSpace(name) == "":
			return fieldErr(field, "empty field name")
		case strings.TrimSpace(sel) == "":
			return fieldErr(field, "empty CSS selector")
		}
		if _, err := cascadia.Compile(sel); err != nil {
			return fieldErr(field, "invalid CSS selector %q: %v", sel, err)
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
