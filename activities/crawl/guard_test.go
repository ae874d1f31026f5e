package crawl

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// testNet gives the DenyPrivate tests "public" addresses to serve hostile
// sites on: every address a test may reach is loopback, which DenyPrivate
// refuses. As root, real public addresses are added to lo for the test
// (192.88.99.0/24, the deprecated 6to4 relay anycast prefix, RFC 7526)
// and the engine judges them with the real isPrivate; otherwise the
// loopback addresses 127.0.0.2 and 127.0.0.3 stand for public ones and
// the engine is told so (Policy.private).
type testNet struct {
	public []netip.Addr
	fake   bool
}

var testAddrs atomic.Int32

func newTestNet(t *testing.T, n int) *testNet {
	t.Helper()
	tn := &testNet{}
	ip, err := exec.LookPath("ip")
	if os.Geteuid() == 0 && err == nil {
		base := 10 + (os.Getpid()%50)*4 // processes running side by side pick apart
		for len(tn.public) < n {
			k := int(testAddrs.Add(1))
			if k > 40 {
				break
			}
			a := netip.AddrFrom4([4]byte{192, 88, 99, byte(base + k)})
			out, err := exec.Command(ip, "addr", "add", a.String()+"/32", "dev", "lo").CombinedOutput()
			if err != nil {
				t.Logf("ip addr add %s: %v: %s", a, err, out)
				continue
			}
			t.Cleanup(func() { _ = exec.Command(ip, "addr", "del", a.String()+"/32", "dev", "lo").Run() })
			tn.public = append(tn.public, a)
		}
		if len(tn.public) == n {
			require.False(t, isPrivate(tn.public[0]), "a public address")
			return tn
		}
	}
	t.Logf("not root (or no ip command): loopback addresses stand for public ones")
	tn.public, tn.fake = nil, true
	for i := range n {
		tn.public = append(tn.public, netip.AddrFrom4([4]byte{127, 0, 0, byte(2 + i)}))
	}
	return tn
}

// engine returns an Engine that sees tn's public addresses as public.
func (tn *testNet) engine() *Engine {
	e := NewEngine()
	if tn.fake {
		e.Policy.private = func(a netip.Addr) bool { return !slices.Contains(tn.public, a) && isPrivate(a) }
	}
	return e
}

// serveOn serves h on addr (host:port).
func serveOn(t *testing.T, addr string, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	srv := httptest.NewUnstartedServer(h)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// site serves h on tn's i-th public address.
func (tn *testNet) site(t *testing.T, i int, h http.HandlerFunc) *httptest.Server {
	return serveOn(t, netip.AddrPortFrom(tn.public[i], 0).String(), h)
}

// secret is a private server (the metadata endpoint, an admin page) that
// counts the requests it gets.
type secret struct {
	*httptest.Server
	hits atomic.Int32
	mu   sync.Mutex
	seen []string
}

func newSecret(t *testing.T, addr string) *secret {
	s := &secret{}
	s.Server = serveOn(t, addr, func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		s.mu.Lock()
		s.seen = append(s.seen, r.URL.Path)
		s.mu.Unlock()
		if r.URL.Path == "/self" {
			http.Redirect(w, r, "/secret", http.StatusFound)
			return
		}
		fmt.Fprint(w, "<title>instance credentials</title>")
	})
	return s
}

func (s *secret) paths() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.seen)
}

// Under DenyPrivate a seed's redirects are guarded: a seed on a public
// address that redirects to a private one (by address or by name) is
// refused when the redirect is dialled. Only the typed URL itself may be
// private; its redirects may not, on its own host either (a name typed by
// the user may answer another address the next time: DNS rebinding). The
// worker's policy (Engine.DenyPrivate) guards typed URLs too.
func TestDenyPrivateSeedRedirect(t *testing.T) {
	t.Parallel()
	tn := newTestNet(t, 1)
	s := newSecret(t, "127.0.0.4:0")
	named := newSecret(t, "127.0.0.1:0")
	_, namedPort, _ := net.SplitHostPort(named.Listener.Addr().String())
	pub := tn.site(t, 0, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/robots.txt":
			http.NotFound(w, r)
		case "/":
			http.Redirect(w, r, s.URL+"/secret", http.StatusFound)
		case "/to-name":
			http.Redirect(w, r, "http://localhost:"+namedPort+"/secret", http.StatusMovedPermanently)
		default:
			fmt.Fprint(w, "<title>public</title>")
		}
	})
	e := tn.engine()
	o := testOptions()
	o.DenyPrivate = true
	o.TypedURLs = []string{pub.URL + "/", pub.URL + "/to-name", s.URL + "/secret", s.URL + "/self"}
	ctx := context.Background()

	p := e.Fetch(ctx, get(pub.URL+"/"), Auth{}, 0, o)
	require.True(t, strings.HasPrefix(p.Error, "refused private address 127.0.0.4"), "%+v", p)
	p = e.Fetch(ctx, get(pub.URL+"/to-name"), Auth{}, 0, o)
	require.Contains(t, p.Error, "refused private address", "%+v", p)
	require.Zero(t, s.hits.Load()+named.hits.Load(), "a private server was reached through a seed's redirect")

	// The typed URL itself may be private; its redirect may not.
	p = e.Fetch(ctx, get(s.URL+"/secret"), Auth{}, 0, o)
	require.True(t, p.OK(), "%+v", p)
	p = e.Fetch(ctx, get(s.URL+"/self"), Auth{}, 0, o)
	require.Contains(t, p.Error, "refused private address 127.0.0.4", "%+v", p)
	require.Equal(t, []string{"/robots.txt", "/secret", "/self"}, s.paths(), "the typed URL and its robots.txt")

	// The operator's policy: no exception, whatever the job says.
	w := tn.engine()
	w.Policy.DenyPrivate = true
	for _, deny := range []bool{true, false} {
		o.DenyPrivate = deny
		p = w.Fetch(ctx, get(s.URL+"/secret"), Auth{}, 0, o)
		require.True(t, strings.HasPrefix(p.Error, "refused private address 127.0.0.4"), "%+v", p)
		p = w.Fetch(ctx, get(pub.URL+"/"), Auth{}, 0, o)
		require.True(t, strings.HasPrefix(p.Error, "refused private address 127.0.0.4"), "%+v", p)
	}
	require.Equal(t, []string{"/robots.txt", "/secret", "/self"}, s.paths(), "the typed URL and its robots.txt")

	// Without DenyPrivate the redirect is followed (the test site works).
	o.DenyPrivate = false
	p = e.Fetch(ctx, get(pub.URL+"/"), Auth{}, 0, o)
	require.True(t, p.OK() && p.FinalURL == s.URL+"/secret", "%+v", p)
}

// Under DenyPrivate what a sitemap lists is guarded: its pages are queued
// at depth 0 like seeds, but they are not typed, so a listed page that
// redirects to a private address is refused, and so is a listed sitemap
// (of a sitemap index, or of a robots.txt's Sitemap: lines) that does; a
// listed private address is dropped from the sitemap's lists already.
func TestDenyPrivateSitemapEntries(t *testing.T) {
	t.Parallel()
	tn := newTestNet(t, 1)
	s := newSecret(t, "127.0.0.5:0")
	var pubURL string
	pub := tn.site(t, 0, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/robots.txt":
			fmt.Fprintf(w, "User-agent: *\nAllow: /\nSitemap: %s/robots-sitemap.xml\nSitemap: %s/sub.xml\n", s.URL, pubURL)
		case "/sitemap.xml":
			fmt.Fprintf(w, `<urlset><url><loc>%s/listed</loc></url><url><loc>%s/direct</loc></url><url><loc>%s/ok</loc></url></urlset>`, pubURL, s.URL, pubURL)
		case "/index.xml":
			fmt.Fprintf(w, `<sitemapindex><sitemap><loc>%s/sub.xml</loc></sitemap><sitemap><loc>%s/sm.xml</loc></sitemap></sitemapindex>`, pubURL, s.URL)
		case "/listed":
			http.Redirect(w, r, s.URL+"/latest/meta-data/", http.StatusFound)
		case "/sub.xml":
			http.Redirect(w, r, s.URL+"/sub.xml", http.StatusFound)
		default:
			fmt.Fprint(w, "<title>public</title>")
		}
	})
	pubURL = pub.URL
	e := tn.engine()
	o := testOptions()
	o.DenyPrivate = true
	o.TypedURLs = []string{pub.URL + "/sitemap.xml", pub.URL + "/index.xml", pub.URL + "/robots.txt"}
	ctx := context.Background()

	p := e.FetchSitemap(ctx, get(pub.URL+"/sitemap.xml"), Auth{}, o)
	require.True(t, p.OK(), "%+v", p)
	require.Equal(t, []string{pub.URL + "/listed", pub.URL + "/ok"}, p.Links, "the private entry is dropped")
	// The runner queues them at depth 0: guarded all the same.
	p = e.Fetch(ctx, get(pub.URL+"/listed"), Auth{}, 0, o)
	require.True(t, strings.HasPrefix(p.Error, "refused private address 127.0.0.5"), "%+v", p)
	p = e.Fetch(ctx, get(s.URL+"/direct"), Auth{}, 0, o)
	require.True(t, strings.HasPrefix(p.Error, "refused private address 127.0.0.5") && p.Attempts == 0, "%+v", p)
	p = e.Fetch(ctx, get(pub.URL+"/ok"), Auth{}, 0, o)
	require.True(t, p.OK(), "%+v", p)

	for _, typed := range []string{"/index.xml", "/robots.txt"} {
		p = e.FetchSitemap(ctx, get(pub.URL+typed), Auth{}, o)
		require.True(t, p.OK(), "%s: %+v", typed, p)
		require.Equal(t, []string{pub.URL + "/sub.xml"}, p.Sitemaps, "%s: the private sitemap is dropped", typed)
	}
	p = e.FetchSitemap(ctx, get(pub.URL+"/sub.xml"), Auth{}, o)
	require.True(t, strings.HasPrefix(p.Error, "refused private address 127.0.0.5"), "%+v", p)
	require.Zero(t, s.hits.Load(), "the private server was reached through a sitemap: %v", s.paths())
}

// A followed link's redirects are guarded, by address and by name.
func TestDenyPrivateLinkRedirect(t *testing.T) {
	t.Parallel()
	tn := newTestNet(t, 1)
	s := newSecret(t, "127.0.0.4:0")
	pub := tn.site(t, 0, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/robots.txt":
			http.NotFound(w, r)
		case "/link":
			http.Redirect(w, r, s.URL+"/secret", http.StatusFound)
		case "/link-name":
			_, port, _ := net.SplitHostPort(s.Listener.Addr().String())
			http.Redirect(w, r, "http://localhost:"+port+"/secret", http.StatusFound)
		}
	})
	e := tn.engine()
	o := testOptions()
	o.DenyPrivate = true
	for _, path := range []string{"/link", "/link-name"} {
		p := e.Fetch(context.Background(), get(pub.URL+path), Auth{}, 1, o)
		require.Contains(t, p.Error, "refused private address", "%s: %+v", path, p)
	}
	require.Zero(t, s.hits.Load())
}

// Under DenyPrivate robots.txt is guarded like the page: a typed seed's
// robots.txt that redirects to a private address is refused (robots.txt
// is then unreachable: allow all), and so is any robots.txt of a page
// that is not typed.
func TestDenyPrivateRobots(t *testing.T) {
	t.Parallel()
	tn := newTestNet(t, 1)
	s := newSecret(t, "127.0.0.4:0")
	pub := tn.site(t, 0, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.Redirect(w, r, s.URL+"/robots.txt", http.StatusFound)
			return
		}
		fmt.Fprint(w, "<title>public</title>")
	})
	e := tn.engine()
	o := testOptions()
	o.DenyPrivate = true
	o.TypedURLs = []string{pub.URL + "/"}
	p := e.Fetch(context.Background(), get(pub.URL+"/"), Auth{}, 0, o)
	require.True(t, p.OK(), "%+v", p)
	p = e.Fetch(context.Background(), get(pub.URL+"/next"), Auth{}, 1, o)
	require.True(t, p.OK(), "%+v", p)
	require.Zero(t, s.hits.Load(), "robots.txt followed to a private address: %v", s.paths())
}

// Headers that may hold credentials stay on their host: on a redirect to
// another host every header of the request (cookies, --authorization
// entries, the job's --header ones) is dropped, and stays dropped if the
// chain comes back; a redirect on the same host keeps them. A robots.txt
// that redirects to another host gets no job header there.
func TestCredentialHeadersStayOnTheirHost(t *testing.T) {
	t.Parallel()
	var other recorder
	b := serveOn(t, "127.0.0.2:0", func(w http.ResponseWriter, r *http.Request) {
		other.record(r)
		switch r.URL.Path {
		case "/robots.txt":
			fmt.Fprint(w, "User-agent: *\nAllow: /\n")
		case "/bounce":
			http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
		default:
			fmt.Fprint(w, "<title>other host</title>")
		}
	})
	var home recorder
	var aURL string
	a := serveOn(t, "127.0.0.1:0", func(w http.ResponseWriter, r *http.Request) {
		home.record(r)
		switch r.URL.Path {
		case "/robots.txt":
			http.Redirect(w, r, b.URL+"/robots.txt", http.StatusFound)
		case "/cross":
			http.Redirect(w, r, b.URL+"/landing", http.StatusFound)
		case "/same":
			http.Redirect(w, r, "/landing", http.StatusFound)
		case "/away-and-back":
			http.Redirect(w, r, b.URL+"/bounce?to="+aURL+"/back", http.StatusFound)
		default:
			fmt.Fprint(w, "<title>home</title>")
		}
	})
	aURL = a.URL
	auth := Auth{Cookie: map[string]string{"session": "s3cret"}, Authorization: map[string]string{"X-Api-Key": "k3y", "Bearer": "t0ken"}}
	o := testOptions()
	o.Headers = map[string]string{"X-Trace": "tr4ce"}
	e := NewEngine()
	ctx := context.Background()
	credentials := func(h http.Header) []string {
		var out []string
		for _, k := range []string{"Cookie", "X-Api-Key", "Authorization", "X-Trace"} {
			if h.Get(k) != "" {
				out = append(out, k)
			}
		}
		return out
	}
	at := func(rc *recorder, path string) http.Header {
		t.Helper()
		for _, r := range rc.all() {
			if r.Path == path {
				return r.Header
			}
		}
		t.Fatalf("no request for %s", path)
		return nil
	}
	all := []string{"Cookie", "X-Api-Key", "Authorization", "X-Trace"}

	for _, path := range []string{"/cross", "/same", "/away-and-back"} {
		p := e.Fetch(ctx, get(a.URL+path), auth, 0, o)
		require.True(t, p.OK(), "%s: %+v", path, p)
	}
	require.Equal(t, all, credentials(at(&home, "/cross")), "the first request has them all")
	require.Empty(t, credentials(at(&other, "/landing")), "a redirect to another host")
	require.NotEmpty(t, at(&other, "/landing").Get("User-Agent"))
	require.Equal(t, all, credentials(at(&home, "/landing")), "a redirect on the same host")
	require.Empty(t, credentials(at(&other, "/bounce")))
	require.Empty(t, credentials(at(&home, "/back")), "back on the first host, through another one")

	// robots.txt: the job's headers on its own host only.
	require.Equal(t, []string{"X-Trace"}, credentials(at(&home, "/robots.txt")))
	require.Empty(t, credentials(at(&other, "/robots.txt")), "robots.txt redirected to another host")
}

// A robots.txt redirected on its own host keeps the job's headers.
func TestRobotsSameHostRedirectKeepsHeaders(t *testing.T) {
	t.Parallel()
	var rc recorder
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		rc.record(r)
		switch r.URL.Path {
		case "/robots.txt":
			http.Redirect(w, r, "/robots-real.txt", http.StatusMovedPermanently)
		case "/robots-real.txt":
			fmt.Fprint(w, "User-agent: *\nDisallow: /private/\n")
		default:
			fmt.Fprint(w, "<title>ok</title>")
		}
	})
	o := testOptions()
	o.Headers = map[string]string{"X-Trace": "tr4ce"}
	p := NewEngine().Fetch(context.Background(), get(srv.URL+"/private/x"), Auth{}, 0, o)
	require.True(t, p.Disallowed, "%+v", p)
	for _, r := range rc.all() {
		require.Equal(t, "tr4ce", r.Header.Get("X-Trace"), r.Path)
	}
}

// Through a proxy the proxy dials, so DenyPrivate checks host names: a
// redirect to a private address is refused before the proxy is asked for
// it, on a typed seed as on any page.
func TestDenyPrivateThroughProxy(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var asked []string
	proxy := serve(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.URL.String())
		mu.Unlock()
		if r.URL.Host != "shop.invalid" {
			http.Error(w, "not proxied", http.StatusBadGateway)
			return
		}
		switch r.URL.Path {
		case "/robots.txt":
			http.Redirect(w, r, "http://127.0.0.4/robots.txt", http.StatusFound)
		case "/away":
			http.Redirect(w, r, "http://localhost/admin", http.StatusFound)
		default:
			fmt.Fprint(w, "<title>via proxy</title>")
		}
	})
	e := NewEngine()
	o := testOptions()
	o.Proxy = proxy.URL
	o.DenyPrivate = true
	o.TypedURLs = []string{"http://shop.invalid/away"}
	ctx := context.Background()
	p := e.Fetch(ctx, get("http://shop.invalid/item"), Auth{}, 0, o)
	require.True(t, p.OK(), "%+v", p)
	for _, depth := range []int{0, 1} {
		p = e.Fetch(ctx, get("http://shop.invalid/away"), Auth{}, depth, o)
		require.Regexp(t, `^refused private address \S+ \(localhost\)`, p.Error, "depth %d: %+v", depth, p)
	}
	p = e.Fetch(ctx, get("http://127.0.0.4/x"), Auth{}, 0, o)
	require.True(t, strings.HasPrefix(p.Error, "refused private address 127.0.0.4") && p.Attempts == 0, "%+v", p)
	mu.Lock()
	defer mu.Unlock()
	for _, u := range asked {
		require.Contains(t, u, "//shop.invalid/", "the proxy was asked for a private address")
	}
}
