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

	"github.com/batoncrawl/baton/activities/crawl/demosite"
	"github.com/batoncrawl/baton/activities/render"
	"github.com/batoncrawl/baton/roles"
)

// BenchmarkRenderAuto crawls the items of a site where 1 page in 10 is
// written by script, every response (documents and the scripts' data)
// served after autoBenchLatency, with 4 goroutines and the default
// politeness (4 requests at once to the host): once over plain HTTP
// (--render never: the script-written pages come out with empty fields)
// and once with --render auto (those pages rendered in a warm pool of 4
// tabs, the default --render-wait), in the same run. It reports the time of both, their ratio, and
// how many pages came out with all their fields.
func BenchmarkRenderAuto(b *testing.B) {
	const (
		items       = 200
		concurrency = 4
	)
	site := demosite.NewJS(demosite.JSConfig{Items: items, JSEvery: 10})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(autoBenchLatency) // the site's response time
		site.ServeHTTP(w, r)
	}))
	defer srv.Close()
	cfg := render.DefaultConfig()
	cfg.Tabs = concurrency
	cfg.TempDir = b.TempDir()
	pool, err := render.New(cfg)
	if err != nil {
		b.Fatalf("render pool: %v (install it: make deps)", err)
	}
	defer pool.Close()
	// A worker's pool is warm after its first pages: open the tabs first.
	var warm sync.WaitGroup
	for range concurrency {
		warm.Add(1)
		go func() {
			defer warm.Done()
			if _, err := pool.Render(context.Background(), render.Request{URL: srv.URL + "/js/item/0.html", Wait: render.WaitLoad}); err != nil {
				b.Error(err)
			}
		}()
	}
	warm.Wait()

	crawlItems := func(mode string) (time.Duration, int) {
		e := NewEngine()
		e.SetRenderer(pool)
		opts, err := Options{IgnoreRobots: true, Selectors: map[string]string{"title": "h1.title", "price": "span.price"},
			RenderOptions: RenderOptions{Render: mode, RenderWait: autoBenchWait}}.Compile()
		if err != nil {
			b.Fatal(err)
		}
		var full atomic.Int64
		work := make(chan string)
		var wg sync.WaitGroup
		start := time.Now()
		for range concurrency {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for u := range work {
					p := e.Fetch(context.Background(), roles.Request{URL: u}, Auth{}, 0, opts)
					if p.OK() && len(p.Fields["title"]) == 1 && len(p.Fields["price"]) == 1 {
						full.Add(1)
					}
				}
			}()
		}
		for _, path := range site.Items() {
			work <- srv.URL + path
		}
		close(work)
		wg.Wait()
		return time.Since(start), int(full.Load())
	}

	var plain, auto time.Duration
	var plainFull, autoFull int
	b.ResetTimer()
	for range b.N {
		d, n := crawlItems(RenderNever)
		plain, plainFull = plain+d, n
		d, n = crawlItems(RenderAuto)
		auto, autoFull = auto+d, n
	}
	b.ReportMetric(plain.Seconds()/float64(b.N), "s-plain")
	b.ReportMetric(auto.Seconds()/float64(b.N), "s-auto")
	b.ReportMetric(auto.Seconds()/plain.Seconds(), "auto/plain")
	b.ReportMetric(float64(plainFull), "full-pages-plain")
	b.ReportMetric(float64(autoFull), "full-pages-auto")
	if autoFull != items {
		b.Errorf("auto: %d of %d pages with all their fields", autoFull, items)
	}
	fmt.Printf("plain %v (%d/%d pages with their fields), auto %v (%d/%d), ratio %.2f\n",
		plain/time.Duration(b.N), plainFull, items, auto/time.Duration(b.N), autoFull, items, auto.Seconds()/plain.Seconds())
}

// autoBenchLatency is BenchmarkRenderAuto's site's response time;
// autoBenchWait its --render-wait: the default, as a user gets it (a page
// rendered for its empty fields is done once its fields have values).
const (
	autoBenchLatency = 100 * time.Millisecond
	autoBenchWait    = ""
)
