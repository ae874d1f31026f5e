package crawl

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// robotsChain serves /robots.txt as hops redirects (/r1, /r2, ...) ending
// in rules that disallow /private/; it counts the redirects served.
func robotsChain(t *testing.T, hops int, rules string) (string, *atomic.Int32) {
	t.Helper()
	var served atomic.Int32
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		n := 0
		if r.URL.Path != "/robots.txt" {
			if _, err := fmt.Sscanf(r.URL.Path, "/r%d", &n); err != nil {
				fmt.Fprint(w, "<title>page</title>")
				return
			}
		}
		if n < hops {
			served.Add(1)
			http.Redirect(w, r, fmt.Sprintf("/r%d", n+1), http.StatusMovedPermanently)
			return
		}
		fmt.Fprint(w, rules)
	})
	return srv.URL, &served
}

func TestRobotsRedirects(t *testing.T) {
	t.Parallel()
	const rules = "User-agent: *\nDisallow: /private/\n"
	for _, tt := range []struct {
		hops     int
		disallow bool
	}{
		{0, true}, {1, true}, {robotsMaxRedirects, true},
		// More than five: robots.txt is unavailable (RFC 9309 2.3.1.2), which allows all.
		{robotsMaxRedirects + 1, false}, {50, false},
	} {
		t.Run(fmt.Sprintf("%d redirects", tt.hops), func(t *testing.T) {
			t.Parallel()
			base, served := robotsChain(t, tt.hops, rules)
			p := NewEngine().Fetch(context.Background(), get(base+"/private/x"), Auth{}, 0, testOptions())
			if tt.disallow {
				require.True(t, p.Disallowed, "the target's rules apply: %+v", p)
				require.Equal(t, "disallowed by robots.txt", p.Error)
				require.Equal(t, int32(tt.hops), served.Load())
			} else {
				require.False(t, p.Disallowed, "%+v", p)
				require.Empty(t, p.Error)
				require.Equal(t, int32(robotsMaxRedirects+1), served.Load(), "the sixth redirect is not followed")
			}
		})
	}
}

func TestRobotsRedirectToAnotherHost(t *testing.T) {
	t.Parallel()
	// The other host's rules apply to the original host (RFC 9309: "in the
	// context of the initial authority"): example.com/robots.txt → www.
	other := serve(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			fmt.Fprint(w, "User-agent: *\nDisallow: /private/\nCrawl-delay: 0.05\n")
			return
		}
		t.Errorf("the other host got %s", r.URL)
	})
	var pages atomic.Int32
	origin := serve(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.Redirect(w, r, other.URL+"/robots.txt", http.StatusFound)
			return
		}
		pages.Add(1)
		fmt.Fprint(w, "<title>ok</title>")
	})
	e := NewEngine()
	p := e.Fetch(context.Background(), get(origin.URL+"/private/x"), Auth{}, 0, testOptions())
	require.True(t, p.Disallowed, "%+v", p)
	p = e.Fetch(context.Background(), get(origin.URL+"/public"), Auth{}, 0, testOptions())
	require.Empty(t, p.Error)
	require.Equal(t, "ok", p.Title)
	require.Equal(t, int32(1), pages.Load())
}

func TestRobotsRedirectLoop(t *testing.T) {
	t.Parallel()
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.Redirect(w, r, "/robots.txt", http.StatusFound)
			return
		}
		fmt.Fprint(w, "<title>ok</title>")
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p := NewEngine().Fetch(ctx, get(srv.URL+"/x"), Auth{}, 0, testOptions())
	require.Empty(t, p.Error, "a robots.txt that redirects to itself is unavailable: allow all")
	require.Equal(t, "ok", p.Title)
}

func TestRobotsCrawlDelayBounded(t *testing.T) {
	t.Parallel()
	now := time.Now()
	for body, want := range map[string]time.Duration{
		"User-agent: *\nCrawl-delay: 2\n":      2 * time.Second,
		"User-agent: *\nCrawl-delay: 0.5\n":    500 * time.Millisecond,
		"User-agent: *\nCrawl-delay: 86400\n":  robotsMaxCrawlDelay,
		"User-agent: *\nCrawl-delay: 1e300\n":  robotsMaxCrawlDelay, // overflows time.Duration
		"User-agent: *\nCrawl-delay: -3\n":     0,                   // invalid: ignored by the parser
		"User-agent: *\nCrawl-delay: banana\n": 0,
	} {
		ok, d := parseRobots(200, []byte(body), now).allowed("/", "baton")
		require.True(t, ok, body)
		require.Equal(t, want, d, body)
	}
}

// FuzzRobots parses any robots.txt body and asks about any path and agent:
// the answer comes (no panic, no hang), the Crawl-delay is within
// [0, robotsMaxCrawlDelay], the answer is the same when asked again, a
// body without a Disallow line allows everything, and the status decides
// as documented (4xx allows all, 5xx disallows all).
func FuzzRobots(f *testing.F) {
	for _, s := range []string{
		"User-agent: *\nDisallow: /private/\n\nUser-agent: baton\nDisallow: /nobaton/\nCrawl-delay: 1.5\n",
		"User-agent: *\nDisallow: /\nAllow: /public$\nAllow: /*.css$\n",
		"user-agent: BATON\ndisallow: /a*b*c*d*e*f*g*h*\n", "Sitemap: http://x/s.xml\nHost: x\n",
		"Disallow: /before-agent\nUser-agent: *\n", "User-agent: *\nCrawl-delay: 1e300\n",
		"\xef\xbb\xbfUser-agent: *\r\nDisallow: /%7Euser\r\n", "<html><body>not robots</body></html>", "",
		"User-agent: *\nDisallow: /\x00\n# comment\nDisallow:\n",
	} {
		f.Add([]byte(s), "/private/x?q=1", "baton/0.1")
	}
	f.Add([]byte("User-agent: *\nDisallow: /\n"), "", "")
	f.Fuzz(func(t *testing.T, body []byte, path, agent string) {
		now := time.Now()
		r := parseRobots(200, body, now)
		ok, d := r.allowed(path, agent)
		require.GreaterOrEqual(t, d, time.Duration(0))
		require.LessOrEqual(t, d, robotsMaxCrawlDelay)
		ok2, d2 := parseRobots(200, body, now).allowed(path, agent)
		require.Equal(t, ok, ok2, "the same answer twice")
		require.Equal(t, d, d2)
		if !strings.Contains(strings.ToLower(string(body)), "disallow") {
			require.True(t, ok, "no Disallow line, yet %q is refused", path)
		}
		require.False(t, r.expires.Before(now))
		ok4, _ := parseRobots(404, body, now).allowed(path, agent)
		require.True(t, ok4, "4xx allows all")
		ok5, _ := parseRobots(503, body, now).allowed(path, agent)
		require.False(t, ok5, "5xx disallows all")
	})
}
