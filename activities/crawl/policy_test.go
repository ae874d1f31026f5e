package crawl

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// fakeProxy is an HTTP proxy on loopback (an internal host:port) that
// answers every absolute-form request itself and counts them.
type fakeProxy struct {
	hits atomic.Int32
	mu   sync.Mutex
	seen []string
	url  string
}

func newFakeProxy(t *testing.T) *fakeProxy {
	fp := &fakeProxy{}
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		fp.hits.Add(1)
		fp.mu.Lock()
		fp.seen = append(fp.seen, r.URL.String())
		fp.mu.Unlock()
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, "<title>internal answer</title>")
	})
	fp.url = srv.URL
	return fp
}

// A job's proxy is dialled under the worker's policy: a "proxy" at a
// loopback address is refused under the worker's --deny-private, naming
// the proxy, and is never asked for anything; the transport refuses it
// on dialling too, whatever the early check said.
func TestWorkerDenyPrivateRefusesJobProxy(t *testing.T) {
	t.Parallel()
	fp := newFakeProxy(t)
	e := NewEngine()
	e.Policy.DenyPrivate = true
	o := testOptions()
	o.Proxy = fp.url
	for _, seed := range []string{"http://x.invalid/secret", "http://example.com/"} {
		p := e.Fetch(context.Background(), get(seed), Auth{}, 0, o)
		require.Equal(t, "refused proxy "+fp.url+": private address 127.0.0.1 (deny_private)", p.Error, "%+v", p)
	}
	require.Zero(t, fp.hits.Load(), "the proxy was asked: %v", fp.seen)

	tr, err := e.transport(true, fp.url)
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodGet, "http://x.invalid/secret", nil)
	require.NoError(t, err)
	_, err = tr.RoundTrip(req)
	var pe *privateAddrError
	require.True(t, errors.As(err, &pe), "%v", err)
	require.Contains(t, err.Error(), "refused proxy "+fp.url)
	require.Zero(t, fp.hits.Load())
}

// A loopback proxy works on a worker that does not deny private
// addresses, and under a job's own --deny-private when the job's user
// typed the proxy as an IP address; a proxy named by a host name that
// resolves to loopback is refused by the job's guard.
func TestJobProxyOnLoopback(t *testing.T) {
	t.Parallel()
	fp := newFakeProxy(t)
	e := NewEngine()
	o := testOptions()
	o.Proxy = fp.url
	p := e.Fetch(context.Background(), get("http://x.invalid/page"), Auth{}, 0, o)
	require.True(t, p.OK(), "%+v", p)
	require.Equal(t, "internal answer", p.Title)

	o.DenyPrivate = true
	p = e.Fetch(context.Background(), get("http://x.invalid/page"), Auth{}, 0, o)
	require.True(t, p.OK(), "%+v", p)

	u, _ := url.Parse(fp.url)
	o.Proxy = "http://localhost:" + u.Port()
	before := fp.hits.Load()
	p = e.Fetch(context.Background(), get("http://x.invalid/page"), Auth{}, 0, o)
	require.True(t, strings.HasPrefix(p.Error, "refused proxy http://localhost:"+u.Port()+": private address"), "%+v", p)
	require.Equal(t, before, fp.hits.Load())
}

// Under a job's --deny-private only a seed typed as an IP address may be
// private: a typed host name that resolves to loopback is refused before
// anything is sent (hostile DNS for a typed name reaches no internal
// address).
func TestTypedHostNameGetsNoExemption(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, "<title>metadata</title>")
	})
	u, _ := url.Parse(srv.URL)
	named := "http://localhost:" + u.Port() + "/latest/meta-data"
	o := testOptions()
	o.DenyPrivate = true
	o.TypedURLs = []string{named, srv.URL + "/latest/meta-data"}
	e := NewEngine()
	for _, sitemap := range []bool{false, true} {
		var p Page
		if sitemap {
			p = e.FetchSitemap(context.Background(), get(named), Auth{}, o)
		} else {
			p = e.Fetch(context.Background(), get(named), Auth{}, 0, o)
		}
		require.True(t, strings.HasPrefix(p.Error, "refused private address") && strings.Contains(p.Error, "(localhost)"), "%+v", p)
	}
	require.Zero(t, hits.Load(), "a typed host name reached loopback")

	// The address typed as such is the user's choice.
	p := e.Fetch(context.Background(), get(srv.URL+"/latest/meta-data"), Auth{}, 0, o)
	require.True(t, p.OK(), "%+v", p)
}

// The operator's address lists: Deny refuses a range whatever the job
// says, Allow lets DenyPrivate reach one range.
func TestPolicyLists(t *testing.T) {
	t.Parallel()
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "<title>inside</title>") })
	o := testOptions()
	o.IgnoreRobots = true

	e := NewEngine()
	e.Policy.Deny = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	p := e.Fetch(context.Background(), get(srv.URL+"/"), Auth{}, 0, o)
	require.Equal(t, "refused address 127.0.0.1: denied by the operator (127.0.0.0/8)", p.Error, "%+v", p)

	e = NewEngine()
	e.Policy.DenyPrivate = true
	e.Policy.Allow = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	p = e.Fetch(context.Background(), get(srv.URL+"/"), Auth{}, 0, o)
	require.True(t, p.OK(), "%+v", p)
	p = e.Fetch(context.Background(), get(strings.Replace(srv.URL, "127.0.0.1", "127.0.0.2", 1)+"/"), Auth{}, 0, o)
	require.True(t, strings.HasPrefix(p.Error, "refused private address 127.0.0.2"), "%+v", p)

	pfx, err := ParsePrefixes([]string{"10.0.0.0/8", "192.0.2.7", " fd00::/8 "})
	require.NoError(t, err)
	require.Equal(t, "[10.0.0.0/8 192.0.2.7/32 fd00::/8]", fmt.Sprint(pfx))
	_, err = ParsePrefixes([]string{"10.0.0.0/33"})
	require.ErrorContains(t, err, `"10.0.0.0/33"`)
}

// The client crawler code gets dials under the policy.
func TestPolicyClient(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) { hits.Add(1) })
	_, err := Policy{DenyPrivate: true}.Client(0).Get(srv.URL)
	require.ErrorContains(t, err, "refused private address 127.0.0.1 (deny_private)")
	require.Zero(t, hits.Load())
	resp, err := Policy{}.Client(0).Get(srv.URL)
	require.NoError(t, err)
	resp.Body.Close()
}
