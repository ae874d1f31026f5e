package crawl

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
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
)

type robotsRules struct {
	data    *robotstxt.RobotsData // nil: allow all
	status  int                   // HTTP status of robots.txt, 0 if unreachable
	expires time.Time
}

// allowed reports whether the agent may fetch path (with query), and the
// Crawl-delay of its group.
func (r *robotsRules) allowed(pathQuery, agent string) (bool, time.Duration) {
	if r.data == nil {
		return true, 0
	}
	return r.data.TestAgent(pathQuery, agent), r.data.FindGroup(agent).CrawlDelay
}

type robotsEntry struct {
	ready chan struct{}
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
// the others.
func (c *robotsCache) get(ctx context.Context, origin string, fetch func(context.Context) *robotsRules) (*robotsRules, error) {
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
	if e == nil {
		if len(c.entries) >= robotsMaxEntries {
			c.pruneLocked()
		}
		e = &robotsEntry{ready: make(chan struct{})}
		c.entries[origin] = e
		fctx := context.WithoutCancel(ctx)
		go func() {
			e.rules = fetch(fctx)
			close(e.ready)
		}()
	}
	c.mu.Unlock()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-e.ready:
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

// fetchRobots GETs origin/robots.txt with client and parses it: a 2xx body
// is parsed (an unparsable one allows all), 4xx allows all, 5xx disallows
// all for robotsFailTTL; an unreachable robots.txt allows all for
// robotsFailTTL (the page's own fetch reports why the site is unreachable).
// The job's headers go with it (the robots.txt cache is shared by the jobs
// of a worker: the first job's headers fetch it).
func fetchRobots(ctx context.Context, client *http.Client, origin, agent string, headers map[string]string, timeout time.Duration) *robotsRules {
	now := time.Now()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, origin+"/robots.txt", nil)
	if err != nil {
		return &robotsRules{expires: now.Add(robotsFailTTL)}
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("User-Agent", agent)
	resp, err := client.Do(req)
	if err != nil {
		return &robotsRules{expires: now.Add(robotsFailTTL)}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, robotsMaxBytes))
	if err != nil && resp.StatusCode < 300 {
		return &robotsRules{status: resp.StatusCode, expires: now.Add(robotsFailTTL)}
	}
	r := &robotsRules{status: resp.StatusCode, expires: now.Add(robotsTTL)}
	switch {
	case resp.StatusCode >= 500:
		r.expires = now.Add(robotsFailTTL)
	case resp.StatusCode < 200 || resp.StatusCode >= 300:
		if resp.StatusCode < 400 {
			r.expires = now.Add(robotsFailTTL)
		}
		return r
	}
	data, err := robotstxt.FromStatusAndBytes(resp.StatusCode, body)
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
