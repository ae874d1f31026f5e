package testsuite_test

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/testsuite"
)

// publicAddr adds a public address to lo for the test (192.88.99.0/24, the
// deprecated 6to4 relay anycast prefix, RFC 7526: every address a test may
// reach is loopback, which --deny-private refuses). It needs root.
func publicAddr(t *testing.T, last byte) netip.Addr {
	t.Helper()
	ip, err := exec.LookPath("ip")
	if os.Geteuid() != 0 || err != nil {
		t.Skip("needs root and the ip command: the hostile site is served on a public address added to lo")
	}
	a := netip.AddrFrom4([4]byte{192, 88, 99, last})
	if out, err := exec.Command(ip, "addr", "add", a.String()+"/32", "dev", "lo").CombinedOutput(); err != nil {
		t.Skipf("ip addr add %s: %v: %s", a, err, out)
	}
	t.Cleanup(func() { _ = exec.Command(ip, "addr", "del", a.String()+"/32", "dev", "lo").Run() })
	return a
}

// hostileServer serves h on addr and records the paths and headers it got.
type hostileServer struct {
	*httptest.Server
	mu   sync.Mutex
	got  []string
	hdrs map[string]http.Header
}

func newHostileServer(t *testing.T, addr string, h func(*hostileServer, http.ResponseWriter, *http.Request)) *hostileServer {
	t.Helper()
	s := &hostileServer{hdrs: map[string]http.Header{}}
	ln, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.got = append(s.got, r.URL.Path)
		s.hdrs[r.URL.Path] = r.Header.Clone()
		s.mu.Unlock()
		h(s, w, r)
	}))
	s.Listener.Close()
	s.Listener = ln
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func (s *hostileServer) paths() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.got...)
}

func (s *hostileServer) header(path string) http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hdrs[path]
}

// End to end with real worker processes: a hostile site on a public
// address, crawled with the job's --deny-private and credentials. Its
// seed redirects to 127.0.0.4, the page its sitemap lists to 127.0.0.5, a
// link to 127.0.0.4; its robots.txt and sitemap list 127.0.0.5 directly;
// another seed redirects to another host. No private server answers
// anything but the private seed the user typed (and its robots.txt), and
// the other host gets no cookie, authorization or job header.
func TestHostileSiteUnderDenyPrivate(t *testing.T) {
	pubAddr, otherAddr := publicAddr(t, 201), publicAddr(t, 202)
	c := testsuite.NewCluster(t, 1, 0, testsuite.FastTimers)
	s4 := newHostileServer(t, "127.0.0.4:0", func(_ *hostileServer, w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "<title>private 4</title>")
	})
	s5 := newHostileServer(t, "127.0.0.5:0", func(_ *hostileServer, w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"AccessKeyId": "instance credentials"}`)
	})
	other := newHostileServer(t, netip.AddrPortFrom(otherAddr, 0).String(), func(_ *hostileServer, w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "<title>another host</title>")
	})
	pub := newHostileServer(t, netip.AddrPortFrom(pubAddr, 0).String(), func(s *hostileServer, w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/robots.txt":
			fmt.Fprintf(w, "User-agent: *\nAllow: /\nSitemap: %s/sitemap.xml\nSitemap: %s/sitemap.xml\n", s.URL, s5.URL)
		case "/sitemap.xml":
			fmt.Fprintf(w, `<urlset><url><loc>%[1]s/listed</loc></url><url><loc>%[1]s/page</loc></url><url><loc>%[2]s/direct</loc></url></urlset>`, s.URL, s5.URL)
		case "/":
			http.Redirect(w, r, s4.URL+"/seed-secret", http.StatusFound)
		case "/listed":
			http.Redirect(w, r, s5.URL+"/latest/meta-data/", http.StatusFound)
		case "/cross":
			http.Redirect(w, r, other.URL+"/landing", http.StatusFound)
		case "/page":
			fmt.Fprint(w, `<html><title>page</title><a href="/link">link</a></html>`)
		case "/link":
			http.Redirect(w, r, s4.URL+"/link-secret", http.StatusFound)
		default:
			http.NotFound(w, r)
		}
	})
	c.StartAll()
	c.WaitElected(electTimeout)

	out, code := baton(c, "crawl", "--id", "hostile", pub.URL+"/", pub.URL+"/cross", s4.URL+"/typed",
		"--sitemap", "robots", "--follow", "--depth", "2", "--deny-private",
		"--cookie", "session=s3cret", "--authorization", "X-Api-Key=k3y", "--header", "X-Trace: tr4ce", "--wait")
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "job hostile completed")

	assert.Empty(t, s5.paths(), "127.0.0.5 was reached through a sitemap")
	for _, p := range s4.paths() {
		assert.Contains(t, []string{"/robots.txt", "/typed"}, p, "127.0.0.4 was reached by more than the seed typed (and its robots.txt)")
	}
	assert.Contains(t, s4.paths(), "/typed")

	byURL := map[string]string{}
	for _, r := range readResults(t, c.OpenStore(), "hostile") {
		byURL[strings.TrimPrefix(r.URL, pub.URL)] = r.Error
	}
	assert.True(t, strings.HasPrefix(byURL["/"], "refused private address 127.0.0.4"), "the seed's redirect: %q", byURL["/"])
	assert.True(t, strings.HasPrefix(byURL["/listed"], "refused private address 127.0.0.5"), "the sitemap entry's redirect: %q", byURL["/listed"])
	assert.True(t, strings.HasPrefix(byURL["/link"], "refused private address 127.0.0.4"), "the link's redirect: %q", byURL["/link"])
	assert.Empty(t, byURL["/page"])
	assert.Empty(t, byURL["/cross"])
	assert.Contains(t, byURL, s4.URL+"/typed")
	assert.Empty(t, byURL[s4.URL+"/typed"], "the seed typed may be private")
	assert.NotContains(t, byURL, s5.URL+"/direct", "a private address a sitemap lists is dropped")

	h := other.header("/landing")
	require.NotNil(t, h, "the redirect to another host was followed")
	for _, k := range []string{"Cookie", "X-Api-Key", "Authorization", "X-Trace"} {
		assert.Empty(t, h.Get(k), "%s reached another host", k)
	}
	h = pub.header("/cross")
	assert.Equal(t, "k3y", h.Get("X-Api-Key"), "the site's own host gets the credentials")
	assert.Equal(t, "tr4ce", h.Get("X-Trace"))
	assert.Contains(t, h.Get("Cookie"), "session=s3cret")
}

// The worker's --deny-private is the operator's policy: a job that does
// not ask for it, and a plain Task, are guarded all the same, the seed the
// user typed included.
func TestWorkerDenyPrivatePolicy(t *testing.T) {
	c := testsuite.NewCluster(t, 1, 0, testsuite.FastTimers, testsuite.WithWorkerArgs("--deny-private"))
	s4 := newHostileServer(t, "127.0.0.4:0", func(_ *hostileServer, w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "<title>private 4</title>")
	})
	c.StartAll()
	c.WaitElected(electTimeout)

	out, code := baton(c, "crawl", "--id", "policy", s4.URL+"/typed", "--wait")
	require.Equal(t, 0, code, out)
	recs := readResults(t, c.OpenStore(), "policy")
	require.Len(t, recs, 1)
	assert.True(t, strings.HasPrefix(recs[0].Error, "refused private address 127.0.0.4"), "%+v", recs[0])

	c.Assign(1, []string{s4.URL + "/plain"})
	task := c.WaitTaskDone(taskTimeout, 1)
	require.Len(t, task.ResultDetail, 1)
	assert.True(t, strings.HasPrefix(task.ResultDetail[0].ErrorMsg, "refused private address 127.0.0.4"), "%+v", task.ResultDetail[0])
	assert.Empty(t, s4.paths(), "the private server was reached under the worker's --deny-private")
}

// A plain Task's page with a 3 MiB <title> is recorded, its title cut: the
// Task znode stays below ZooKeeper's 1 MiB limit instead of failing the
// write for ever.
func TestTaskWithHugeTitle(t *testing.T) {
	c := testsuite.NewCluster(t, 1, 0, testsuite.FastTimers)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "<title>%s</title>", strings.Repeat("T", 3<<20))
	}))
	t.Cleanup(srv.Close)
	c.StartAll()
	c.WaitElected(electTimeout)
	c.Assign(1, []string{srv.URL + "/a", srv.URL + "/b"})
	task := c.WaitTaskDone(taskTimeout, 1)
	testsuite.AssertExactlyOnce(t, task, 2)
	for _, d := range task.ResultDetail {
		assert.Equal(t, 200, d.StatusCode)
		assert.LessOrEqual(t, len(d.Response), 1<<10)
	}
}
