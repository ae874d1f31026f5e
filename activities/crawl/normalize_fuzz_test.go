package crawl

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNormalizeURLTrackingParams(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"http://example.com/a?utm_source=x&utm_medium=y&id=3":            "http://example.com/a?id=3",
		"http://example.com/a?UTM_Campaign=x&b=1&fbclid=abc&a=2":         "http://example.com/a?a=2&b=1",
		"http://example.com/?gclid=1&msclkid=2&mc_cid=3&mc_eid=4&_ga=5":  "http://example.com/",
		"http://example.com/?utm_=keep&utm=keep&ref=keep&source=keep":    "http://example.com/?ref=keep&source=keep&utm=keep&utm_=keep",
		"http://example.com/?%75tm_source=x&q=1":                         "http://example.com/?q=1",
		"http://example.com/?fbclid&q=1":                                 "http://example.com/?q=1",
		"http://example.com/?pk_campaign=a&mtm_kwd=b&hsa_cam=c&_hsenc=d": "http://example.com/",
	} {
		got, err := NormalizeURL(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	keep := Options{KeepTrackingParams: true}
	got, err := keep.NormalizeURL("http://Example.com/a?utm_source=x&fbclid=y&a=1#f")
	require.NoError(t, err)
	require.Equal(t, "http://example.com/a?a=1&fbclid=y&utm_source=x", got, "KeepTrackingParams keeps them, sorted")
	got, err = Options{}.NormalizeURL("http://example.com/a?utm_source=x&a=1")
	require.NoError(t, err)
	require.Equal(t, "http://example.com/a?a=1", got, "the default options strip them")
}

func TestFilterLinksTrackingParams(t *testing.T) {
	t.Parallel()
	raw := []string{"http://h.test/p?utm_source=a", "http://h.test/p?utm_source=b", "http://h.test/p", "http://h.test/q?fbclid=1&x=2"}
	require.Equal(t, []string{"http://h.test/p", "http://h.test/q?x=2"}, filterLinks(raw, nil, false),
		"links that differ only in tracking parameters are one page")
	require.Equal(t, []string{"http://h.test/p?utm_source=a", "http://h.test/p?utm_source=b", "http://h.test/p", "http://h.test/q?fbclid=1&x=2"},
		filterLinks(raw, nil, true))
}

// FuzzNormalizeURL checks NormalizeURL on any string: it fails with a
// message, or returns an absolute URL that parses, has a lower-case scheme
// and host, no fragment and no tracking parameter, and is a fixed point
// (normalising it again changes nothing) with or without
// KeepTrackingParams; keeping the tracking parameters then stripping them
// is the same as stripping them at once.
func FuzzNormalizeURL(f *testing.F) {
	for _, s := range []string{
		"HTTP://Example.COM/a/b", "http://example.com:80/a", "https://example.com:8443/a/./b/../c#frag",
		"http://example.com/%7euser/%2fx%3a", "http://user:pw@Example.com/", "http://[::1]:80/x",
		"http://[fe80::1%25en0]:8080/x", "http://example.com/a?q=a+b&p=%2F#x", "http://example.com/p?&&z=1&",
		"http://example.com/?utm_source=x&b=2&a=1&fbclid=3", "http://example.com/a/..//b", "http://ÉXAMPLE.com/é",
		"http://example.com/a;b=c/%2e%2E/d", "mailto:x@example.com", "/relative", "http://%zz/", "http://x:y:z/",
		"http://example.com/%", "http://example.com/a b", "HTTP://[::FFFF:127.0.0.1]/", "http://example.com:/",
		"http://example.com/?a=%zz&%7A=1", "ftp://example.com/../x",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		n, err := NormalizeURL(raw)
		if u, perr := url.Parse(strings.TrimSpace(raw)); perr == nil { // parsed first, as a seed file's line is
			pn, pe := NormalizeParsedURL(raw, u)
			require.Equal(t, n, pn, "%q normalised from its parsed URL", raw)
			require.Equal(t, fmt.Sprint(err), fmt.Sprint(pe), "%q normalised from its parsed URL", raw)
		}
		if err != nil {
			require.NotEmpty(t, err.Error())
			return
		}
		u, err := url.Parse(n)
		require.NoError(t, err, "%q → %q does not parse", raw, n)
		require.NotEmpty(t, u.Host, "%q → %q has no host", raw, n)
		require.Equal(t, strings.ToLower(u.Scheme), u.Scheme)
		require.Empty(t, u.Fragment, "%q → %q", raw, n)
		for _, p := range strings.Split(u.RawQuery, "&") {
			require.False(t, IsTrackingParam(queryKey(p)), "%q → %q keeps tracking parameter %q", raw, n, p)
		}
		again, err := NormalizeURL(n)
		require.NoError(t, err, "%q → %q", raw, n)
		require.Equal(t, n, again, "not idempotent: %q → %q → %q", raw, n, again)

		k, err := Options{KeepTrackingParams: true}.NormalizeURL(raw)
		require.NoError(t, err, "%q: strips but fails keeping", raw)
		kagain, err := Options{KeepTrackingParams: true}.NormalizeURL(k)
		require.NoError(t, err)
		require.Equal(t, k, kagain, "keeping: not idempotent: %q → %q → %q", raw, k, kagain)
		stripped, err := NormalizeURL(k)
		require.NoError(t, err)
		require.Equal(t, n, stripped, "%q: keep then strip %q, strip at once %q", raw, stripped, n)
	})
}

func TestFetchLinksTrackingParams(t *testing.T) {
	t.Parallel()
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<a href="/p?utm_source=nl&utm_medium=email&id=7">1</a><a href="/p?id=7&gclid=abc">2</a><a href="/p?id=7">3</a>`)
	})
	o := testOptions()
	o.IgnoreRobots, o.Follow, o.MaxDepth = true, true, 1
	p := NewEngine().Fetch(context.Background(), get(srv.URL+"/"), Auth{}, 0, o)
	require.Empty(t, p.Error)
	require.Equal(t, []string{srv.URL + "/p?id=7"}, p.Links, "one page, three links")
	o.KeepTrackingParams = true
	p = NewEngine().Fetch(context.Background(), get(srv.URL+"/"), Auth{}, 0, o)
	require.Empty(t, p.Error)
	require.Equal(t, []string{srv.URL + "/p?id=7&utm_medium=email&utm_source=nl", srv.URL + "/p?gclid=abc&id=7", srv.URL + "/p?id=7"}, p.Links)
}
