package crawl

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// pathLog is a site that records the paths it was asked for.
type pathLog struct {
	*httptest.Server
	mu   sync.Mutex
	seen []string
}

func (l *pathLog) asked(path string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Contains(l.seen, path)
}

// robotsSite serves robots.txt disallowing /forbidden, and redirects
// /to-* paths where redirects says.
func robotsSite(t *testing.T, addr string, redirects map[string]string) *pathLog {
	l := &pathLog{}
	l.Server = serveOn(t, addr, func(w http.ResponseWriter, r *http.Request) {
		l.mu.Lock()
		l.seen = append(l.seen, r.URL.Path)
		l.mu.Unlock()
		if r.URL.Path == "/robots.txt" {
			fmt.Fprint(w, "User-agent: *\nDisallow: /forbidden\n")
			return
		}
		if to, ok := redirects[r.URL.Path]; ok {
			http.Redirect(w, r, to, http.StatusFound)
			return
		}
		fmt.Fprintf(w, "<title>%s</title>", r.URL.Path)
	})
	return l
}

// A redirect's target is asked of its own host's robots.txt before it
// is fetched: a redirect to a disallowed path, on the same host or
// another, fails the page with the reason and the target is never
// requested; an allowed target is fetched.
func TestRobotsForEveryRedirectHop(t *testing.T) {
	t.Parallel()
	other := robotsSite(t, "127.0.0.2:0", nil)
	site := robotsSite(t, "127.0.0.1:0", map[string]string{
		"/a":       "/forbidden",
		"/chain":   "/ok-hop",
		"/ok-hop":  "/forbidden",
		"/away":    other.URL + "/forbidden",
		"/fine":    other.URL + "/allowed",
		"/sitemap": "/forbidden",
	})
	e := NewEngine()
	o := testOptions()
	ctx := context.Background()
	for _, path := range []string{"/a", "/chain"} {
		p := e.Fetch(ctx, get(site.URL+path), Auth{}, 0, o)
		require.Equal(t, "redirect to "+site.URL+"/forbidden disallowed by robots.txt", p.Error, "%+v", p)
		require.False(t, p.Disallowed, "the page asked for was allowed: it is recorded, failed")
	}
	p := e.FetchSitemap(ctx, get(site.URL+"/sitemap"), Auth{}, o)
	require.Equal(t, "redirect to "+site.URL+"/forbidden disallowed by robots.txt", p.Error, "%+v", p)
	require.False(t, site.asked("/forbidden"), "a robots.txt-disallowed redirect target was fetched")

	p = e.Fetch(ctx, get(site.URL+"/away"), Auth{}, 0, o)
	require.Equal(t, "redirect to "+other.URL+"/forbidden disallowed by robots.txt", p.Error, "%+v", p)
	require.True(t, other.asked("/robots.txt"))
	require.False(t, other.asked("/forbidden"), "a robots.txt-disallowed redirect target on another host was fetched")

	p = e.Fetch(ctx, get(site.URL+"/fine"), Auth{}, 0, o)
	require.True(t, p.OK() && p.FinalURL == other.URL+"/allowed", "%+v", p)

	// IgnoreRobots asks no robots.txt, for no hop.
	o.IgnoreRobots = true
	p = e.Fetch(ctx, get(site.URL+"/a"), Auth{}, 0, o)
	require.True(t, p.OK(), "%+v", p)
}
