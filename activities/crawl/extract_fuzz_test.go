package crawl

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// FuzzExtract serves any body as an HTML page and fetches it through the
// Engine (Colly, goquery, cascadia, the link filter), with any CSS selector
// for a field. The fetch never panics (Fetch would report "internal
// error") nor hangs; it fails only with a clear reason (an invalid
// selector is named as such, an unparsable document as "parse HTML");
// links are absolute http(s), normalised (a fixed point of NormalizeURL),
// free of tracking parameters, unique and bounded; field values are
// trimmed and bounded in total.
func FuzzExtract(f *testing.F) {
	for _, s := range []struct{ body, sel string }{
		{`<html><head><title> T </title></head><body><h1>A</h1><a href="/x?utm_source=y&b=1#f">x</a><a href="//other.test/p">o</a></body></html>`, "h1"},
		{`<base href="http://base.test/dir/"><a href="rel">r</a><a href="../up">u</a><a href="mailto:a@b">m</a><a href="javascript:alert(1)">j</a>`, "a[href]"},
		{`<a href="HTTP://EXAMPLE.test:80/%7ea/./b/../c">n</a><a href=" http://x.test/ ">s</a><a href="http://[::1]:80/">v6</a>`, "a:nth-child(2n+1)"},
		{`<div><div><div><p class="price">1</p><p class="price"> 2 </p></div></div></div>`, ".price"},
		{strings.Repeat("<div>", 600) + "deep", "div > div"},
		{`<table><tr><td>cell<td>other</table><select><option>o<option>p</select>`, "td:contains(cell)"},
		{`<svg><title>svg title</title></svg><math><mi>x</mi></math><template><a href="/t">t</a></template>`, "title"},
		{"\xff\xfe<\x00a href='/\x00'>nul</a>", "*"},
		{`<p>x</p>`, "a["},
		{`<p>x</p>`, ":has(:has(:has(p)))"},
		{`<a href="http://%zz/">bad</a><a href="http://x.test/%">pct</a><a href="http://a b/">sp</a>`, "p ~ p + p"},
	} {
		f.Add([]byte(s.body), s.sel)
	}
	var (
		mu    sync.Mutex
		pages = map[string][]byte{}
		seq   atomic.Int64
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		body, ok := pages[r.URL.Path]
		mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write(body)
	}))
	f.Cleanup(srv.Close)
	e := NewEngine()
	f.Cleanup(e.CloseIdleConnections)
	o := DefaultOptions()
	o.IgnoreRobots, o.Follow, o.MaxDepth, o.Retries = true, true, 1, 0

	f.Fuzz(func(t *testing.T, body []byte, sel string) {
		path := "/p/" + strconv.FormatInt(seq.Add(1), 10) + "/page.html"
		mu.Lock()
		pages[path] = body
		mu.Unlock()
		defer func() { mu.Lock(); delete(pages, path); mu.Unlock() }()

		opts := o
		opts.Selectors = map[string]string{"f": sel, "title": "title"}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		start := time.Now()
		p := e.Fetch(ctx, get(srv.URL+path), Auth{}, 0, opts)
		require.Less(t, time.Since(start), 10*time.Second, "a %d-byte page took %s", len(body), time.Since(start))
		require.NotContains(t, p.Error, "internal error", "Fetch recovered from a panic")
		if opts.Validate() != nil {
			require.True(t, strings.HasPrefix(p.Error, `invalid options: selectors["f"]: `), "a bad selector is named: %q", p.Error)
			return
		}
		if p.Error != "" {
			require.True(t, strings.HasPrefix(p.Error, "parse HTML: "), "unexpected failure %q", p.Error)
			return
		}
		require.Equal(t, 200, p.StatusCode)
		require.LessOrEqual(t, len(p.Links), MaxLinksPerPage)
		seen := map[string]bool{}
		for _, l := range p.Links {
			require.False(t, seen[l], "link %q twice", l)
			seen[l] = true
			u, err := url.Parse(l)
			require.NoError(t, err, l)
			require.Contains(t, []string{"http", "https"}, u.Scheme, l)
			require.NotEmpty(t, u.Host, l)
			n, err := NormalizeURL(l)
			require.NoError(t, err, l)
			require.Equal(t, l, n, "link not normalised")
		}
		total := 0
		require.Contains(t, p.Fields, "f")
		for name, vs := range p.Fields {
			for _, v := range vs {
				require.Equal(t, strings.TrimSpace(v), v, "field %s value not trimmed", name)
				total += len(v)
			}
		}
		require.LessOrEqual(t, total, MaxFieldBytes)
		require.Equal(t, strings.TrimSpace(p.Title), p.Title)
	})
}
