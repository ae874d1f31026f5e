package crawl

import (
	"context"
	"fmt"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/batoncrawl/baton/activities/crawl/demosite"
)

// BenchmarkFetchFollow is the worker's cost of one page of a crawl that
// follows links: Engine.Fetch of a cross-linked demo-site page (as the
// CPU-bound site of BenchmarkAgainstColly serves it, 0 ms) with its links
// extracted, resolved and normalised, one page at a time. Its ns/op and
// allocs/op are the fetch side of the CPU per page.
func BenchmarkFetchFollow(b *testing.B) {
	const pages = 500
	site := demosite.New(demosite.Config{Pages: pages, Seed: 11, BrokenLinks: 5, CrossLinks: 20})
	srv := httptest.NewServer(site)
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	e := NewEngine()
	o := DefaultOptions()
	o.Follow, o.MaxDepth, o.IgnoreRobots = true, 100, true
	o.AllowedDomains = []string{u.Hostname()}
	o, err := o.Compile()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	links := 0
	for i := 0; b.Loop(); i++ {
		p := e.Fetch(context.Background(), get(fmt.Sprintf("%s/page/%d.html", srv.URL, i%pages)), Auth{}, 0, o)
		if !p.OK() || len(p.Links) == 0 {
			b.Fatalf("page %d: %q, %d links", i%pages, p.Error, len(p.Links))
		}
		links += len(p.Links)
	}
	b.ReportMetric(float64(links)/float64(b.N), "links/op")
}
