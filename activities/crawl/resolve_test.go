package crawl

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gocolly/colly/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLinkResolverMatchesColly: every link resolves exactly as Colly's
// Request.AbsoluteURL resolves it, with and without <base href>, for
// hrefs a hostile or sloppy page has.
func TestLinkResolverMatchesColly(t *testing.T) {
	hrefs := []string{"", "#top", "?q=1", "../a b", "//h.example/x", "http://EXAMPLE.com:80/%zz", "mailto:x@y",
		"javascript:void(0)", " /spaced ", "a%", `\back\slash`, "http://[::1]:8080/v6", "https://例え.jp/パス?q=ä#f",
		"/p?x=%41&y=ä", "HTTP://Upper.Example/", "./.././/x/../y", "data:text/html,hi", "http://a b/", "http://%zz/",
		"tel:+1", strings.Repeat("x/", 300), "http://user:pw@h.example/"}
	var body strings.Builder
	for _, h := range hrefs {
		fmt.Fprintf(&body, "<a href=%q>x</a>\n", h)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/plain/page.html", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "<html><body>%s</body></html>", body.String())
	})
	mux.HandleFunc("/based/page.html", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, `<html><head><base href="http://other.example/dir/sub/"></head><body>%s</body></html>`, body.String())
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for _, path := range []string{"/plain/page.html", "/based/page.html"} {
		c := colly.NewCollector()
		var l linkResolver
		n := 0
		c.OnHTML("a[href]", func(el *colly.HTMLElement) {
			n++
			href := el.Attr("href")
			assert.Equal(t, el.Request.AbsoluteURL(href), l.resolve(el.Request, href), "href %q on %s", href, path)
		})
		require.NoError(t, c.Visit(srv.URL+path))
		assert.Equal(t, len(hrefs), n, path)
	}
}

// BenchmarkLinkResolver: resolving a page's 40 links, by Colly's
// AbsoluteURL and by the resolver that parses the base once.
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
			var l linkResolver
			for _, h := range hrefs {
				_ = l.resolve(req, h)
			}
		}
	})
}
