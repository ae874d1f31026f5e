package demosite

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"
)

// simpleCrawl is an independent, minimal crawler: BFS from "/", following
// <a href> within the site's host, deduplicating by path, obeying the
// site's robots.txt Disallow lines when followRobots. It returns the paths
// it requested.
func simpleCrawl(t *testing.T, base string, followRobots bool) []string {
	t.Helper()
	root, _ := url.Parse(base)
	var disallow []string
	if followRobots {
		resp, err := http.Get(base + "/robots.txt")
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.EqualFold(strings.TrimSpace(k), "disallow") {
				if v = strings.TrimSpace(v); v != "" {
					disallow = append(disallow, v)
				}
			}
		}
		resp.Body.Close()
	}
	blocked := func(p string) bool {
		for _, d := range disallow {
			if strings.HasPrefix(p, d) {
				return true
			}
		}
		return false
	}
	seen := map[string]bool{"/": true}
	queue := []string{"/"}
	var fetched []string
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		fetched = append(fetched, p)
		resp, err := http.Get(base + p)
		if err != nil {
			t.Fatal(err)
		}
		pageURL := resp.Request.URL
		z := html.NewTokenizer(resp.Body)
		for {
			tt := z.Next()
			if tt == html.ErrorToken {
				break
			}
			if tt != html.StartTagToken {
				continue
			}
			tok := z.Token()
			if tok.Data != "a" {
				continue
			}
			for _, a := range tok.Attr {
				if a.Key != "href" {
					continue
				}
				u, err := pageURL.Parse(a.Val)
				if err != nil || u.Host != root.Host {
					continue
				}
				if !seen[u.Path] && !(followRobots && blocked(u.Path)) {
					seen[u.Path] = true
					queue = append(queue, u.Path)
				}
			}
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	sort.Strings(fetched)
	return fetched
}

func smallConfig() Config {
	c := DefaultConfig()
	c.SlowPage = 20 * time.Millisecond
	return c
}

func TestReachableMatchesCrawl(t *testing.T) {
	for _, followRobots := range []bool{true, false} {
		site := New(smallConfig())
		srv := httptest.NewServer(site)
		got := simpleCrawl(t, srv.URL, followRobots)
		srv.Close()
		want := site.Reachable(followRobots)
		if !slices.Equal(got, want) {
			t.Fatalf("followRobots=%v: crawl found %d paths, Reachable %d\nonly crawled: %v\nonly reachable: %v",
				followRobots, len(got), len(want), minus(got, want), minus(want, got))
		}
		for _, p := range got {
			if n := site.Hits(p); n != 1 {
				t.Errorf("followRobots=%v: %s hit %d times, want 1", followRobots, p, n)
			}
		}
		for _, p := range site.Disallowed() {
			if followRobots && site.Hits(p) != 0 {
				t.Errorf("disallowed %s was fetched", p)
			}
		}
	}
}

func minus(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

func TestDefaultSiteShape(t *testing.T) {
	cfg := DefaultConfig()
	site := New(cfg)
	all := site.Reachable(false)
	polite := site.Reachable(true)
	var pages, private, missing int
	for _, p := range all {
		switch {
		case strings.HasPrefix(p, "/page/"):
			pages++
		case strings.HasPrefix(p, "/private/"):
			private++
		case strings.HasPrefix(p, "/missing/"):
			missing++
		}
	}
	if pages != cfg.Pages {
		t.Errorf("%d product pages reachable, want all %d", pages, cfg.Pages)
	}
	if private != len(site.Disallowed()) || private < 2 {
		t.Errorf("%d private pages reachable without robots, Disallowed has %d", private, len(site.Disallowed()))
	}
	if missing != cfg.BrokenLinks || !slices.Equal(site.Missing(), minus(all, minus(all, site.Missing()))) {
		t.Errorf("%d broken links reachable, want %d", missing, cfg.BrokenLinks)
	}
	for _, p := range []string{"/", "/slow.html"} {
		if !slices.Contains(polite, p) {
			t.Errorf("%s not reachable", p)
		}
	}
	for _, p := range site.Disallowed() {
		if !strings.HasPrefix(p, "/private/") {
			t.Errorf("Disallowed() has %s", p)
		}
		if slices.Contains(polite, p) {
			t.Errorf("Reachable(true) has disallowed %s", p)
		}
	}
	if len(polite) != len(all)-private {
		t.Errorf("Reachable(true) has %d paths, want %d", len(polite), len(all)-private)
	}
	// The last private page is linked only from the private section.
	last := site.Disallowed()[len(site.Disallowed())-1]
	for _, p := range all {
		if pg, ok := site.Page(p); ok && !strings.HasPrefix(p, "/private/") && slices.Contains(pg.Links, last) {
			t.Errorf("%s links to %s", p, last)
		}
	}
}

func get(t *testing.T, u string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

func TestContent(t *testing.T) {
	site := New(smallConfig())
	srv := httptest.NewServer(site)
	defer srv.Close()

	resp, body := get(t, srv.URL+"/robots.txt")
	if resp.StatusCode != 200 || body != RobotsTxt || !strings.Contains(body, "Disallow: /private/") {
		t.Fatalf("robots.txt: %d %q", resp.StatusCode, body)
	}
	resp, body = get(t, srv.URL+"/page/7.html")
	pg, _ := site.Page("/page/7.html")
	for _, want := range []string{"<title>Page 7</title>", `<h1 class="title">Product 7</h1>`, `<span class="price">` + pg.Price + "</span>"} {
		if !strings.Contains(body, want) {
			t.Errorf("/page/7.html lacks %s:\n%s", want, body)
		}
	}
	if resp.Header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Errorf("content type %q", resp.Header.Get("Content-Type"))
	}
	for _, p := range append(site.Missing(), "/page/100000.html", "/nope") {
		if resp, _ := get(t, srv.URL+p); resp.StatusCode != 404 {
			t.Errorf("%s: %d, want 404", p, resp.StatusCode)
		}
	}
	if resp, _ := get(t, srv.URL+site.Disallowed()[0]); resp.StatusCode != 200 {
		t.Errorf("private page: %d (robots.txt forbids, the server still serves)", resp.StatusCode)
	}
	r, _ := http.NewRequest(http.MethodPost, srv.URL+"/", nil)
	if resp, err := http.DefaultClient.Do(r); err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	if site.Hits("/page/7.html") != 1 || site.Hits("/robots.txt") != 1 || site.Hits("/nope") != 1 {
		t.Errorf("hits: %v", site.AllHits())
	}
	site.ResetHits()
	if site.Hits("/page/7.html") != 0 {
		t.Error("ResetHits")
	}
}

func TestDeterministic(t *testing.T) {
	a, b := New(DefaultConfig()), New(DefaultConfig())
	sa, sb := httptest.NewServer(a), httptest.NewServer(b)
	defer sa.Close()
	defer sb.Close()
	for _, p := range []string{"/", "/page/0.html", "/page/123.html", "/page/299.html", a.Disallowed()[0]} {
		_, x := get(t, sa.URL+p)
		_, y := get(t, sb.URL+p)
		if x != y {
			t.Errorf("%s differs between two sites of one config", p)
		}
	}
	cfg := DefaultConfig()
	cfg.Seed = 2
	c := New(cfg)
	differ := 0
	for i := 0; i < cfg.Pages; i++ {
		pa, _ := a.Page("/page/" + strconv.Itoa(i) + ".html")
		pc, _ := c.Page("/page/" + strconv.Itoa(i) + ".html")
		if !slices.Equal(pa.Links, pc.Links) || pa.Price != pc.Price {
			differ++
		}
	}
	if differ < cfg.Pages/2 {
		t.Errorf("only %d pages differ between seeds 1 and 2", differ)
	}
}

func TestSlowPageAndLatency(t *testing.T) {
	cfg := Config{Pages: 10, Seed: 3, SlowPage: 150 * time.Millisecond, Latency: 40 * time.Millisecond}
	srv := httptest.NewServer(New(cfg))
	defer srv.Close()
	start := time.Now()
	get(t, srv.URL+"/slow.html")
	if el := time.Since(start); el < cfg.SlowPage+cfg.Latency {
		t.Errorf("slow page answered after %s, want >= %s", el, cfg.SlowPage+cfg.Latency)
	}
	start = time.Now()
	get(t, srv.URL+"/page/1.html")
	if el := time.Since(start); el < cfg.Latency {
		t.Errorf("page answered after %s, want >= %s", el, cfg.Latency)
	}
}

func TestTinySites(t *testing.T) {
	for _, n := range []int{0, 1, 5} {
		site := New(Config{Pages: n, Seed: 9, BrokenLinks: 2})
		srv := httptest.NewServer(site)
		got := simpleCrawl(t, srv.URL, false)
		srv.Close()
		if want := site.Reachable(false); !slices.Equal(got, want) {
			t.Errorf("Pages=%d: crawl %v, Reachable %v", n, got, want)
		}
	}
}

func TestServe(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, New(smallConfig())) }()
	resp, body := get(t, "http://"+ln.Addr().String()+"/")
	if resp.StatusCode != 200 || !strings.Contains(body, "/page/0.html") {
		t.Fatalf("index: %d %s", resp.StatusCode, body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if err := ListenAndServe(context.Background(), "127.0.0.1:-1", smallConfig()); err == nil {
		t.Fatal("ListenAndServe on a bad address succeeded")
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if err := ListenAndServe(ctx2, "127.0.0.1:0", smallConfig()); err != nil && !errors.Is(err, http.ErrServerClosed) {
		t.Fatalf("ListenAndServe with an ended context: %v", err)
	}
}
