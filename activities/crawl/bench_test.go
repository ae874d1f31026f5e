package crawl

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gocolly/colly/v2"

	"github.com/batoncrawl/baton/activities/crawl/demosite"
)

// BenchmarkEngineVsBareColly fetches the same pages of a local site with
// 5 ms of simulated latency per page (a) through Engine.Fetch, called by
// `concurrency` goroutines with Parallelism = concurrency, and (b) with a
// bare Colly collector (Async, LimitRule Parallelism = concurrency, same
// connection pool size), both extracting the title and the price; it
// reports pages/s for both in the same run.
func BenchmarkEngineVsBareColly(b *testing.B) {
	const (
		pages       = 200
		concurrency = 16
	)
	site := demosite.New(demosite.Config{Pages: pages, Seed: 1, Latency: 5 * time.Millisecond})
	srv := httptest.NewServer(site)
	defer srv.Close()
	urls := make([]string, pages)
	for i := range urls {
		urls[i] = fmt.Sprintf("%s/page/%d.html", srv.URL, i)
	}

	e := NewEngine()
	opts := DefaultOptions()
	opts.Parallelism = concurrency
	opts.Selectors = map[string]string{"price": "span.price"}
	engineRun := func() int {
		var ok atomic.Int64
		work := make(chan string)
		var wg sync.WaitGroup
		for w := 0; w < concurrency; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for u := range work {
					if p := e.Fetch(context.Background(), get(u), Auth{}, 0, opts); p.OK() && len(p.Fields["price"]) == 1 {
						ok.Add(1)
					}
				}
			}()
		}
		for _, u := range urls {
			work <- u
		}
		close(work)
		wg.Wait()
		return int(ok.Load())
	}
	collyRun := func() int {
		c := colly.NewCollector(colly.Async(true), colly.AllowURLRevisit())
		c.WithTransport(&http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second})
		if err := c.Limit(&colly.LimitRule{DomainGlob: "*", Parallelism: concurrency}); err != nil {
			b.Fatal(err)
		}
		var ok atomic.Int64
		var titled atomic.Int64
		c.OnHTML("title", func(*colly.HTMLElement) { titled.Add(1) })
		c.OnHTML("span.price", func(*colly.HTMLElement) { ok.Add(1) })
		for _, u := range urls {
			if err := c.Visit(u); err != nil {
				b.Fatal(err)
			}
		}
		c.Wait()
		return int(ok.Load())
	}

	// Warm both up (connections, robots.txt cache).
	engineRun()
	collyRun()
	b.ResetTimer()
	var engineTime, collyTime time.Duration
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if n := engineRun(); n != pages {
			b.Fatalf("engine fetched %d of %d pages", n, pages)
		}
		engineTime += time.Since(start)
		start = time.Now()
		if n := collyRun(); n != pages {
			b.Fatalf("colly fetched %d of %d pages", n, pages)
		}
		collyTime += time.Since(start)
	}
	total := float64(pages * b.N)
	b.ReportMetric(total/engineTime.Seconds(), "engine_pages/s")
	b.ReportMetric(total/collyTime.Seconds(), "colly_pages/s")
	b.ReportMetric(0, "ns/op")
}
