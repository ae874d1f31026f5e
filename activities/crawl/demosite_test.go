package crawl

import (
	"context"
	"maps"
	"net/http/httptest"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batoncrawl/baton/activities/crawl/demosite"
)

// crawlSite is a minimal crawl job over Engine.Fetch: BFS from seed with
// `workers` concurrent fetches, deduplicated on NormalizeURL.
func crawlSite(t *testing.T, e *Engine, seed string, o Options, workers int) map[string]Page {
	t.Helper()
	type item struct {
		url   string
		depth int
	}
	var (
		mu      sync.Mutex
		seen    = map[string]bool{}
		results = map[string]Page{}
		wg      sync.WaitGroup
	)
	work := make(chan item, 100000)
	enqueue := func(u string, depth int) {
		n, err := NormalizeURL(u)
		if err != nil {
			t.Errorf("normalize %s: %v", u, err)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if seen[n] {
			return
		}
		seen[n] = true
		wg.Add(1)
		work <- item{n, depth}
	}
	for i := 0; i < workers; i++ {
		go func() {
			for it := range work {
				p := e.Fetch(context.Background(), get(it.url), Auth{}, it.depth, o)
				mu.Lock()
				results[it.url] = p
				mu.Unlock()
				for _, l := range p.Links {
					enqueue(l, it.depth+1)
				}
				wg.Done()
			}
		}()
	}
	enqueue(seed, 0)
	wg.Wait()
	close(work)
	return results
}

func TestCrawlDemoSite(t *testing.T) {
	t.Parallel()
	cfg := demosite.DefaultConfig()
	cfg.SlowPage = 30 * time.Millisecond
	site := demosite.New(cfg)
	srv := httptest.NewServer(site)
	defer srv.Close()
	base, _ := url.Parse(srv.URL)

	e := NewEngine()
	o := testOptions()
	o.Follow, o.MaxDepth = true, 100
	o.AllowedDomains = []string{base.Host}
	o.Selectors = map[string]string{"name": "h1.title", "price": "span.price"}
	results := crawlSite(t, e, srv.URL+"/", o, 8)

	var paths, refused []string
	for u, p := range results {
		pu, _ := url.Parse(u)
		if p.Error == "disallowed by robots.txt" {
			refused = append(refused, pu.Path)
			continue
		}
		paths = append(paths, pu.Path)
		pg, exists := site.Page(pu.Path)
		switch {
		case strings.HasPrefix(pu.Path, "/missing/"):
			if p.Error != "HTTP 404" {
				t.Errorf("%s: %+v", u, p)
			}
		case !exists:
			t.Errorf("crawled %s, not a page of the site", u)
		case !p.OK():
			t.Errorf("%s: %s", u, p.Error)
		case p.Title != pg.Title || (pg.Price != "" && (!slices.Equal(p.Fields["price"], []string{pg.Price}) || !slices.Equal(p.Fields["name"], []string{pg.H1}))):
			t.Errorf("%s: title %q fields %v, want %q %q %q", u, p.Title, p.Fields, pg.Title, pg.H1, pg.Price)
		}
	}
	sort.Strings(paths)
	if want := site.Reachable(true); !slices.Equal(paths, want) {
		t.Errorf("crawled %d paths, Reachable(true) has %d", len(paths), len(want))
	}
	// The private pages linked from public ones are refused, never requested.
	wantRefused := map[string]bool{}
	for _, p := range site.Reachable(true) {
		pg, _ := site.Page(p)
		for _, l := range pg.Links {
			if slices.Contains(site.Disallowed(), l) {
				wantRefused[l] = true
			}
		}
	}
	sort.Strings(refused)
	if want := slices.Sorted(maps.Keys(wantRefused)); len(refused) == 0 || !slices.Equal(refused, want) {
		t.Errorf("refused %v, want %v", refused, want)
	}
	for path, n := range site.AllHits() {
		if n != 1 {
			t.Errorf("%s requested %d times", path, n)
		}
	}
	for _, p := range site.Disallowed() {
		if site.Hits(p) != 0 {
			t.Errorf("robots-disallowed %s was requested", p)
		}
	}

	// Without robots.txt, the private section is crawled too.
	site.ResetHits()
	o.IgnoreRobots = true
	results = crawlSite(t, NewEngine(), srv.URL+"/", o, 8)
	if len(results) != len(site.Reachable(false)) {
		t.Errorf("ignoring robots: %d pages, want %d", len(results), len(site.Reachable(false)))
	}
	if site.Hits("/robots.txt") != 0 {
		t.Error("robots.txt fetched while ignored")
	}
}
