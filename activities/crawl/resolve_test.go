package crawl

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/gocolly/colly/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPageLinksMatchColly: the links an attempt reads from a page
// (readHTML) are those Colly's OnHTML("a[href]") callback sees, each
// resolved exactly as its Request.AbsoluteURL resolves it, in the same
// order, with and without <base href>, for hrefs a hostile or sloppy page
// has.
func TestPageLinksMatchColly(t *testing.T) {
	hrefs := []string{"", "#top", "?q=1", "../a b", "//h.example/x", "http://EXAMPLE.com:80/%zz", "mailto:x@y",
		"javascript:void(0)", " /spaced ", "a%", `\back\slash`, "http://[::1]:8080/v6", "https://例え.jp/パス?q=ä#f",
		"/p?x=%41&y=ä", "HTTP://Upper.Example/", "./.././/x/../y", "data:text/html,hi", "http://a b/", "http://%zz/",
		"tel:+1", strings.Repeat("x/", 300), "http://user:pw@h.example/", "plain.html", "sub/dir/", "..", ".",
		"/abs/./x/../y.html?a=1&b=2#Frag-1", "a/b?c=d#e?f", "x?y?z", "x#y#z", "a.html#", "~u/p_q-r.s", "/", "a//b",
		"A:b", "a\tb", "a:b/c"}
	var body strings.Builder
	for _, h := range hrefs {
		fmt.Fprintf(&body, "<a href=%q>x</a>\n", h)
	}
	links := body.String()
	pages := map[string]string{
		"/plain/page.html": "<html><body>" + links + "</body></html>",
		"/based/page.html": `<html><head><base href="http://other.example/dir/sub/"></head><body>` + links + `</body></html>`,
		// The first base[href] counts, wherever it is; a <base> without
		// href does not; a[href] in SVG (xlink:href) is a link too.
		"/late/base.html": `<html><head><base target="_blank"></head><body>` + links +
			`<base href="../up/"><base href="/ignored/"><svg><a xlink:href="svg.html">s</a></svg><a name="n">no href</a><a HREF="Upper.html">u</a></body></html>`,
		"/dir/":           "<title>t</title>" + links,
		"/badbase/x.html": `<base href="http://%zz/">` + links,
	}
	mux := http.NewServeMux()
	for path, html := range pages {
		mux.HandleFunc(path, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			io.WriteString(w, html)
		})
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for path, html := range pages {
		var want []string
		c := colly.NewCollector()
		c.OnHTML("a[href]", func(el *colly.HTMLElement) {
			if abs := el.Request.AbsoluteURL(el.Attr("href")); abs != "" {
				want = append(want, abs)
			}
		})
		require.NoError(t, c.Visit(srv.URL+path))
		require.NotEmpty(t, want, path)
		page, err := url.Parse(srv.URL + path)
		require.NoError(t, err)
		a := &attemptRun{wantLinks: true}
		a.readHTML([]byte(html), page)
		require.NoError(t, a.parseErr)
		assert.Equal(t, want, a.rawLinks, path)
	}
}

// TestPlainLinksMatchWHATWG: every href the resolver's plain path takes,
// of all the short strings of the characters that matter to it, resolves
// to what the WHATWG parser gives, against bases of every shape.
func TestPlainLinksMatchWHATWG(t *testing.T) {
	bases := []string{"http://h.example/", "https://h.example:8443/a/b/c.html?q=1#f", "http://u:p@h.example/a/",
		"http://[::1]:8080/x", "http://h.example/a/b/", "https://h.example/%7Eu/p%20q/r"}
	alphabet := []string{"a", "Z", "9", ".", "..", "/", "?", "=", "&", "#", "-", "~", "_"}
	var hrefs []string
	var gen func(prefix string, n int)
	gen = func(prefix string, n int) {
		hrefs = append(hrefs, prefix)
		if n == 0 {
			return
		}
		for _, s := range alphabet {
			gen(prefix+s, n-1)
		}
	}
	gen("", 4)
	taken := 0
	for _, base := range bases {
		l := newLinkResolver(base)
		require.True(t, l.fast, base)
		ref, err := linkParser.Parse(base)
		require.NoError(t, err)
		for _, h := range hrefs {
			got, ok := l.plain(h)
			if !ok {
				continue
			}
			taken++
			u, err := ref.Parse(h)
			require.NoError(t, err, "href %q on %s", h, base)
			if got != u.Href(false) {
				t.Fatalf("href %q on %s: plain %q, WHATWG %q", h, base, got, u.Href(false))
			}
		}
	}
	assert.Greater(t, taken, len(hrefs)) // the plain path is taken, on every base
}

// BenchmarkLinkResolver: resolving a page's 40 links, by Colly's
// AbsoluteURL and by the resolver.
func BenchmarkLinkResolver(b *testing.B) {
	var body strings.Builder
	for i := range 40 {
		fmt.Fprintf(&body, `<a href="/section-%d/page-%d.html">x</a>`, i%7, i)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "<html><body>%s</body></html>", body.String())
	}))
	defer srv.Close()
	var req *colly.Request
	var hrefs []string
	c := colly.NewCollector()
	c.OnHTML("a[href]", func(el *colly.HTMLElement) {
		req = el.Request
		hrefs = append(hrefs, el.Attr("href"))
	})
	if err := c.Visit(srv.URL + "/a/b.html"); err != nil {
		b.Fatal(err)
	}
	b.Run("colly-AbsoluteURL", func(b *testing.B) {
		for b.Loop() {
			for _, h := range hrefs {
				_ = req.AbsoluteURL(h)
			}
		}
	})
	b.Run("linkResolver", func(b *testing.B) {
		for b.Loop() {
			l := newLinkResolver(req.URL.String())
			for _, h := range hrefs {
				_ = l.resolve(h)
			}
		}
	})
}

// TestLinkURLReadsBack: the scheme and host linkURL gives with a link are
// those of its normalised URL read back, for hosts of every kind.
func TestLinkURLReadsBack(t *testing.T) {
	for _, raw := range []string{"http://h.example/a", "HTTP://Upper.Example:80/x", "https://h.example:443/", "http://[::1]:8080/v6",
		"http://[fe80::1%25en0]/z", "http://xn--r8jz45g.jp/p", "https://例え.jp/パス", "http://a_b.example/", "http://h.example:8080/?q=%zz",
		"http://user:pw@h.example/", "http://h%41.example/", "http://h.example./a/../b", "ftp://h.example/", "http://h.example:/x"} {
		n, u, err := linkURL(raw, false)
		wn, werr := normalizeURL(raw, false)
		if werr == nil {
			var back *url.URL
			if back, werr = url.Parse(wn); werr == nil && back.Scheme != "http" && back.Scheme != "https" {
				werr = errNotHTTP
			}
			if werr == nil {
				require.NoError(t, err, raw)
				assert.Equal(t, wn, n, raw)
				assert.Equal(t, back.Scheme, u.Scheme, raw)
				assert.Equal(t, back.Host, u.Host, raw)
				continue
			}
		}
		assert.Error(t, err, raw)
	}
}
