package crawl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/temoto/robotstxt"
)

// Colly can obey robots.txt, but it ignores Crawl-delay, treats a robots.txt
// answered with 5xx as "allow all", and fetches it without a context; the
// Engine therefore keeps its own cache, parsed with temoto/robotstxt (the
// parser Colly uses).

const (
	robotsTTL        = time.Hour
	robotsFailTTL    = time.Minute // 5xx or unreachable robots.txt
	robotsMaxBytes   = 512 << 10
	robotsMaxEntries = 10000
	// robotsMaxRedirects is RFC 9309's "at least five consecutive
	// redirects".
	robotsMaxRedirects = 5
	// robotsMaxCrawlDelay bounds a Crawl-delay, so that a robots.txt cannot
	// stall a Runner's batch for hours with one line.
	robotsMaxCrawlDelay = time.Minute
)

type robotsRules struct {
	data    *robotstxt.RobotsData // nil: allow all
	status  int                   // HTTP status of robots.txt, 0 if unreachable
	expires time.Time
}

// allowed reports whether the agent may fetch path (with query), and the
// Crawl-delay of its group, at most robotsMaxCrawlDelay.
func (r *robotsRules) allowed(pathQuery, agent string) (bool, time.Duration) {
	if r.data == nil {
		return true, 0
	}
	d := r.data.FindGroup(agent).CrawlDelay
	if d < 0 || d > robotsMaxCrawlDelay { // float seconds beyond int64 nanoseconds convert to anything
		d = robotsMaxCrawlDelay
	}
	return r.data.TestAgent(pathQuery, agent), d
}

type robotsEntry struct {
	ready chan struct{} // closed once rules is set
	kept  chan struct{} // closed once the rules are kept (robotsOf's keep), after ready
	rules *robotsRules
}

type robotsCache struct {
	mu      sync.Mutex
	entries map[string]*robotsEntry // key: scheme://host
}

func newRobotsCache() *robotsCache { return &robotsCache{entries: map[string]*robotsEntry{}} }

// get returns the rules of origin, fetching robots.txt once for all the
// concurrent callers. The fetch runs on its own, bounded by its timeout, so
// that a caller whose context ends stops waiting at once without failing
// the others. fetch returns the rules and how to keep them (nil: nothing
// to keep): the callers that came while it ran have the rules as soon as
// they are read, the one that started it only once they are kept too (a
// robots.txt kept in the crawl's RobotsStore by the time its Fetch
// returns; a Fetch that waited for a warm-up, WarmRobots, does not wait
// for the store's write as well).
func (c *robotsCache) get(ctx context.Context, origin string, fetch func(context.Context) (*robotsRules, func())) (*robotsRules, error) {
	c.mu.Lock()
	e := c.entries[origin]
	if e != nil {
		select {
		case <-e.ready:
			if time.Now().After(e.rules.expires) {
				delete(c.entries, origin)
				e = nil
			}
		default:
		}
	}
	started := e == nil // this call fetches
	if started {
		if len(c.entries) >= robotsMaxEntries {
			c.pruneLocked()
		}
		e = &robotsEntry{ready: make(chan struct{}), kept: make(chan struct{})}
		c.entries[origin] = e
		fctx := context.WithoutCancel(ctx)
		go func() {
			defer close(e.kept)
			rules, keep := fetch(fctx)
			e.rules = rules
			close(e.ready)
			if keep != nil {
				keep()
			}
		}()
	}
	c.mu.Unlock()
	wait := e.ready
	if started {
		wait = e.kept
	}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-wait:
		return e.rules, nil
	}
}

func (c *robotsCache) pruneLocked() {
	now := time.Now()
	for k, e := range c.entries {
		select {
		case <-e.ready:
			if now.After(e.rules.expires) || len(c.entries) >= robotsMaxEntries {
				delete(c.entries, k)
			}
		default:
		}
	}
}

// fetchRobots GETs origin/robots.txt with client and returns it as
// fetched, with how long it stays fresh (RobotsFile.rules reads it).
// Redirects are followed as RFC 9309 (section 2.3.1.2) says:
// up to robotsMaxRedirects, to another host too (example.com/robots.txt
// commonly redirects to www.example.com/robots.txt), and the rules found
// there apply to origin; more redirects make robots.txt unavailable,
// which allows all (as a 4xx does). An unreachable robots.txt allows all
// for robotsFailTTL (the page's own fetch reports why the site is
// unreachable). The job's headers go with it (the robots.txt cache is
// shared by the jobs of a worker: the first job's headers fetch it), but
// not to another host: a redirect that leaves origin's host drops them
// (see leftHost). checkRedirect, when set, checks each redirect's request
// (DenyPrivate through a proxy); a refused redirect makes robots.txt
// unreachable.
func fetchRobots(ctx context.Context, client *http.Client, origin, agent string, headers map[string]string, timeout time.Duration, checkRedirect func(*http.Request) error) RobotsFile {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	unreachable := RobotsFile{TTL: robotsFailTTL} // status 0: allow all
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, origin+"/robots.txt", nil)
	if err != nil {
		return unreachable
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("User-Agent", agent)
	c := *client
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) > robotsMaxRedirects {
			return errRobotsRedirects
		}
		if checkRedirect != nil {
			if err := checkRedirect(req); err != nil {
				return err
			}
		}
		if leftHost(req, via) {
			for k := range headers {
				if !strings.EqualFold(k, "User-Agent") {
					req.Header.Del(k)
				}
			}
		}
		return nil
	}
	resp, err := c.Do(req)
	if errors.Is(err, errRobotsRedirects) {
		return RobotsFile{TTL: robotsTTL} // unavailable: allow all
	}
	if err != nil {
		return unreachable
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, robotsMaxBytes))
	if err != nil && resp.StatusCode < 300 {
		return unreachable
	}
	f := RobotsFile{Status: resp.StatusCode, Body: body, TTL: robotsTTL}
	if s := resp.StatusCode; s < 200 || s >= 300 && s < 400 || s >= 500 {
		f.TTL = robotsFailTTL // 5xx (disallows all), and what was not followed
	}
	return f
}

var errRobotsRedirects = fmt.Errorf("robots.txt: more than %d redirects", robotsMaxRedirects)

// parseRobots reads a robots.txt answered with status at now: a 2xx body
// is parsed (an unparsable one allows all), 4xx allows all, 5xx disallows
// all for robotsFailTTL; any other status (a 3xx that was not followed)
// allows all for robotsFailTTL.
func parseRobots(status int, body []byte, now time.Time) *robotsRules {
	r := &robotsRules{status: status, expires: now.Add(robotsTTL)}
	switch {
	case status >= 500 && status < 600:
		r.expires = now.Add(robotsFailTTL)
	case status < 200 || status >= 300:
		if status < 400 || status >= 500 {
			r.expires = now.Add(robotsFailTTL)
		}
		return r
	}
	data, err := robotstxt.FromStatusAndBytes(status, body)
	if err != nil {
		return r
	}
	r.data = data
	return r
}

// errRobots is the error of a page robots.txt disallows.
type errRobots struct{ status int }

func (e errRobots) Error() string {
	if e.status >= 500 {
		return fmt.Sprintf("disallowed by robots.txt (robots.txt answered HTTP %d)", e.status)
	}
	return "disallowed by robots.txt"
}

func robotsPath(u *url.URL) string {
	p := u.EscapedPath()
	if p == "" {
		p = "/"
	}
	if u.RawQuery != "" {
		p += "?" + u.RawQuery
	}
	return p
}
