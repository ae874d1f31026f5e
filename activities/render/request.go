package render

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Wait modes: when a page counts as rendered.
const (
	WaitLoad        = "load"        // the load event
	WaitNetworkIdle = "networkidle" // after load, no request in flight for IdleTime
	WaitSelector    = "selector:"   // prefix: an element matches the CSS selector that follows
)

// IdleTime is how long a page has no request in flight before it counts
// as settled under WaitNetworkIdle.
const IdleTime = 500 * time.Millisecond

// Resource types a page may load unless its Request allows them.
var blockedByDefault = []string{"Image", "Media", "Font"}

// ResourceTypes are the resource types Request.Resources may name (lower
// case, as the flags take them), with the DevTools protocol's names.
var ResourceTypes = map[string]string{"image": "Image", "media": "Media", "font": "Font", "stylesheet": "Stylesheet"}

// Policy judges a request the browser is about to make: the document, a
// redirect, a subresource, an XHR or fetch, a worker's script. An error
// refuses it, and says why. resourceType is the DevTools protocol's
// (Document, Script, XHR, Fetch, Image, ...).
type Policy func(ctx context.Context, u *url.URL, resourceType string) error

// Guard is a policy on URLs alone (a crawl engine's private-address and
// operator rules).
type Guard interface {
	Allow(ctx context.Context, u *url.URL) error
}

// PolicyOf returns the Policy of g: every resource type judged alike.
func PolicyOf(g Guard) Policy {
	return func(ctx context.Context, u *url.URL, _ string) error { return g.Allow(ctx, u) }
}

// Request is one page to render.
type Request struct {
	URL string
	// Wait is WaitLoad, WaitNetworkIdle or WaitSelector+CSS; empty:
	// WaitNetworkIdle.
	Wait string
	// Timeout is the page's budget (navigation and waiting); zero: the
	// Pool's Config.Timeout.
	Timeout time.Duration
	// Resources are the resource types ("image", "media", "font") the
	// page may load; the others of them are refused before they leave
	// the browser.
	Resources []string
	// UserAgent replaces the browser's; empty: the browser's.
	UserAgent string
	// Headers are added to the requests to the document's host (its
	// scheme, host and port) only.
	Headers map[string]string
	// Cookie is a Cookie header ("a=1; b=2") set for the document's URL.
	Cookie string
	// Screenshot asks for a PNG of the viewport in Result.Screenshot.
	Screenshot bool
	// Policy, when set, judges every request of the page before it is
	// sent; a refused document fails the render.
	Policy Policy
	// Dial, when set, dials every connection of the page: the browser
	// sends all its requests (loopback, https and WebSocket included)
	// through a proxy of its tab that dials with it, so that a dialler
	// that checks the address it connects to (or that goes through the
	// job's proxy) covers all the page's traffic. Nil: a plain dialler.
	Dial DialFunc
	// Actions run in order once the page has settled, before its DOM is
	// read (see Action).
	Actions []Action
	// Until, under WaitNetworkIdle, ends the wait early, once the page
	// has loaded and every one of these elements is there: a CSS selector
	// matching an element with text, or, with Attr, with that attribute.
	// (A selector the browser cannot parse is never there.)
	Until []Want
}

// Want is an element Request.Until waits for.
type Want struct {
	CSS  string
	Attr string
}

// Result is what a page became.
type Result struct {
	URL      string      // the URL asked
	FinalURL string      // the document's URL once rendered (redirects, history)
	Status   int         // the document's HTTP status
	Header   http.Header // the document's response headers
	HTML     string      // the rendered DOM (document.documentElement.outerHTML)
	Title    string
	// Screenshot is a PNG, when asked.
	Screenshot []byte
	// Scripts are the JSON values of the page's eval actions, by name.
	Scripts  map[string]json.RawMessage
	Refused  int // requests the policy refused
	Blocked  int // requests of blocked resource types
	Crashes  int // tabs that crashed rendering it
	Duration time.Duration
}

// ErrNotSettled is wrapped by the error of a page that did not reach its
// wait condition within its timeout.
var ErrNotSettled = errors.New("page did not settle")

// RefusedError is the error of a page whose document the policy refused.
type RefusedError struct {
	URL    string
	Reason error
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("render: %s refused: %v", e.URL, e.Reason)
}
func (e *RefusedError) Unwrap() error { return e.Reason }

// CrashError is the error of a render whose tab (or browser, when
// Browser) crashed.
type CrashError struct {
	Browser bool
	Err     error
}

func (e *CrashError) Error() string {
	if e.Browser {
		return fmt.Sprintf("browser lost: %v", e.Err)
	}
	return "tab crashed"
}
func (e *CrashError) Unwrap() error { return e.Err }

// ParseWait checks a wait mode.
func ParseWait(w string) error {
	switch {
	case w == "", w == WaitLoad, w == WaitNetworkIdle:
		return nil
	case strings.HasPrefix(w, WaitSelector):
		if strings.TrimSpace(strings.TrimPrefix(w, WaitSelector)) == "" {
			return fmt.Errorf("wait %q: the selector is empty", w)
		}
		return nil
	}
	return fmt.Errorf("wait %q: want load, networkidle or selector:CSS", w)
}

// ParseResources checks resource type names (see ResourceTypes).
func ParseResources(names []string) error {
	for _, n := range names {
		if _, ok := ResourceTypes[strings.ToLower(strings.TrimSpace(n))]; !ok {
			return fmt.Errorf("resource type %q: want image, media, font or stylesheet", n)
		}
	}
	return nil
}

func (r Request) withDefaults(c Config) (Request, error) {
	u, err := url.Parse(r.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return r, fmt.Errorf("render: %q is not an http(s) URL", r.URL)
	}
	if err := ParseWait(r.Wait); err != nil {
		return r, fmt.Errorf("render: %w", err)
	}
	if err := ParseResources(r.Resources); err != nil {
		return r, fmt.Errorf("render: %w", err)
	}
	for _, a := range r.Actions {
		if err := a.Validate(); err != nil {
			return r, fmt.Errorf("render: %w", err)
		}
	}
	if r.Wait == "" {
		r.Wait = WaitNetworkIdle
	}
	if r.Timeout <= 0 {
		r.Timeout = c.Timeout
	}
	return r, nil
}

// blocks reports whether r refuses resources of type rt.
func (r Request) blocks(rt string) bool {
	if !slices.Contains(blockedByDefault, rt) {
		return false
	}
	for _, n := range r.Resources {
		if ResourceTypes[strings.ToLower(strings.TrimSpace(n))] == rt {
			return false
		}
	}
	return true
}
