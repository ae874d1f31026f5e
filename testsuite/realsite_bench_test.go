package testsuite_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batoncrawl/baton/testsuite"
)

// pathCounter counts the distinct paths a site served.
type pathCounter struct {
	h    http.Handler
	mu   sync.Mutex
	hits map[string]int
}

func (p *pathCounter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	p.hits[r.URL.Path]++
	p.mu.Unlock()
	p.h.ServeHTTP(w, r)
}

func (p *pathCounter) reset() (distinct, fetches int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for path, n := range p.hits {
		if path != "/robots.txt" {
			distinct++
			fetches += n
		}
	}
	p.hits = map[string]int{}
	return distinct, fetches
}

// BenchmarkRealSite crawls a real documentation site no one here wrote —
// Debian's HTML manual of PostgreSQL 15 (postgresql-doc-15, about 1,170
// densely cross-linked pages: every page links to its neighbours, its
// chapter and the index) — served by nginx, with bare Colly at 24
// requests at once and with Baton clusters on SQLite and PostgreSQL (1
// Runner × 24, 3 Runners × 8), side by side in one run. It reports pages/s
// and the ratio to bare Colly's distinct pages/s, and for PostgreSQL the
// deadlocks of its log and of pg_stat_database (it fails on any).
//
// Install the site: bash deployments/scripts/install-realsite.sh (root);
// BATON_REAL_SITE_DIR serves another directory. Run it with:
//
//	make bench BENCH=RealSite PKGS=./testsuite/ BENCH_FLAGS=-benchtime=1x
func BenchmarkRealSite(b *testing.B) {
	root := os.Getenv("BATON_REAL_SITE_DIR")
	if root == "" {
		root = "/usr/share/doc/postgresql-doc-15/html"
	}
	if _, err := os.Stat(root + "/index.html"); err != nil {
		b.Skipf("no real site at %s (bash deployments/scripts/install-realsite.sh installs Debian's PostgreSQL manual)", root)
	}
	ng := testsuite.StartNginx(b, root)
	u, _ := url.Parse(ng.URL)
	counter := &pathCounter{h: httputil.NewSingleHostReverseProxy(u), hits: map[string]int{}}
	srv := httptest.NewServer(counter)
	b.Cleanup(srv.Close)

	fetches, fetchRate := bareColly(srv.URL, 24)
	distinct, _ := counter.reset()
	bare := fetchRate * float64(distinct) / float64(fetches)
	b.Logf("bare Colly ×24 on %s (nginx): %d distinct pages (%d fetches: its async visited check races), %.1f distinct pages/s, %.1f fetches/s",
		root, distinct, fetches, bare, fetchRate)

	var pg *testsuite.Postgres // one server for both shapes, stopped at the end
	outer := b
	for _, engine := range []string{"sqlite", "postgres"} {
		for _, shape := range []struct{ runners, conc int }{{1, 24}, {3, 8}} {
			b.Run(fmt.Sprintf("%s/%dx%d", engine, shape.runners, shape.conc), func(b *testing.B) {
				opts := []testsuite.ClusterOption{testsuite.FastTimers, testsuite.WithWorkerArgs("--concurrency", strconv.Itoa(shape.conc))}
				if engine == "postgres" {
					if pg == nil {
						pg = testsuite.StartPostgres(outer)
					} else {
						// The database settled, as between an operator's crawls: the
						// cases before left autovacuum work, and after a checkpoint
						// their WAL segments are reused (see BenchmarkPostgresCrawl).
						pg.Admin(b, "VACUUM (ANALYZE)", "CHECKPOINT")
					}
					opts = append(opts, testsuite.WithPostgres(pg))
				}
				c := testsuite.NewCluster(b, shape.runners, 1, opts...)
				c.StartAll()
				c.WaitElected(90 * time.Second)
				tc := c.Temporal.Client(b)
				o := siteWide()
				o.Parallelism = 24
				runs++ // a new job ID in every run (-count): the PostgreSQL database is the same
				id := fmt.Sprintf("real%d-%s-%dx%d", runs, engine, shape.runners, shape.conc)
				offset := int64(0)
				if pg != nil {
					offset = pg.LogOffset()
				}
				counter.reset()
				prog, took := crawlTimed(b, c, tc, id, []string{srv.URL + "/"}, o)
				got, served := counter.reset()
				rate := float64(prog.Stats.Recorded) / took.Seconds()
				b.ReportMetric(rate, "pages/s")
				b.ReportMetric(bare, "colly24-pages/s")
				b.ReportMetric(rate/bare, "ratio")
				b.ReportMetric(rate/fetchRate, "ratio-to-fetches")
				line := fmt.Sprintf("%s %dx%d: %d recorded (%d distinct pages served, %d fetches) in %v (%.1f/s, %.2f of bare Colly's %.1f distinct pages/s, %.2f of its %.1f fetches/s)",
					engine, shape.runners, shape.conc, prog.Stats.Recorded, got, served, took.Round(time.Millisecond), rate, rate/bare, bare, rate/fetchRate, fetchRate)
				if pg != nil {
					logged := strings.Count(pg.LogSince(offset), "deadlock detected")
					for i := 1; i <= shape.runners+1; i++ {
						c.Kill(i) // pg_stat_database is read once no session is left
					}
					stat := pg.Deadlocks(b)
					b.ReportMetric(float64(logged), "deadlocks")
					line += fmt.Sprintf("; deadlocks: %d in the log, %d in pg_stat_database", logged, stat)
					if logged > 0 || stat > 0 {
						b.Errorf("PostgreSQL deadlocked: %s", line)
					}
				}
				if got != int(prog.Stats.Recorded) {
					b.Errorf("the site served %d distinct pages during Baton's crawl, %d recorded", got, prog.Stats.Recorded)
				}
				b.Log(line)
			})
		}
	}
}
