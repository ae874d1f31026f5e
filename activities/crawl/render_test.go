package crawl

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/batoncrawl/baton/activities/crawl/demosite"
	"github.com/batoncrawl/baton/activities/render"
	"github.com/batoncrawl/baton/roles"
)

// renderEngine returns an Engine rendering with a pool of its own test
// (chromium must be installed: the test fails, not skips, without it).
func renderEngine(t *testing.T) (*Engine, *render.Pool) {
	t.Helper()
	cfg := render.DefaultConfig()
	cfg.Tabs = 2
	cfg.TempDir = t.TempDir()
	p, err := render.New(cfg)
	if err != nil {
		t.Fatalf("render pool: %v (install it: make deps)", err)
	}
	t.Cleanup(p.Close)
	e := NewEngine()
	e.SetRenderer(p)
	return e, p
}

// crawlAll crawls from seed, breadth first, and returns the pages by path.
func crawlAll(t *testing.T, e *Engine, seed string, opts Options) map[string]Page {
	t.Helper()
	opts.Follow, opts.MaxDepth, opts.IgnoreRobots = true, 3, true
	opts.Selectors = map[string]string{"title": "h1.title", "price": "span.price"}
	compiled, err := opts.Compile()
	if err != nil {
		t.Fatal(err)
	}
	pages := map[string]Page{}
	type item struct {
		url   string
		depth int
	}
	queue, seen := []item{{seed, 0}}, map[string]bool{seed: true}
	for len(queue) > 0 {
		it := queue[0]
		queue = queue[1:]
		p := e.Fetch(context.Background(), roles.Request{URL: it.url}, Auth{}, it.depth, compiled)
		if p.Error != "" {
			t.Fatalf("%s: %s", it.url, p.Error)
		}
		pages[strings.TrimPrefix(it.url, seed[:strings.Index(seed, "/js/")])] = p
		for _, l := range p.Links {
			if !seen[l] {
				seen[l] = true
				queue = append(queue, item{l, it.depth + 1})
			}
		}
	}
	return pages
}

func TestRenderedCrawlRecordsJSOnlyFields(t *testing.T) {
	site := demosite.NewJS(demosite.JSConfig{Items: 6, JSEvery: 2})
	srv := httptest.NewServer(site)
	defer srv.Close()
	seed := srv.URL + "/js/"

	plain := crawlAll(t, NewEngine(), seed, Options{})
	if len(plain) != 1 || len(plain["/js/"].Links) != 0 {
		t.Fatalf("without rendering: %d pages, index links %v; want the index alone (its links are written by script)", len(plain), plain["/js/"].Links)
	}
	for _, mode := range []string{RenderAlways, RenderAuto} {
		t.Run(mode, func(t *testing.T) {
			e, _ := renderEngine(t)
			pages := crawlAll(t, e, seed, Options{RenderOptions: RenderOptions{Render: mode}})
			for k, path := range site.Items() {
				p, ok := pages[path]
				if !ok {
					t.Errorf("%s not crawled (got %d pages)", path, len(pages))
					continue
				}
				if got := fmt.Sprint(p.Fields["title"], p.Fields["price"]); got != fmt.Sprint([]string{demosite.ItemTitle(k)}, []string{demosite.ItemPrice(k)}) {
					t.Errorf("%s: fields %v %v", path, p.Fields["title"], p.Fields["price"])
				}
				wantRendered := mode == RenderAlways || site.NeedsJS(k)
				if p.Rendered != wantRendered {
					t.Errorf("%s (needs JS %v): rendered %v (%s), want %v", path, site.NeedsJS(k), p.Rendered, p.RenderReason, wantRendered)
				}
				if p.StatusCode != 200 || p.Title != demosite.ItemTitle(k) {
					t.Errorf("%s: status %d title %q", path, p.StatusCode, p.Title)
				}
			}
			if idx := pages["/js/"]; !idx.Rendered || len(idx.Links) != len(site.Items()) {
				t.Errorf("index: rendered %v (%s), %d links", idx.Rendered, idx.RenderReason, len(idx.Links))
			}
			s := e.RenderStats()
			t.Logf("%s: %+v", mode, s)
			if mode == RenderAuto && (s.Always != 0 || s.EmptyFields+s.NoLinks != 1+int64(len(site.Items()))/2) {
				t.Errorf("auto stats %+v: want the index and the %d JS items rendered", s, len(site.Items())/2)
			}
		})
	}
}

// Under DenyPrivate a rendered page's script reaches no private address:
// its fetch is refused in the browser, and the link it wrote is refused
// when followed. 127.0.0.1 (the site) counts as public here, 127.0.0.2
// as private.
func TestRenderedPageInsideGuard(t *testing.T) {
	site := demosite.NewJS(demosite.DefaultJSConfig())
	srv := httptest.NewServer(site)
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	private := demosite.NewJS(demosite.DefaultJSConfig())
	other := httptest.NewUnstartedServer(private)
	other.Listener = ln
	other.Start()
	defer other.Close()

	for _, guard := range []bool{true, false} {
		e, p := renderEngine(t)
		e.Policy.private = func(a netip.Addr) bool { return a == netip.MustParseAddr("127.0.0.2") }
		opts := Options{Follow: true, MaxDepth: 2, IgnoreRobots: true, DenyPrivate: guard, RenderOptions: RenderOptions{Render: RenderAlways}}
		page := e.Fetch(context.Background(), roles.Request{URL: srv.URL + "/js/reach.html?to=" + other.Listener.Addr().String()}, Auth{}, 1, opts)
		if page.Error != "" || len(page.Links) != 1 {
			t.Fatalf("guard %v: %s, links %v", guard, page.Error, page.Links)
		}
		hits := private.Hits("/js/data/0.json")
		next := e.Fetch(context.Background(), roles.Request{URL: page.Links[0]}, Auth{}, 2, opts)
		if guard {
			if hits != 0 || p.Stats().Refused != 1 {
				t.Errorf("guarded: the private host's data fetched %d times, %d requests refused; want 0 and 1", hits, p.Stats().Refused)
			}
			if !strings.Contains(next.Error, "refused private address 127.0.0.2") || private.Hits("/js/item/0.html") != 0 {
				t.Errorf("guarded: the link to the private host: %q, %d hits", next.Error, private.Hits("/js/item/0.html"))
			}
		} else if hits != 1 || next.Error != "" {
			t.Errorf("unguarded: the private host's data fetched %d times, its link: %q; want 1 and no error", hits, next.Error)
		}
	}
}

// plainRenderer "renders" a page by fetching it: rendering adds nothing.
type plainRenderer struct{ calls int }

func (r *plainRenderer) Render(ctx context.Context, req render.Request) (render.Result, error) {
	r.calls++
	resp, err := http.Get(req.URL)
	if err != nil {
		return render.Result{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return render.Result{URL: req.URL, FinalURL: req.URL, Status: resp.StatusCode, Header: resp.Header, HTML: string(body)}, err
}

// auto stops rendering a host after autoUseless renders that added
// nothing, and re-checks one page in autoSample.
func TestAutoLearnsRenderingAddsNothing(t *testing.T) {
	site := demosite.New(demosite.Config{Pages: 80, Seed: 3})
	srv := httptest.NewServer(site)
	defer srv.Close()
	e := NewEngine()
	r := &plainRenderer{}
	e.SetRenderer(r)
	opts, err := Options{Selectors: map[string]string{"rating": ".rating"}, IgnoreRobots: true,
		RenderOptions: RenderOptions{Render: RenderAuto}}.Compile()
	if err != nil {
		t.Fatal(err)
	}
	rendered, samples := 0, 0
	const pages = 65
	for k := range pages {
		p := e.Fetch(context.Background(), roles.Request{URL: fmt.Sprintf("%s/page/%d.html", srv.URL, k)}, Auth{}, 0, opts)
		if p.Error != "" {
			t.Fatal(p.Error)
		}
		if p.Rendered {
			rendered++
		}
		if p.RenderReason == ReasonSample {
			samples++
		}
	}
	// 5 renders that add nothing, then 1 in 20 of the 60 pages left.
	want := autoUseless + (pages-autoUseless)/autoSample
	if rendered != want || r.calls != want {
		t.Errorf("rendered %d pages (%d renders), want %d", rendered, r.calls, want)
	}
	s := e.RenderStats()
	if s.EmptyFields != autoUseless || s.Useless != int64(want) || s.Sampled != int64((pages-autoUseless)/autoSample) ||
		s.Skipped != int64(pages-want) || samples != (pages-autoUseless)/autoSample {
		t.Errorf("stats %+v", s)
	}
}
