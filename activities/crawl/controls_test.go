package crawl

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/zstd"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/japanese"
	"golang.org/x/text/encoding/unicode"
)

func TestUserAgentAndHeaders(t *testing.T) {
	t.Parallel()
	var rc recorder
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		rc.record(r)
		fmt.Fprint(w, "ok")
	})
	e := NewEngine()
	o := testOptions()
	if !strings.HasPrefix(o.UserAgent, "Baton/"+Version+" ") {
		t.Fatalf("default User-Agent %q does not name Baton and its version", o.UserAgent)
	}
	o.UserAgent = "shopbot/2.1"
	o.Headers = map[string]string{"Accept-Language": "de", "X-Trace": "t1"}
	if p := e.Fetch(context.Background(), get(srv.URL+"/a"), Auth{}, 0, o); !p.OK() {
		t.Fatal(p.Error)
	}
	all := rc.all()
	if len(all) != 2 || all[0].Path != "/robots.txt" {
		t.Fatalf("requests: %+v", all)
	}
	for _, got := range all { // robots.txt is asked for with the job's agent too
		if got.Header.Get("User-Agent") != "shopbot/2.1" {
			t.Errorf("%s: User-Agent %q", got.Path, got.Header.Get("User-Agent"))
		}
	}
	for _, got := range all {
		if got.Header.Get("Accept-Language") != "de" || got.Header.Get("X-Trace") != "t1" {
			t.Errorf("%s: headers not sent: %v", got.Path, got.Header)
		}
	}
	// A request's own header wins over the job's.
	r := get(srv.URL + "/b")
	r.Header = map[string]string{"Accept-Language": "fr"}
	e.Fetch(context.Background(), r, Auth{}, 0, o)
	if got := rc.last(t); got.Header.Get("Accept-Language") != "fr" || got.Header.Get("X-Trace") != "t1" {
		t.Errorf("request header overridden: %v", got.Header)
	}
}

func TestProxy(t *testing.T) {
	t.Parallel()
	// A forward proxy on loopback: it answers for shop.invalid, which
	// has no address, so only a request through the proxy succeeds.
	var mu sync.Mutex
	var seen []string
	proxy := serve(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.RequestURI)
		mu.Unlock()
		if r.URL.Host != "shop.invalid" {
			http.Error(w, "unknown host "+r.URL.Host, http.StatusBadGateway)
			return
		}
		if r.Header.Get("Proxy-Authorization") == "" {
			w.Header().Set("Proxy-Authenticate", `Basic realm="p"`)
			http.Error(w, "auth", http.StatusProxyAuthRequired)
			return
		}
		if r.URL.Path == "/robots.txt" {
			fmt.Fprint(w, "User-agent: *\nDisallow: /secret\n")
			return
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<title>via proxy</title>")
	})
	e := NewEngine()
	o := testOptions()
	pu, _ := url.Parse(proxy.URL)
	pu.User = url.UserPassword("u", "pw")
	o.Proxy = pu.String()
	p := e.Fetch(context.Background(), get("http://shop.invalid/item"), Auth{}, 0, o)
	if !p.OK() || p.Title != "via proxy" {
		t.Fatalf("through the proxy: %+v", p)
	}
	if p := e.Fetch(context.Background(), get("http://shop.invalid/secret"), Auth{}, 0, o); !p.Disallowed {
		t.Errorf("robots.txt fetched through the proxy was not obeyed: %+v", p)
	}
	mu.Lock()
	got := slices.Clone(seen)
	mu.Unlock()
	if !slices.Equal(got, []string{"http://shop.invalid/robots.txt", "http://shop.invalid/item"}) {
		t.Errorf("the proxy saw %v", got)
	}
	// Without the proxy the host does not resolve.
	o.Proxy = ""
	o.Retries = 0
	if p := e.Fetch(context.Background(), get("http://shop.invalid/item"), Auth{}, 0, o); p.OK() {
		t.Errorf("fetched without the proxy: %+v", p)
	}
}

const extractHTMLPage = `<!DOCTYPE html>
<html><head><title>Shop</title>
<link rel="alternate" href="/fr/">
<link rel="Canonical" href="/item/7?ref=canon">
<script type="application/ld+json">
  {"@type": "Product", "name": "Widget", "offers": {"price": "9.99"}}
</script>
<script type="application/ld+json">{not json</script>
<script type="application/ld+json; charset=utf-8">[{"@type":"BreadcrumbList"}]</script>
<script>var x = 1;</script>
</head><body>
<h1 class="title"> Widget </h1>
<a class="img" href="/a.jpg" data-id="1">one</a>
<a class="img" href="/b.jpg">two</a>
<a class="img">no href</a>
<a href="mailto:x@y.z">mail</a>
<ul><li>1</li><li>2</li><li>3</li></ul>
</body></html>`

func TestSelectors(t *testing.T) {
	t.Parallel()
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/plain":
			w.Header().Set("Content-Type", "text/plain")
			fmt.Fprint(w, `{"total":7}`)
		case "/api":
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			fmt.Fprint(w, `{"items":[{"name":"a","price":1.5},{"name":"b","price":2}],"total":2,"meta":{"page":1}}`)
		default:
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, extractHTMLPage)
		}
	})
	e := NewEngine()
	o := testOptions()
	o.IgnoreRobots = true
	o.Selectors = map[string]string{
		"title":   "h1.title",
		"images":  "a.img@href",
		"ids":     "a.img @data-id",
		"mail":    "a[href^='mailto:x@y']",
		"x_title": "xpath://h1",
		"x_hrefs": "xpath://a[@class='img']/@href",
		"x_count": "xpath:count(//li)",
		"x_str":   "xpath:string(//li[2])",
		"j_names": "json:items.#.name",
	}
	p := e.Fetch(context.Background(), get(srv.URL+"/item/7"), Auth{}, 0, o)
	if !p.OK() {
		t.Fatal(p.Error)
	}
	want := map[string][]string{
		"title": {"Widget"}, "images": {srv.URL + "/a.jpg", srv.URL + "/b.jpg"}, "ids": {"1"}, "mail": {"mail"},
		"x_title": {"Widget"}, "x_hrefs": {srv.URL + "/a.jpg", srv.URL + "/b.jpg"}, "x_count": {"3"}, "x_str": {"2"},
		"j_names": {},
	}
	if fmt.Sprint(p.Fields) != fmt.Sprint(want) {
		t.Errorf("fields:\n got %v\nwant %v", p.Fields, want)
	}
	if p.Canonical != srv.URL+"/item/7?ref=canon" {
		t.Errorf("canonical %q", p.Canonical)
	}
	if len(p.JSONLD) != 2 || string(p.JSONLD[0]) != `{"@type":"Product","name":"Widget","offers":{"price":"9.99"}}` ||
		string(p.JSONLD[1]) != `[{"@type":"BreadcrumbList"}]` {
		t.Errorf("JSON-LD: %q", p.JSONLD)
	}

	o.Selectors = map[string]string{
		"names": "json:items.#.name", "total": "json:total", "meta": "json:meta", "none": "json:nope",
		"first": "json:items.0", "css": "h1",
	}
	p = e.Fetch(context.Background(), get(srv.URL+"/api"), Auth{}, 0, o)
	want = map[string][]string{
		"names": {"a", "b"}, "total": {"2"}, "meta": {`{"page":1}`}, "none": {}, "first": {`{"name":"a","price":1.5}`}, "css": {},
	}
	if !p.OK() || fmt.Sprint(p.Fields) != fmt.Sprint(want) {
		t.Errorf("JSON fields:\n got %v (%s)\nwant %v", p.Fields, p.Error, want)
	}
	// JSON served as text/plain is read when a json: field asks.
	p = e.Fetch(context.Background(), get(srv.URL+"/plain"), Auth{}, 0, o)
	if got := fmt.Sprint(p.Fields["total"]); !p.OK() || got != "[7]" {
		t.Errorf("JSON as text/plain: total %s (%s)", got, p.Error)
	}
}

func TestParseSelector(t *testing.T) {
	for in, want := range map[string]Selector{
		"h1":                     {Kind: KindCSS, Expr: "h1"},
		"a@href":                 {Kind: KindCSS, Expr: "a", Attr: "href"},
		"css:img.main @src":      {Kind: KindCSS, Expr: "img.main", Attr: "src"},
		"a[title='a@b']":         {Kind: KindCSS, Expr: "a[title='a@b']"},
		"a:not(.x)":              {Kind: KindCSS, Expr: "a:not(.x)"},
		"xpath://a/@href":        {Kind: KindXPath, Expr: "//a/@href"},
		"XPath: //h1":            {Kind: KindXPath, Expr: "//h1"},
		"json:data.items.#.name": {Kind: KindJSON, Expr: "data.items.#.name"},
	} {
		got, err := ParseSelector(in)
		if err != nil || got.Kind != want.Kind || got.Expr != want.Expr || got.Attr != want.Attr {
			t.Errorf("%q: %+v, %v; want %+v", in, got, err, want)
		}
	}
	for in, msg := range map[string]string{
		"a[":        "invalid CSS selector",
		"@href":     "no CSS selector before @href",
		"xpath://[": "invalid XPath",
		"json:":     "empty json selector",
		"xpath:":    "empty xpath selector",
	} {
		if _, err := ParseSelector(in); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%q: error %v, want %q", in, err, msg)
		}
	}
}

func TestValidateControls(t *testing.T) {
	for _, c := range []struct {
		mod  func(*Options)
		want string
	}{
		{func(o *Options) { o.Selectors = map[string]string{"p": "xpath://["} }, `selectors["p"]: invalid XPath`},
		{func(o *Options) { o.Headers = map[string]string{"Bad Name": "x"} }, `headers["Bad Name"]: not a valid header name`},
		{func(o *Options) { o.Headers = map[string]string{"X": "a\r\nInjected: 1"} }, `headers["X"]: value contains a control character`},
		{func(o *Options) { o.Headers = map[string]string{"host": "x"} }, `headers["host"]: is set by the transport`},
		{func(o *Options) { o.Proxy = "ftp://p:21" }, `proxy: "ftp://p:21": want http://, https:// or socks5://`},
		{func(o *Options) { o.Proxy = "http://u:secret@" }, `proxy: "http://u:***@" has no host`},
	} {
		o := DefaultOptions()
		c.mod(&o)
		err := o.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("error %v, want %q", err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("the proxy password is in the error: %v", err)
		}
	}
}

func TestCharsetDetection(t *testing.T) {
	t.Parallel()
	latin1, _ := charmap.Windows1252.NewEncoder().String(`<html><head><meta charset="windows-1252"><title>Café crème</title></head><body><h1>Crème brûlée</h1></body></html>`)
	sjis, _ := japanese.ShiftJIS.NewEncoder().String(`<html><head><meta http-equiv="Content-Type" content="text/html; charset=Shift_JIS"><title>日本語</title></head></html>`)
	utf16, _ := unicode.UTF16(unicode.LittleEndian, unicode.UseBOM).NewEncoder().String(`<html><head><title>Ünïcode</title></head></html>`)
	headerLatin1, _ := charmap.ISO8859_1.NewEncoder().String(`<html><head><title>Déjà</title></head></html>`)
	pages := map[string]struct{ ct, body string }{
		"/meta":    {"text/html", latin1},
		"/equiv":   {"text/html", sjis},
		"/bom16":   {"text/html", utf16},
		"/bom8":    {"text/html", "\xef\xbb\xbf<title>Straße</title>"},
		"/header":  {"text/html; charset=iso-8859-1", headerLatin1},
		"/utf8":    {"text/html", "<title>naïve</title>"},
		"/unknown": {"text/html", "<title>caf\xe9</title>"}, // no declaration, not UTF-8: windows-1252
	}
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		pg, ok := pages[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", pg.ct)
		io.WriteString(w, pg.body)
	})
	e := NewEngine()
	o := testOptions()
	o.IgnoreRobots = true
	o.Selectors = map[string]string{"h1": "h1"}
	for path, want := range map[string][2]string{
		"/meta": {"Café crème", "windows-1252"}, "/equiv": {"日本語", "shift_jis"}, "/bom16": {"Ünïcode", "utf-16le"},
		"/bom8": {"Straße", "utf-8"}, "/header": {"Déjà", "windows-1252"}, "/utf8": {"naïve", "utf-8"},
		"/unknown": {"café", "windows-1252"},
	} {
		p := e.Fetch(context.Background(), get(srv.URL+path), Auth{}, 0, o)
		if !p.OK() || p.Title != want[0] || p.Charset != want[1] {
			t.Errorf("%s: title %q charset %q (%s), want %q %q", path, p.Title, p.Charset, p.Error, want[0], want[1])
		}
		if path == "/meta" && fmt.Sprint(p.Fields["h1"]) != "[Crème brûlée]" {
			t.Errorf("%s: field %q", path, p.Fields["h1"])
		}
	}
}

func TestContentEncodings(t *testing.T) {
	t.Parallel()
	page := []byte("<html><head><title>compressed</title></head><body>" + strings.Repeat("<p>lorem ipsum</p>", 200) + "</body></html>")
	encode := func(enc string, b []byte) []byte {
		var buf bytes.Buffer
		switch enc {
		case "gzip":
			w := gzip.NewWriter(&buf)
			w.Write(b)
			w.Close()
		case "br":
			w := brotli.NewWriter(&buf)
			w.Write(b)
			w.Close()
		case "zstd":
			// A window within max_body_bytes (a larger one is refused:
			// TestZstdWindowBounded).
			w, _ := zstd.NewWriter(&buf, zstd.WithWindowSize(1<<20))
			w.Write(b)
			w.Close()
		}
		return buf.Bytes()
	}
	var mu sync.Mutex
	accepted := ""
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		accepted = r.Header.Get("Accept-Encoding")
		mu.Unlock()
		enc := strings.TrimPrefix(r.URL.Path, "/")
		body := page
		if strings.HasSuffix(enc, "-bomb") {
			enc = strings.TrimSuffix(enc, "-bomb")
			body = bytes.Repeat([]byte("A"), 4<<20)
		}
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("Content-Encoding", enc)
		w.Write(encode(enc, body))
	})
	e := NewEngine()
	o := testOptions()
	o.IgnoreRobots = true
	o.MaxBodyBytes = 1 << 20
	for _, enc := range []string{"gzip", "br", "zstd"} {
		p := e.Fetch(context.Background(), get(srv.URL+"/"+enc), Auth{}, 0, o)
		if !p.OK() || p.Title != "compressed" || p.Bytes != int64(len(page)) {
			t.Errorf("%s: %+v", enc, p)
		}
		mu.Lock()
		if accepted != AcceptEncoding {
			t.Errorf("Accept-Encoding %q, want %q", accepted, AcceptEncoding)
		}
		mu.Unlock()
		// A small compressed body that decodes past max_body_bytes fails.
		p = e.Fetch(context.Background(), get(srv.URL+"/"+enc+"-bomb"), Auth{}, 0, o)
		if p.OK() || !strings.Contains(p.Error, "body exceeds 1048576 bytes") {
			t.Errorf("%s bomb: %+v", enc, p.Error)
		}
	}
}

func TestBodyHashAndKeptBody(t *testing.T) {
	t.Parallel()
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		if r.URL.Path == "/other" {
			fmt.Fprint(w, "<title>other</title>")
			return
		}
		fmt.Fprint(w, "<title>same</title>")
	})
	e := NewEngine()
	o := testOptions()
	o.IgnoreRobots = true
	a := e.Fetch(context.Background(), get(srv.URL+"/a"), Auth{}, 0, o)
	b := e.Fetch(context.Background(), get(srv.URL+"/b?x=1"), Auth{}, 0, o)
	c := e.Fetch(context.Background(), get(srv.URL+"/other"), Auth{}, 0, o)
	if len(a.BodyHash) != 64 || a.BodyHash != b.BodyHash || a.BodyHash == c.BodyHash {
		t.Errorf("hashes: %q %q %q", a.BodyHash, b.BodyHash, c.BodyHash)
	}
	if a.Body != nil {
		t.Error("body kept without KeepBody")
	}
	o.KeepBody = true
	if p := e.Fetch(context.Background(), get(srv.URL+"/a"), Auth{}, 0, o); string(p.Body) != "<title>same</title>" {
		t.Errorf("kept body %q", p.Body)
	}
}

func TestFetchSitemap(t *testing.T) {
	t.Parallel()
	var base string
	gz := func(s string) []byte {
		var buf bytes.Buffer
		w := gzip.NewWriter(&buf)
		io.WriteString(w, s)
		w.Close()
		return buf.Bytes()
	}
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/robots.txt":
			fmt.Fprintf(w, "User-agent: *\nDisallow: /private/\nSitemap: %s/sitemap_index.xml\nSitemap: /relative.xml\n", base)
		case "/sitemap_index.xml":
			w.Header().Set("Content-Type", "application/xml")
			fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>
<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
  <sitemap><loc>%[1]s/sitemap1.xml</loc><lastmod>2024-01-01</lastmod></sitemap>
  <sitemap><loc> %[1]s/sitemap2.xml.gz </loc></sitemap>
  <sitemap><loc>https://elsewhere.invalid/s.xml</loc></sitemap>
</sitemapindex>`, base)
		case "/sitemap1.xml":
			w.Header().Set("Content-Type", "text/xml")
			fmt.Fprintf(w, `<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
  <url><loc>%[1]s/page/1.html</loc><priority>0.5</priority></url>
  <url><loc>%[1]s/page/2.html#frag</loc></url>
  <url><loc>%[1]s/page/1.html</loc></url>
  <url><loc>https://elsewhere.invalid/x</loc></url>
  <url><loc>ftp://nope/</loc></url>
</urlset>`, base)
		case "/sitemap2.xml.gz":
			w.Header().Set("Content-Type", "application/gzip")
			w.Write(gz(fmt.Sprintf(`<urlset><url><loc>%s/page/3.html</loc></url></urlset>`, base)))
		case "/list.txt":
			fmt.Fprintf(w, "%[1]s/a\n\n%[1]s/b\n", base)
		case "/bad.txt":
			fmt.Fprintf(w, "%s/a\nnot a url\n", base)
		case "/page.html":
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, "<html><body>not a sitemap</body></html>")
		case "/private/s.xml":
			fmt.Fprint(w, "<urlset/>")
		default:
			http.NotFound(w, r)
		}
	})
	base = srv.URL
	host := strings.TrimPrefix(srv.URL, "http://")
	e := NewEngine()
	o := testOptions()
	o.AllowedDomains = []string{host}
	fetch := func(p string) Page { return e.FetchSitemap(context.Background(), get(srv.URL+p), Auth{}, o) }

	if p := fetch("/robots.txt"); !p.OK() || !p.Sitemap ||
		!slices.Equal(p.Sitemaps, []string{base + "/sitemap_index.xml", base + "/relative.xml"}) || len(p.Links) != 0 {
		t.Errorf("robots.txt: %+v", p)
	}
	if p := fetch("/sitemap_index.xml"); !p.OK() || !slices.Equal(p.Sitemaps, []string{base + "/sitemap1.xml", base + "/sitemap2.xml.gz"}) {
		t.Errorf("index: %+v", p)
	}
	if p := fetch("/sitemap1.xml"); !p.OK() || !slices.Equal(p.Links, []string{base + "/page/1.html", base + "/page/2.html"}) {
		t.Errorf("urlset: %+v", p)
	}
	if p := fetch("/sitemap2.xml.gz"); !p.OK() || !slices.Equal(p.Links, []string{base + "/page/3.html"}) {
		t.Errorf("gzip urlset: %+v", p)
	}
	if p := fetch("/list.txt"); !p.OK() || !slices.Equal(p.Links, []string{base + "/a", base + "/b"}) {
		t.Errorf("text: %+v", p)
	}
	for path, want := range map[string]string{
		"/bad.txt":       `sitemap: text sitemap line 2: "not a url" is not an absolute http(s) URL`,
		"/page.html":     "sitemap: root element <html>: want <urlset> or <sitemapindex>",
		"/missing.xml":   "HTTP 404",
		"/private/s.xml": "disallowed by robots.txt",
	} {
		if p := fetch(path); p.OK() || p.Error != want {
			t.Errorf("%s: error %q, want %q", path, p.Error, want)
		}
	}
}

func TestSitemapDenyPrivate(t *testing.T) {
	t.Parallel()
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/robots.txt":
			http.NotFound(w, r)
		default:
			fmt.Fprint(w, `<urlset><url><loc>http://127.0.0.1:1/admin</loc></url><url><loc>http://10.0.0.7/x</loc></url><url><loc>http://[::1]:2/y</loc></url></urlset>`)
		}
	})
	e := NewEngine()
	o := testOptions()
	o.DenyPrivate = true
	// The sitemap itself is the user's when typed (like a seed): fetched;
	// what it lists is not: private addresses are dropped.
	if p := e.FetchSitemap(context.Background(), get(srv.URL+"/sitemap.xml"), Auth{}, o); !strings.HasPrefix(p.Error, "refused private address") {
		t.Errorf("a sitemap that is not typed (a sitemap index lists it): %+v", p)
	}
	o.TypedURLs = []string{srv.URL + "/sitemap.xml"}
	p := e.FetchSitemap(context.Background(), get(srv.URL+"/sitemap.xml"), Auth{}, o)
	if !p.OK() || len(p.Links) != 0 {
		t.Errorf("deny_private: %+v", p)
	}
	o.DenyPrivate = false
	if p := e.FetchSitemap(context.Background(), get(srv.URL+"/sitemap.xml"), Auth{}, o); len(p.Links) != 3 {
		t.Errorf("without deny_private: %+v", p)
	}
}

// The values of URL attributes (@href, @src, srcset, the lazy-loading
// data-src…) are made absolute against the page, or its <base href>, as
// a browser resolves them; other attributes stay as written. A relative
// ../page/78.html came out as written.
func TestURLAttributesAreAbsolute(t *testing.T) {
	t.Parallel()
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		switch r.URL.Path {
		case "/shop/list/index.html":
			fmt.Fprint(w, `<html><body>
<a class="p" href="../page/78.html">78</a><a class="p" href="?page=2">next</a><a class="p" href="#top">top</a>
<a class="p" href="mailto:x@y.z">mail</a><a class="p" href="https://other.example/x">other</a><a class="p" href="">empty</a>
<img src="img/a.jpg" srcset="img/a-2x.jpg 2x, /img/a-3x.jpg 3x" data-src="lazy/a.jpg" data-id="../not-a-url" alt="../alt">
<form action="/search"></form></body></html>`)
		case "/based.html":
			fmt.Fprint(w, `<html><head><base href="https://cdn.example/assets/"></head><body><img src="x.png"><a href="../y.html">y</a></body></html>`)
		}
	})
	e := NewEngine()
	o := testOptions()
	o.IgnoreRobots = true
	o.Selectors = map[string]string{
		"links": "a.p@href", "src": "img@src", "srcset": "img@srcset", "lazy": "img@data-src", "id": "img@data-id",
		"alt": "img@alt", "action": "form@action", "x_src": "xpath://img/@src", "x_id": "xpath://img/@data-id",
	}
	page := srv.URL + "/shop/list/index.html"
	p := e.Fetch(context.Background(), get(page), Auth{}, 0, o)
	if !p.OK() {
		t.Fatal(p.Error)
	}
	want := map[string][]string{
		"links": {srv.URL + "/shop/page/78.html", page + "?page=2", page + "#top", "mailto:x@y.z", "https://other.example/x", ""},
		"src":   {srv.URL + "/shop/list/img/a.jpg"}, "x_src": {srv.URL + "/shop/list/img/a.jpg"},
		"srcset": {srv.URL + "/shop/list/img/a-2x.jpg 2x, " + srv.URL + "/img/a-3x.jpg 3x"},
		"lazy":   {srv.URL + "/shop/list/lazy/a.jpg"}, "id": {"../not-a-url"}, "x_id": {"../not-a-url"}, "alt": {"../alt"},
		"action": {srv.URL + "/search"},
	}
	if fmt.Sprint(p.Fields) != fmt.Sprint(want) {
		t.Errorf("fields:\n got %v\nwant %v", p.Fields, want)
	}
	o.Selectors = map[string]string{"src": "img@src", "href": "a@href"}
	p = e.Fetch(context.Background(), get(srv.URL+"/based.html"), Auth{}, 0, o)
	want = map[string][]string{"src": {"https://cdn.example/assets/x.png"}, "href": {"https://cdn.example/y.html"}}
	if !p.OK() || fmt.Sprint(p.Fields) != fmt.Sprint(want) {
		t.Errorf("<base href>: got %v (%s), want %v", p.Fields, p.Error, want)
	}
}
