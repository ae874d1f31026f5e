package testsuite_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/testsuite"
	"github.com/batoncrawl/baton/workflows"
)

// fanOutSite serves /n/<i>: a page linking to /n/<i*fan+1> … /n/<i*fan+fan>,
// so the frontier of a crawl grows by fan URLs per page fetched.
type fanOutSite struct{ fan int }

func (s fanOutSite) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/robots.txt" {
		http.NotFound(w, r)
		return
	}
	i, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/n/"))
	if err != nil {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	var b strings.Builder
	fmt.Fprintf(&b, "<html><head><title>n%d</title></head><body>", i)
	for k := 1; k <= s.fan; k++ {
		fmt.Fprintf(&b, `<a href="/n/%d">%d</a> `, i*s.fan+k, k)
	}
	b.WriteString("</body></html>")
	_, _ = w.Write([]byte(b.String()))
}

// BenchmarkFrontierMemory measures the workers' peak RSS while a crawl
// job's frontier grows to 1,000,000 URLs (a generated site, 1,000 links a
// page), on SQLite and on PostgreSQL: the frontier and the dedup set are
// the store's, so memory stays flat in the number of URLs.
//
// Run it with: make bench BENCH=FrontierMemory PKGS=./testsuite/ BENCH_FLAGS=-benchtime=1x
func BenchmarkFrontierMemory(b *testing.B) {
	for _, engine := range []string{"sqlite", "postgres"} {
		b.Run(engine, func(b *testing.B) {
			var opts []testsuite.ClusterOption
			if engine == "postgres" {
				opts = append(opts, testsuite.WithPostgres(testsuite.StartPostgres(b)))
			}
			c := testsuite.NewCluster(b, 2, 0, append(opts, testsuite.FastTimers)...)
			srv := httptest.NewServer(fanOutSite{fan: 1000})
			b.Cleanup(srv.Close)
			c.StartAll()
			c.WaitElected(90 * time.Second)
			tc := c.Temporal.Client(b)
			js := c.OpenStore()
			o := crawl.DefaultOptions()
			o.Follow, o.MaxDepth, o.AllowedDomains, o.Parallelism = true, 10, []string{"127.0.0.1"}, 16
			run := submit(b, c, tc, "frontier", []string{srv.URL + "/n/0"}, o, 0)
			b.ResetTimer()
			start := time.Now()
			marks := []int{250_000, 500_000, 1_000_000}
			var rss []int
			for _, mark := range marks {
				testsuite.Eventually(b, 10*time.Minute, fmt.Sprintf("frontier at %d URLs", mark), func() (bool, error) {
					st, err := js.Stats(context.Background(), "frontier")
					return err == nil && st.Seen >= mark, fmt.Errorf("%d URLs seen (%v)", st.Seen, err)
				})
				peak := 0
				for i := 1; i <= 2; i++ {
					peak = max(peak, rssKB(c.Process(i).Pid()))
				}
				rss = append(rss, peak)
				b.Logf("%s: %d URLs after %v: workers' peak RSS %d MiB", engine, mark, time.Since(start).Round(time.Second), peak/1024)
			}
			b.StopTimer()
			_ = tc.SignalWorkflow(context.Background(), workflows.JobWorkflowID(c.Group, "frontier"), "", workflows.SignalCancel, nil)
			_ = run.Get(context.Background(), nil)
			b.ReportMetric(float64(rss[0])/1024, "peak-MiB@250k")
			b.ReportMetric(float64(rss[len(rss)-1])/1024, "peak-MiB@1M")
		})
	}
}
