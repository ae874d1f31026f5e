package crawl

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batoncrawl/baton/roles"
)

// testOptions are DefaultOptions with quick retries.
func testOptions() Options {
	o := DefaultOptions()
	o.RetryBackoff = 20 * time.Millisecond
	return o
}

func serve(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func get(u string) roles.Request { return roles.Request{TaskID: 1, URL: u, Method: "GET"} }

// received is what the server saw of one request.
type received struct {
	Method  string
	Path    string
	Query   map[string][]string
	Header  http.Header
	Cookies map[string]string
	Body    string
	At      time.Time
}

// recorder records the requests of the paths it serves (robots.txt apart).
type recorder struct {
	mu   sync.Mutex
	reqs []received
}

func (rc *recorder) record(r *http.Request) received {
	body, _ := io.ReadAll(r.Body)
	cookies := map[string]string{}
	for _, c := range r.Cookies() {
		cookies[c.Name] = c.Value
	}
	rv := received{Method: r.Method, Path: r.URL.Path, Query: r.URL.Query(), Header: r.Header.Clone(), Cookies: cookies, Body: string(body), At: time.Now()}
	rc.mu.Lock()
	rc.reqs = append(rc.reqs, rv)
	rc.mu.Unlock()
	return rv
}

func (rc *recorder) all() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.reqs)
}

func (rc *recorder) last(t *testing.T) received {
	t.Helper()
	all := rc.all()
	if len(all) == 0 {
		t.Fatal("the server received no request")
	}
	return all[len(all)-1]
}

func TestRequestIsHonoured(t *testing.T) {
	t.Parallel()
	var rc recorder
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		rc.record(r)
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, "ok")
	})
	e := NewEngine()
	ctx := context.Background()

	// GET: parameters merged into the query, headers, cookies, bearer.
	p := e.Fetch(ctx, roles.Request{
		URL: srv.URL + "/search?a=1&b=2", Method: "get",
		Parameters: map[string]string{"b": "3", "c": "x y"},
		Header:     map[string]string{"X-Test": "v", "User-Agent": "custom/1", "Accept-Language": "fr"},
	}, Auth{Cookie: map[string]string{"sid": "abc", "lang": "en"}, Authorization: map[string]string{"bearer": "tok"}}, 0, testOptions())
	if !p.OK() || p.StatusCode != 200 || p.Attempts != 1 {
		t.Fatalf("GET: %+v", p)
	}
	got := rc.last(t)
	if got.Method != "GET" || got.Path != "/search" {
		t.Errorf("method/path: %s %s", got.Method, got.Path)
	}
	if fmt.Sprint(got.Query) != fmt.Sprint(map[string][]string{"a": {"1"}, "b": {"3"}, "c": {"x y"}}) {
		t.Errorf("query: %v", got.Query)
	}
	if got.Header.Get("X-Test") != "v" || got.Header.Get("User-Agent") != "custom/1" || got.Header.Get("Accept-Language") != "fr" {
		t.Errorf("headers: %v", got.Header)
	}
	if got.Cookies["sid"] != "abc" || got.Cookies["lang"] != "en" {
		t.Errorf("cookies: %v", got.Cookies)
	}
	if got.Header.Get("Authorization") != "bearer tok" {
		t.Errorf("authorization: %q", got.Header.Get("Authorization"))
	}

	// POST: a JSON string body is sent as is, with the header's type.
	p = e.Fetch(ctx, roles.Request{
		URL: srv.URL + "/form", Method: "POST", Body: json.RawMessage(`"a=1&b=two"`),
		Header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"},
	}, Auth{Authorization: map[string]string{"Authorization": "Basic dXNlcjpwdw==", "X-Api-Key": "k1"}}, 0, testOptions())
	got = rc.last(t)
	if !p.OK() || got.Method != "POST" || got.Body != "a=1&b=two" || got.Header.Get("Content-Type") != "application/x-www-form-urlencoded" {
		t.Errorf("POST: %+v, server saw %s %q %q", p, got.Method, got.Body, got.Header.Get("Content-Type"))
	}
	if got.Header.Get("Authorization") != "Basic dXNlcjpwdw==" || got.Header.Get("X-Api-Key") != "k1" {
		t.Errorf("POST auth headers: %v", got.Header)
	}

	// PUT: other JSON is sent as JSON, typed application/json.
	p = e.Fetch(ctx, roles.Request{URL: srv.URL + "/item/7", Method: "PUT", Body: json.RawMessage(`{"name":"x","n":[1,2]}`)}, Auth{}, 0, testOptions())
	got = rc.last(t)
	if !p.OK() || got.Method != "PUT" || got.Body != `{"name":"x","n":[1,2]}` || got.Header.Get("Content-Type") != "application/json" {
		t.Errorf("PUT: %+v, server saw %s %q %q", p, got.Method, got.Body, got.Header.Get("Content-Type"))
	}

	// Other methods, and the default User-Agent.
	for _, m := range []string{"DELETE", "PATCH", "HEAD", "OPTIONS", ""} {
		p = e.Fetch(ctx, roles.Request{URL: srv.URL + "/m", Method: m}, Auth{}, 0, testOptions())
		want := m
		if m == "" {
			want = "GET"
		}
		if got = rc.last(t); !p.OK() || got.Method != want {
			t.Errorf("method %q: %+v, server saw %s", m, p, got.Method)
		}
		if got.Header.Get("User-Agent") != DefaultUserAgent {
			t.Errorf("user agent %q", got.Header.Get("User-Agent"))
		}
	}

	// A bad request is an error, never a panic.
	for _, r := range []roles.Request{{URL: "ftp://x/"}, {URL: ""}, {URL: srv.URL, Method: "BREW"}, {URL: "http://%zz"}} {
		if p := e.Fetch(ctx, r, Auth{}, 0, testOptions()); p.OK() {
			t.Errorf("%+v: no error", r)
		}
	}
	if p := e.Fetch(ctx, get(srv.URL), Auth{}, -1, testOptions()); p.OK() {
		t.Error("negative depth accepted")
	}
}

func TestCookiesStayWithTheirFetch(t *testing.T) {
	t.Parallel()
	var rc recorder
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		rc.record(r)
		switch r.URL.Path {
		case "/login": // sets a session cookie, then redirects
			http.SetCookie(w, &http.Cookie{Name: "session", Value: "s1", Path: "/"})
			http.Redirect(w, r, "/account", http.StatusFound)
		default:
			fmt.Fprint(w, "ok")
		}
	})
	e := NewEngine()
	o := testOptions()
	o.IgnoreRobots = true
	p := e.Fetch(context.Background(), get(srv.URL+"/login"), Auth{}, 0, o)
	if !p.OK() || !strings.HasSuffix(p.FinalURL, "/account") {
		t.Fatalf("login: %+v", p)
	}
	if got := rc.last(t); got.Path != "/account" || got.Cookies["session"] != "s1" {
		t.Errorf("the redirect did not carry the cookie set on the way: %v", got.Cookies)
	}
	e.Fetch(context.Background(), get(srv.URL+"/other"), Auth{}, 0, o)
	if got := rc.last(t); len(got.Cookies) != 0 {
		t.Errorf("a later fetch sent cookies of an earlier one: %v", got.Cookies)
	}
}

const productHTML = `<!DOCTYPE html>
<html><head><title>
  Blue Widget </title></head>
<body>
<h1 class="title"> Blue   Widget </h1>
<div class="item"><span class="price"> $9.99 </span></div>
<div class="item"><span class="price">$12.50</span></div>
<div class="item"><span class="price"><b>$1</b>.00</span></div>
<svg><title>icon</title></svg>
</body></html>`

func TestExtraction(t *testing.T) {
	t.Parallel()
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/product":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprint(w, productHTML)
		case "/api":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"title":"<title>nope</title>"}`)
		default:
			http.NotFound(w, r)
		}
	})
	e := NewEngine()
	o := testOptions()
	o.Selectors = map[string]string{"name": "h1.title", "price": ".item .price", "none": "table td", "both": "h1, .price"}
	p := e.Fetch(context.Background(), get(srv.URL+"/product"), Auth{}, 0, o)
	if !p.OK() {
		t.Fatal(p.Error)
	}
	if p.Title != "Blue Widget" {
		t.Errorf("title %q", p.Title)
	}
	want := map[string][]string{
		"name":  {"Blue   Widget"},
		"price": {"$9.99", "$12.50", "$1.00"},
		"none":  {},
		"both":  {"Blue   Widget", "$9.99", "$12.50", "$1.00"},
	}
	if fmt.Sprint(p.Fields) != fmt.Sprint(want) {
		t.Errorf("fields %q, want %q", p.Fields, want)
	}
	if p.ContentType != "text/html; charset=utf-8" || p.Bytes != int64(len(productHTML)) || p.FinalURL != srv.URL+"/product" {
		t.Errorf("page %+v", p)
	}

	p = e.Fetch(context.Background(), get(srv.URL+"/api"), Auth{}, 0, o)
	if !p.OK() || p.Title != "" || len(p.Fields["price"]) != 0 || p.ContentType != "application/json" {
		t.Errorf("non-HTML page: %+v", p)
	}
	p = e.Fetch(context.Background(), get(srv.URL+"/missing"), Auth{}, 0, o)
	if p.Error != "HTTP 404" || p.StatusCode != 404 || p.Attempts != 1 {
		t.Errorf("404: %+v", p)
	}
}

func TestLinks(t *testing.T) {
	t.Parallel()
	var srvURL string
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/dir/page.html":
			host := strings.TrimPrefix(srvURL, "http://")
			fmt.Fprintf(w, `<html><body>
<a href="/a">a</a>
<a href="/a#frag">a again</a>
<a href="HTTP://%s/a">a, upper-case scheme</a>
<a href="b/../../a">a, dot segments</a>
<a href="next.html">relative</a>
<a href="./next.html?z=1&a=2">query</a>
<a href="next.html?a=2&z=1">same query, other order</a>
<a href="#top">fragment only</a>
<a href="mailto:x@example.test">mail</a>
<a href="javascript:void(0)">js</a>
<a href="ftp://example.test/f">ftp</a>
<a href="http://sub.example.test:80/x">subdomain, default port</a>
<a href="https://EXAMPLE.test/y">allowed domain</a>
<a href="http://notexample.test/z">other domain</a>
<a href="http://example.test.evil.test/z">suffix trick</a>
<a>no href</a>
</body></html>`, host)
		case "/based.html":
			fmt.Fprint(w, `<html><head><base href="http://example.test/base/"></head><body><a href="rel.html">r</a></body></html>`)
		default:
			http.NotFound(w, r)
		}
	})
	srvURL = srv.URL
	e := NewEngine()
	o := testOptions()
	o.Follow, o.MaxDepth = true, 2
	o.AllowedDomains = []string{"127.0.0.1", "example.test"}

	p := e.Fetch(context.Background(), get(srv.URL+"/dir/page.html"), Auth{}, 0, o)
	want := []string{
		srv.URL + "/a",
		srv.URL + "/dir/next.html",
		srv.URL + "/dir/next.html?a=2&z=1",
		"http://sub.example.test/x",
		"https://example.test/y",
	}
	if !p.OK() || !slices.Equal(p.Links, want) {
		t.Errorf("links:\n%s\nwant:\n%s", strings.Join(p.Links, "\n"), strings.Join(want, "\n"))
	}

	// Depth: links found at depth >= MaxDepth are not returned.
	if p := e.Fetch(context.Background(), get(srv.URL+"/dir/page.html"), Auth{}, 1, o); len(p.Links) != len(want) {
		t.Errorf("depth 1 of 2: %d links", len(p.Links))
	}
	if p := e.Fetch(context.Background(), get(srv.URL+"/dir/page.html"), Auth{}, 2, o); len(p.Links) != 0 || !p.OK() {
		t.Errorf("depth 2 of 2: %v %s", p.Links, p.Error)
	}
	// Not following: no links.
	nf := o
	nf.Follow = false
	if p := e.Fetch(context.Background(), get(srv.URL+"/dir/page.html"), Auth{}, 0, nf); len(p.Links) != 0 {
		t.Errorf("Follow false: %v", p.Links)
	}
	// No AllowedDomains: every http(s) link.
	any := o
	any.AllowedDomains = nil
	if p := e.Fetch(context.Background(), get(srv.URL+"/dir/page.html"), Auth{}, 0, any); len(p.Links) != len(want)+2 {
		t.Errorf("no domain restriction: %v", p.Links)
	}
	// An entry with a port matches that port only.
	port := o
	port.AllowedDomains = []string{"127.0.0.1:1"}
	if p := e.Fetch(context.Background(), get(srv.URL+"/dir/page.html"), Auth{}, 0, port); len(p.Links) != 0 {
		t.Errorf("other port allowed: %v", p.Links)
	}
	// <base href> is honoured.
	if p := e.Fetch(context.Background(), get(srv.URL+"/based.html"), Auth{}, 0, o); !slices.Equal(p.Links, []string{"http://example.test/base/rel.html"}) {
		t.Errorf("base href: %v", p.Links)
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	o := DefaultOptions()
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	o.Selectors = map[string]string{"title": "h1", "price": "a["}
	err := o.Validate()
	if err == nil || !strings.HasPrefix(err.Error(), `selectors["price"]: invalid CSS selector "a[": `) {
		t.Fatalf("Validate: %v", err)
	}
	p := NewEngine().Fetch(context.Background(), get("http://127.0.0.1:1/"), Auth{}, 0, o)
	if !strings.Contains(p.Error, `selectors["price"]`) || p.Attempts != 0 {
		t.Errorf("Fetch with invalid options: %+v", p)
	}
	for field, mod := range map[string]func(*Options){
		`selectors[""]`:      func(o *Options) { o.Selectors = map[string]string{"": "a"} },
		`selectors["x"]`:     func(o *Options) { o.Selectors = map[string]string{"x": " "} },
		"allowed_domains[1]": func(o *Options) { o.AllowedDomains = []string{"ok.test", "http://bad.test/"} },
		"max_depth":          func(o *Options) { o.MaxDepth = -1 },
		"parallelism":        func(o *Options) { o.Parallelism = -2 },
		"retries":            func(o *Options) { o.Retries = -1 },
		"max_body_bytes":     func(o *Options) { o.MaxBodyBytes = -1 },
		"timeout":            func(o *Options) { o.Timeout = -time.Second },
		"delay":              func(o *Options) { o.Delay = -time.Second },
		"max_redirects":      func(o *Options) { o.MaxRedirects = -2 },
		"user_agent":         func(o *Options) { o.UserAgent = "a\nb" },
		"retry_backoff":      func(o *Options) { o.RetryBackoff = -1 },
		"max_retry_wait":     func(o *Options) { o.MaxRetryWait = -1 },
		"allowed_domains[0]": func(o *Options) { o.AllowedDomains = []string{""} },
	} {
		o := DefaultOptions()
		mod(&o)
		if err := o.Validate(); err == nil || !strings.HasPrefix(err.Error(), field+": ") {
			t.Errorf("%s: Validate = %v", field, err)
		}
	}
	// JSON round trip keeps the names of the brief.
	b, _ := json.Marshal(DefaultOptions())
	for _, k := range []string{`"follow"`, `"max_depth"`, `"ignore_robots"`, `"delay"`, `"parallelism"`, `"retries"`, `"max_body_bytes"`, `"timeout"`, `"max_redirects"`, `"user_agent"`, `"deny_private"`} {
		if !strings.Contains(string(b), k) {
			t.Errorf("JSON lacks %s: %s", k, b)
		}
	}
}

func TestRobots(t *testing.T) {
	t.Parallel()
	var robotsHits, privateHits atomic.Int32
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/robots.txt":
			robotsHits.Add(1)
			fmt.Fprint(w, "User-agent: *\nDisallow: /private/\n\nUser-agent: baton\nDisallow: /private/\nDisallow: /nobaton/\n")
		case strings.HasPrefix(r.URL.Path, "/private/"):
			privateHits.Add(1)
			fmt.Fprint(w, "secret")
		default:
			fmt.Fprint(w, "<title>ok</title>")
		}
	})
	e := NewEngine()
	o := testOptions()
	var wg sync.WaitGroup
	pages := make([]Page, 8)
	for i := range pages { // concurrent first fetches share one robots.txt request
		wg.Add(1)
		go func() {
			defer wg.Done()
			pages[i] = e.Fetch(context.Background(), get(srv.URL+"/private/x"), Auth{}, 0, o)
		}()
	}
	wg.Wait()
	for _, p := range pages {
		if p.Error != "disallowed by robots.txt" || !p.Disallowed || p.Attempts != 0 || p.StatusCode != 0 {
			t.Errorf("private page: %+v", p)
		}
	}
	if p := e.Fetch(context.Background(), get(srv.URL+"/nobaton/x"), Auth{}, 0, o); p.Error != "disallowed by robots.txt" {
		t.Errorf("baton's own group: %+v", p)
	}
	other := o
	other.UserAgent = "otherbot/1"
	if p := e.Fetch(context.Background(), get(srv.URL+"/nobaton/x"), Auth{}, 0, other); !p.OK() {
		t.Errorf("another agent is not in baton's group: %+v", p)
	}
	if p := e.Fetch(context.Background(), get(srv.URL+"/public"), Auth{}, 0, o); !p.OK() || p.Title != "ok" {
		t.Errorf("public page: %+v", p)
	}
	if privateHits.Load() != 0 {
		t.Errorf("a disallowed page was requested %d times", privateHits.Load())
	}
	if n := robotsHits.Load(); n != 1 {
		t.Errorf("robots.txt requested %d times, want 1 (cached)", n)
	}
	ign := o
	ign.IgnoreRobots = true
	if p := e.Fetch(context.Background(), get(srv.URL+"/private/x"), Auth{}, 0, ign); !p.OK() || privateHits.Load() != 1 {
		t.Errorf("IgnoreRobots: %+v", p)
	}

	// A robots.txt answered with 5xx disallows all (for a while).
	srv5 := serve(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, "ok")
	})
	if p := e.Fetch(context.Background(), get(srv5.URL+"/"), Auth{}, 0, o); !strings.HasPrefix(p.Error, "disallowed by robots.txt") || !strings.Contains(p.Error, "503") {
		t.Errorf("robots.txt 503: %+v", p)
	}
}

// serverTimes serves "ok" and records when each non-robots request arrived.
func serverTimes(t *testing.T, robots string) (*httptest.Server, *recorder) {
	var rc recorder
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			if robots == "" {
				http.NotFound(w, r)
				return
			}
			fmt.Fprint(w, robots)
			return
		}
		rc.record(r)
		fmt.Fprint(w, "ok")
	})
	return srv, &rc
}

func assertGaps(t *testing.T, reqs []received, n int, min time.Duration) {
	t.Helper()
	if len(reqs) != n {
		t.Fatalf("%d requests, want %d", len(reqs), n)
	}
	slices.SortFunc(reqs, func(a, b received) int { return a.At.Compare(b.At) })
	for i := 1; i < len(reqs); i++ {
		if gap := reqs[i].At.Sub(reqs[i-1].At); gap < min {
			t.Errorf("gap %d: %s, want >= %s", i, gap, min)
		}
	}
}

func TestCrawlDelay(t *testing.T) {
	t.Parallel()
	srv, rc := serverTimes(t, "User-agent: *\nCrawl-delay: 0.6\nDisallow: /private/\n")
	e := NewEngine()
	o := testOptions()
	for _, p := range []string{"/a", "/b", "/c"} {
		if pg := e.Fetch(context.Background(), get(srv.URL+p), Auth{}, 0, o); !pg.OK() {
			t.Fatal(pg.Error)
		}
	}
	assertGaps(t, rc.all(), 3, 600*time.Millisecond)

	// Ignoring robots.txt ignores its Crawl-delay too: the gap is then
	// Delay's, which is smaller (checked as a lower bound only).
	srv2, rc2 := serverTimes(t, "User-agent: *\nCrawl-delay: 30\n")
	o.IgnoreRobots, o.Delay = true, 50*time.Millisecond
	for _, p := range []string{"/a", "/b"} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		pg := e.Fetch(ctx, get(srv2.URL+p), Auth{}, 0, o)
		cancel()
		if !pg.OK() {
			t.Fatal(pg.Error)
		}
	}
	assertGaps(t, rc2.all(), 2, 50*time.Millisecond)
}

func TestDelayAcrossConcurrentFetches(t *testing.T) {
	t.Parallel()
	srv, rc := serverTimes(t, "")
	e := NewEngine()
	o := testOptions()
	o.Delay, o.Parallelism = 150*time.Millisecond, 1
	var wg sync.WaitGroup
	for i := 0; i < 5; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if p := e.Fetch(context.Background(), get(fmt.Sprintf("%s/p%d", srv.URL, i)), Auth{}, 0, o); !p.OK() {
				t.Error(p.Error)
			}
		}()
	}
	wg.Wait()
	assertGaps(t, rc.all(), 5, o.Delay)

	// A delay that cannot end before the deadline fails at once.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	o.Delay = time.Hour
	e.Fetch(ctx, get(srv.URL+"/x"), Auth{}, 0, o)
	if p := e.Fetch(ctx, get(srv.URL+"/y"), Auth{}, 0, o); !strings.Contains(p.Error, "deadline") {
		t.Errorf("hour-long delay: %+v", p)
	}
}

func TestParallelismPerDomain(t *testing.T) {
	t.Parallel()
	var cur, peak atomic.Int32
	var total atomic.Int32
	handler := func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		total.Add(1)
		n := cur.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		select { // simulated slowness, server side
		case <-time.After(15 * time.Millisecond):
		case <-r.Context().Done():
		}
		cur.Add(-1) // before the response, so the client cannot start another first
		fmt.Fprint(w, "ok")
	}
	srv := serve(t, handler)
	e := NewEngine()
	o := testOptions()
	o.Parallelism = 3
	var wg sync.WaitGroup
	for i := 0; i < 30; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			oo := o
			if i%2 == 1 { // callers with a smaller bound share the domain
				oo.Parallelism = 2
			}
			if p := e.Fetch(context.Background(), get(fmt.Sprintf("%s/p%d", srv.URL, i)), Auth{}, 0, oo); !p.OK() {
				t.Error(p.Error)
			}
		}()
	}
	wg.Wait()
	if total.Load() != 30 {
		t.Fatalf("%d requests, want 30", total.Load())
	}
	if p := peak.Load(); p > 3 {
		t.Errorf("%d concurrent requests to one domain, want <= 3", p)
	} else {
		t.Logf("peak concurrency %d (bound 3)", p)
	}
}

func TestRetries(t *testing.T) {
	t.Parallel()
	var (
		mu       sync.Mutex
		attempts = map[string][]time.Time{}
		dates    = map[string]time.Time{}
	)
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		mu.Lock()
		attempts[r.URL.Path] = append(attempts[r.URL.Path], time.Now())
		n := len(attempts[r.URL.Path])
		mu.Unlock()
		switch r.URL.Path {
		case "/503twice":
			if n <= 2 {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
		case "/429":
			if n == 1 {
				w.Header().Set("Retry-After", "1")
				w.WriteHeader(http.StatusTooManyRequests)
				return
			}
		case "/503date":
			if n == 1 {
				d := time.Now().Add(2 * time.Second).UTC().Truncate(time.Second)
				mu.Lock()
				dates[r.URL.Path] = d
				mu.Unlock()
				w.Header().Set("Retry-After", d.Format(http.TimeFormat))
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
		case "/always503":
			w.WriteHeader(http.StatusBadGateway)
			return
		case "/later":
			w.Header().Set("Retry-After", "120")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		case "/404":
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, "ok")
	})
	e := NewEngine()
	o := testOptions()
	o.RetryBackoff = 100 * time.Millisecond
	gaps := func(path string) []time.Duration {
		mu.Lock()
		defer mu.Unlock()
		var out []time.Duration
		for i := 1; i < len(attempts[path]); i++ {
			out = append(out, attempts[path][i].Sub(attempts[path][i-1]))
		}
		return out
	}
	var wg sync.WaitGroup
	run := func(path string, check func(Page)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			check(e.Fetch(context.Background(), get(srv.URL+path), Auth{}, 0, o))
		}()
	}
	run("/503twice", func(p Page) {
		g := gaps("/503twice")
		if !p.OK() || p.Attempts != 3 || len(g) != 2 || g[0] < 100*time.Millisecond || g[1] < 200*time.Millisecond {
			t.Errorf("503 twice: %+v, gaps %v (want >= 100ms, 200ms)", p, g)
		}
	})
	run("/429", func(p Page) {
		g := gaps("/429")
		if !p.OK() || p.Attempts != 2 || len(g) != 1 || g[0] < time.Second {
			t.Errorf("429 Retry-After 1: %+v, gaps %v (want >= 1s)", p, g)
		}
	})
	run("/503date", func(p Page) {
		mu.Lock()
		at, d := attempts["/503date"], dates["/503date"]
		mu.Unlock()
		if !p.OK() || p.Attempts != 2 || len(at) != 2 || at[1].Before(d) {
			t.Errorf("503 Retry-After date %s: %+v, attempts at %v", d, p, at)
		}
	})
	run("/always503", func(p Page) {
		if p.Error != "HTTP 502" || p.Attempts != 3 || p.StatusCode != 502 {
			t.Errorf("always 502: %+v", p)
		}
	})
	run("/later", func(p Page) {
		if p.Attempts != 1 || !strings.Contains(p.Error, "Retry-After 2m0s exceeds") {
			t.Errorf("Retry-After beyond the cap: %+v", p)
		}
	})
	run("/404", func(p Page) {
		if p.Error != "HTTP 404" || p.Attempts != 1 {
			t.Errorf("404 is not transient: %+v", p)
		}
	})
	wg.Wait()
}

func TestRetryConnectionErrorAndCancel(t *testing.T) {
	t.Parallel()
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	e := NewEngine()
	o := testOptions()
	o.IgnoreRobots = true
	p := e.Fetch(context.Background(), get(dead.URL+"/"), Auth{}, 0, o)
	if !strings.HasPrefix(p.Error, "connection error") || p.Attempts != 3 {
		t.Errorf("connection refused: %+v", p)
	}

	// Cancelling during the backoff ends the Fetch at once.
	ctx, cancel := context.WithCancel(context.Background())
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "20")
		w.WriteHeader(http.StatusServiceUnavailable)
		w.(http.Flusher).Flush()
		cancel()
	})
	start := time.Now()
	p = e.Fetch(ctx, get(srv.URL+"/"), Auth{}, 0, o)
	if !strings.Contains(p.Error, "cancel") || time.Since(start) > 10*time.Second {
		t.Errorf("cancelled: %+v after %s", p, time.Since(start))
	}
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for in, want := range map[string]time.Duration{
		"0": 0, "7": 7 * time.Second, " 12 ": 12 * time.Second,
		"Fri, 02 Jan 2026 03:04:35 GMT": 30 * time.Second,
		"Fri, 02 Jan 2026 03:04:00 GMT": 0, // in the past
	} {
		if got, ok := parseRetryAfter(in, now); !ok || got != want {
			t.Errorf("%q: %s %v, want %s", in, got, ok, want)
		}
	}
	for _, in := range []string{"", "-1", "soon", "1.5"} {
		if _, ok := parseRetryAfter(in, now); ok {
			t.Errorf("%q accepted", in)
		}
	}
}

func rolesTask() roles.Task {
	t := roles.EmptyTask()
	t.Cookie["c"] = "1"
	t.Authorization["Bearer"] = "x"
	return t
}
