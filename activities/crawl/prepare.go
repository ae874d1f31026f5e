package crawl

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/batoncrawl/baton/roles"
)

// prepared is a request made ready to be sent (Engine.prepare): its
// options compiled, its host checked, its transport chosen.
type prepared struct {
	opts          Options
	b             *built
	agent         string
	domain        string
	typed         bool
	base          func() http.RoundTripper
	rest          http.RoundTripper // the transport of every request but a typed URL's first
	checkRedirect func(*http.Request) error
}

// hop is the prepared request of a redirect of p to u: the same job, its
// user agent and headers, never typed.
func (p prepared) hop(u *url.URL) prepared {
	b := *p.b
	b.url = u
	h := p
	h.b, h.domain, h.typed = &b, hostKey(u), false
	h.base = archived(func() http.RoundTripper { return p.rest }, p.opts)
	return h
}

// prepare readies req, found at depth, as fetch sends it; errText says
// why it cannot be sent.
func (e *Engine) prepare(ctx context.Context, req roles.Request, auth Auth, depth int, opts Options, sitemap bool) (prepared, string) {
	if opts.compiled == nil {
		var err error
		if opts, err = opts.Compile(); err != nil {
			return prepared{}, "invalid options: " + err.Error()
		}
	}
	if depth < 0 {
		return prepared{}, fmt.Sprintf("invalid depth %d", depth)
	}
	b, err := buildRequest(req, auth)
	if err != nil {
		return prepared{}, err.Error()
	}
	// Under DenyPrivate every request is guarded — redirects, robots.txt
	// and its redirects included — except the first request of a seed or
	// sitemap the user typed as an IP address (typed): its redirects are
	// guarded too. A typed host name is guarded: its DNS answers may point
	// anywhere. The operator's Policy has no exception.
	if e.Policy.DenyPrivate {
		opts.DenyPrivate = true
	}
	guard := opts.DenyPrivate
	typed := guard && !e.Policy.DenyPrivate && (depth == 0 || sitemap) && opts.isTyped(req.URL) && isIPLiteral(b.url.Hostname())
	if guard || e.Policy.Active() {
		if err := e.checkHost(ctx, b.url.Hostname(), guard && !typed); err != nil {
			return prepared{}, err.Error()
		}
	}
	if opts.Proxy != "" {
		if err := e.checkProxy(ctx, opts.Proxy, guard); err != nil {
			return prepared{}, err.Error()
		}
	}
	for k, v := range opts.Headers {
		if b.header.Get(k) == "" {
			b.header.Set(k, v)
		}
	}
	agent := b.header.Get("User-Agent")
	if agent == "" {
		agent = opts.UserAgent
	}
	tr, err := e.transport(guard, opts.Proxy)
	if err != nil {
		return prepared{}, err.Error()
	}
	p := prepared{opts: opts, b: b, agent: agent, domain: hostKey(b.url), typed: typed, rest: tr}
	// base returns the transport of one request chain (an attempt, or a
	// robots.txt fetch): a typed URL's first request goes unguarded (a
	// connection pool of its own), the rest guarded. Through a proxy,
	// host names are checked instead (checkRedirect).
	p.base = func() http.RoundTripper {
		if typed && opts.Proxy == "" {
			return &firstHop{first: e.plain, rest: tr}
		}
		return tr
	}
	p.base = archived(p.base, opts)
	if (guard || e.Policy.Active()) && opts.Proxy != "" {
		// The proxy dials the targets: the addresses it dials cannot be
		// seen, so the host names are checked, on each redirect.
		p.checkRedirect = func(r *http.Request) error { return e.checkHost(r.Context(), r.URL.Hostname(), guard) }
	}
	return p, ""
}

// robotsRedirect returns the check of a redirect of p: next (if any),
// then the robots.txt of the redirect's origin (from the Engine's cache,
// the crawl's RobotsStore, or fetched as a page's), which must allow it.
func (e *Engine) robotsRedirect(p prepared, next func(*http.Request) error) func(*http.Request) error {
	return func(r *http.Request) error {
		if next != nil {
			if err := next(r); err != nil {
				return err
			}
		}
		rules, err := e.robotsRules(r.Context(), p.hop(r.URL))
		if err != nil {
			return &robotsRedirectError{to: redactedURL(r.URL), why: "waiting for its robots.txt: " + err.Error()}
		}
		if ok, _ := rules.allowed(robotsPath(r.URL), p.agent); !ok {
			return &robotsRedirectError{to: redactedURL(r.URL), why: errRobots{status: rules.status}.Error()}
		}
		return nil
	}
}

// robotsRedirectError refuses a redirect whose target robots.txt
// disallows (or whose robots.txt could not be had): the target is not
// fetched.
type robotsRedirectError struct{ to, why string }

func (e *robotsRedirectError) Error() string { return "redirect to " + e.to + " " + e.why }

// redactedURL is u without its user:password@.
func redactedURL(u *url.URL) string { return u.Redacted() }

// checkProxy refuses a job's proxy whose host the Policy (or the job's
// guard, proxyGuard) refuses, before anything is sent through it; its
// transport checks the address it dials again.
func (e *Engine) checkProxy(ctx context.Context, proxy string, guard bool) error {
	u, err := url.Parse(proxy)
	if err != nil {
		return fmt.Errorf("proxy: %v", err)
	}
	if err := e.checkHost(ctx, u.Hostname(), proxyGuard(guard, u)); err != nil {
		if pe, ok := err.(*privateAddrError); ok {
			pe.proxy = proxyName(u)
		}
		return err
	}
	return nil
}

// robotsRules returns the robots.txt rules of a prepared request's
// origin: from the Engine's cache, else from the crawl's RobotsStore,
// else fetched (once for all the concurrent callers, and kept).
func (e *Engine) robotsRules(ctx context.Context, p prepared) (*robotsRules, error) {
	origin := robotsOrigin(p)
	key := origin
	if p.opts.Proxy != "" {
		key += " via " + p.opts.Proxy
	}
	switch {
	case p.typed:
		key += " typed"
	case p.opts.DenyPrivate:
		key += " guarded"
	}
	return e.robots.get(ctx, robotsKey(key, p.opts.Robots), func(c context.Context) (*robotsRules, func()) {
		return robotsOf(c, p.opts.Robots, origin, p.agent, func(c context.Context) RobotsFile {
			return fetchRobots(c, &http.Client{Transport: p.base()}, origin, p.agent, p.opts.Headers, RobotsTimeout(p.opts), p.checkRedirect)
		})
	})
}

// WarmRobots starts getting the robots.txt rules that a Fetch of req at
// depth with opts will obey (as that Fetch does: from the Engine's cache,
// the crawl's RobotsStore, or fetched), without waiting for them: a
// Fetch of the same origin that comes meanwhile waits for this one
// instead of fetching robots.txt again. A request that could not be sent
// (invalid, or its host refused) warms nothing; neither does
// opts.IgnoreRobots. It returns the origin warmed (scheme://host[:port],
// as the crawl's RobotsStore knows it), "" when none. Safe for concurrent
// use.
func (e *Engine) WarmRobots(ctx context.Context, req roles.Request, auth Auth, depth int, opts Options) string {
	pr, errText := e.prepare(ctx, req, auth, depth, opts, false)
	if errText != "" || pr.opts.IgnoreRobots {
		return ""
	}
	go func() { _, _ = e.robotsRules(context.WithoutCancel(ctx), pr) }()
	return robotsOrigin(pr)
}

// robotsOrigin is the origin of a prepared request's robots.txt.
func robotsOrigin(p prepared) string { return strings.ToLower(p.b.url.Scheme) + "://" + p.domain }
