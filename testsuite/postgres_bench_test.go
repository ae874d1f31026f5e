package testsuite_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/crawl/demosite"
	"github.com/batoncrawl/baton/testsuite"
)

// pageClock wraps a site and tells when each distinct page (not
// robots.txt) was first served after Arm: the start of a crawl as the site
// sees it. Only distinct pages count: bare Colly fetches some pages twice
// (its async visited check races), and a page fetched again is not a page
// more of the crawl.
type pageClock struct {
	h     http.Handler
	mu    sync.Mutex
	start time.Time
	seen  map[string]bool // distinct pages served
	times []time.Duration // when each distinct page was first served
	// when robots.txt and the first page were first asked for (0: not yet)
	robotsAsked, firstAsked time.Duration
}

func (p *pageClock) Arm() {
	p.mu.Lock()
	p.start, p.seen, p.times = time.Now(), map[string]bool{}, nil
	p.robotsAsked, p.firstAsked = 0, 0
	p.mu.Unlock()
}

// FirstDistinct returns how long the first k distinct pages took from Arm
// (0: not yet).
func (p *pageClock) FirstDistinct(k int) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if k <= 0 || len(p.times) < k {
		return 0
	}
	return p.times[k-1]
}

func (p *pageClock) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	if p.seen != nil {
		asked := &p.firstAsked
		if r.URL.Path == "/robots.txt" {
			asked = &p.robotsAsked
		}
		if *asked == 0 {
			*asked = max(time.Since(p.start), time.Nanosecond)
		}
	}
	p.mu.Unlock()
	p.h.ServeHTTP(w, r)
	if r.URL.Path == "/robots.txt" {
		return
	}
	now := time.Now()
	p.mu.Lock()
	if p.seen != nil {
		if u := r.URL.RequestURI(); !p.seen[u] {
			p.seen[u] = true
			p.times = append(p.times, now.Sub(p.start))
		}
	}
	p.mu.Unlock()
}

// Distinct is how many distinct pages were served since Arm.
func (p *pageClock) Distinct() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.times)
}

// Trace is when robots.txt and the first page were asked for, and the
// time of the 1st, 25th, 100th, 250th and 500th distinct page.
func (p *pageClock) Trace() string {
	var b strings.Builder
	p.mu.Lock()
	fmt.Fprintf(&b, "robots.txt asked %v, first page asked %v,", p.robotsAsked.Round(100*time.Microsecond), p.firstAsked.Round(100*time.Microsecond))
	p.mu.Unlock()
	for _, k := range []int{1, 25, 100, 250, 500} {
		fmt.Fprintf(&b, " #%d %v", k, p.FirstDistinct(k).Round(time.Millisecond))
	}
	return strings.TrimSpace(b.String())
}

// BenchmarkPostgresCrawl measures a Baton cluster on PostgreSQL (every
// worker on its own data directory, as on separate machines) against bare
// Colly at the same total concurrency (24), side by side in one run, on a
// densely cross-linked site (every page links to a navigation bar and 20
// pages all over the site, 20 ms a page) of 3,000 and 20,000 pages, in two
// shapes: 1 Runner × 24 and 3 Runners × 8. For each it reports pages/s, the
// ratio to bare Colly's distinct pages/s (its async visited check races,
// so it fetches many pages twice: its fetches/s are reported too), the
// time both took for their first 500 distinct pages (bare Colly's start
// runs again just before each of Baton's crawls, so that the two are
// measured side by side: both vary by tens of milliseconds from one minute
// to the next), the deadlocks PostgreSQL logged during the crawl (it
// fails on any), and the CPU time PostgreSQL and the workers used for the
// crawl per 1,000 pages (cpu_bench_test.go).
// The cluster runs with the default timers, as a user's does (the fast
// profile of the fail-over tests, heartbeats and checks every 100 ms,
// kept the idle cluster at about half a core of this 2-core machine).
//
// Run it with: make bench BENCH=PostgresCrawl PKGS=./testsuite/ BENCH_FLAGS=-benchtime=1x
// (add -count=3 to the flags for three runs: the first 500 pages vary by
// a few tens of milliseconds from run to run, Colly's as much as Baton's).
// BATON_BENCH_WORKER_ARGS_B compares a worker setting with the default,
// alternated run after run (benchab_test.go).
func BenchmarkPostgresCrawl(b *testing.B) {
	const latency = 20 * time.Millisecond
	const first = 500
	sizes := []int{3000, 20000}
	if s := strings.TrimSpace(os.Getenv("BATON_BENCH_PAGES")); s != "" {
		sizes = nil
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n <= 0 {
				b.Fatalf("BATON_BENCH_PAGES: %q is not a page count", f)
			}
			sizes = append(sizes, n)
		}
	}
	argsB := workerArgsB()
	arms := newArmRuns()
	logArms(b, arms)
	pg := testsuite.StartPostgres(b)
	warmSite := demosite.New(demosite.Config{Pages: 50, Seed: 5, Latency: latency})
	warmClock := &pageClock{h: warmSite}
	warmSrv := httptest.NewServer(warmClock)
	b.Cleanup(warmSrv.Close)
	for _, pages := range sizes {
		site := demosite.New(demosite.Config{Pages: pages, Seed: 11, BrokenLinks: 5, Latency: latency, CrossLinks: 20})
		clock := &pageClock{h: site}
		srv := httptest.NewServer(clock)
		b.Cleanup(srv.Close)
		clock.Arm()
		site.ResetHits()
		fetches, fetchRate := bareColly(srv.URL, 24)
		bareFirst, bareTrace := clock.FirstDistinct(first), clock.Trace()
		// Colly's visited check races in async mode: on a cross-linked
		// site it fetches many pages twice. Its useful throughput is the
		// distinct pages it got per second.
		n := int64(0)
		for p := range site.AllHits() {
			if p != "/robots.txt" {
				n++
			}
		}
		bare := fetchRate * float64(n) / float64(fetches)
		b.Logf("bare Colly ×24, %d-page site: %d distinct pages (%d fetches), %.1f pages/s (%.1f fetches/s), first %d distinct pages in %v; distinct pages: %s",
			pages, n, fetches, bare, fetchRate, first, bareFirst.Round(time.Millisecond), bareTrace)
		for _, shape := range []struct{ runners, conc int }{{1, 24}, {3, 8}} {
			name := fmt.Sprintf("%dpages/%dx%d", pages, shape.runners, shape.conc)
			b.Run(name, func(b *testing.B) {
				// The jobs' IDs are new in every run (-count runs each
				// case again): the database is the same, and a job ID it
				// has is the job it has, not a new crawl.
				runs++
				runNo := runs
				// The database settled first, as an operator's is between
				// crawls: the cases before left autovacuum work (dead
				// frontier rows, new results), which on these 2 cores took
				// 30-100 ms off the start of the case it ran into (the
				// fourth run in a row; none with autovacuum off); and after
				// a checkpoint the next case reuses the WAL segments the
				// earlier ones wrote, as a server that has run for a while
				// does, instead of creating and zero-filling a new 16 MB
				// segment every few seconds of writing (a 40-55 ms stall of
				// every commit each time on this disk).
				pg.Admin(b, "VACUUM (ANALYZE)", "CHECKPOINT")
				args := []string{"--concurrency", strconv.Itoa(shape.conc)}
				arm := arms.next(name, len(argsB) > 0)
				if arm == 1 {
					args = append(args, argsB...)
					b.Logf("arm B: the workers run with %s", strings.Join(argsB, " "))
				} else if len(argsB) > 0 {
					b.Log("arm A: the workers run as given")
				}
				c := testsuite.NewCluster(b, shape.runners, 1, testsuite.WithPostgres(pg), testsuite.WithWorkerArgs(args...))
				c.StartAll()
				c.WaitElected(90 * time.Second)
				tc := c.Temporal.Client(b)
				// A cluster runs for long, crawls come and go: the crawl
				// measured is not the cluster's first. A small crawl of
				// another site first (its time to the first page, on the
				// fresh cluster, is reported as cold-first-page-ms).
				warmClock.Arm()
				wrun := submit(b, c, tc, fmt.Sprintf("warm%d-%d-%dx%d", runNo, pages, shape.runners, shape.conc), []string{warmSrv.URL + "/"}, siteWide(), 0)
				if err := wrun.Get(context.Background(), nil); err != nil {
					b.Fatal(err)
				}
				cold := warmClock.FirstDistinct(1)
				// Bare Colly's start again, just before Baton's: the two
				// start on the same machine at the same moment (they vary
				// by tens of milliseconds from minute to minute).
				clock.Arm()
				// Enough requests for 500 distinct pages: some of bare
				// Colly's are pages it fetched before.
				collyStart(srv.URL, 24, first+first/5)
				collyFirst, collyTrace := clock.FirstDistinct(first), clock.Trace()
				if collyFirst == 0 {
					b.Fatalf("bare Colly's start got %d distinct pages, not %d", clock.Distinct(), first)
				}
				o := siteWide()
				o.Parallelism = 24
				id := fmt.Sprintf("pg%d-%d-%dx%d", runNo, pages, shape.runners, shape.conc)
				offset := pg.LogOffset()
				pgCPU0, workersCPU0 := crawlCPU(pg, c, shape.runners+1)
				clock.Arm()
				prog, took := crawlTimed(b, c, tc, id, []string{srv.URL + "/"}, o)
				pgCPU, workersCPU := crawlCPU(pg, c, shape.runners+1)
				// What the crawl cost the machine, per 1,000 pages.
				perK := func(d time.Duration) float64 {
					return float64(d.Milliseconds()) * 1000 / float64(max(1, prog.Stats.Recorded))
				}
				firstTook := clock.FirstDistinct(first)
				rate := float64(prog.Stats.Recorded) / took.Seconds()
				arms.add(name, arm, float64(firstTook.Milliseconds()), float64((firstTook - collyFirst).Milliseconds()), rate)
				deadlocks := strings.Count(pg.LogSince(offset), "deadlock detected")
				b.ReportMetric(rate, "pages/s")
				b.ReportMetric(bare, "colly24-pages/s")
				b.ReportMetric(fetchRate, "colly24-fetches/s")
				b.ReportMetric(rate/bare, "ratio")
				b.ReportMetric(float64(firstTook.Milliseconds()), "first500-ms")
				b.ReportMetric(float64(collyFirst.Milliseconds()), "colly-first500-ms")
				b.ReportMetric(float64(deadlocks), "deadlocks")
				b.ReportMetric(float64(cold.Milliseconds()), "cold-first-page-ms")
				b.ReportMetric(perK(pgCPU-pgCPU0), "pg-cpu-ms/1kpages")
				b.ReportMetric(perK(workersCPU-workersCPU0), "workers-cpu-ms/1kpages")
				b.Logf("postgres %d pages %dx%d: %d recorded in %v (%.1f/s, %.2f of bare Colly's %.1f); first %d pages %v (bare Colly just before: %v); %d deadlocks; distinct pages: %s (bare Colly: %s); the cluster's first crawl had its first page after %v; CPU per 1,000 pages: PostgreSQL %.0f ms, workers %.0f ms",
					pages, shape.runners, shape.conc, prog.Stats.Recorded, took.Round(time.Millisecond), rate, rate/bare, bare,
					first, firstTook.Round(time.Millisecond), collyFirst.Round(time.Millisecond), deadlocks, clock.Trace(), collyTrace, cold.Round(time.Millisecond), perK(pgCPU-pgCPU0), perK(workersCPU-workersCPU0))
				if deadlocks > 0 {
					b.Errorf("PostgreSQL logged %d deadlocks during the crawl", deadlocks)
				}
				if int64(prog.Stats.Recorded) != n {
					b.Errorf("Baton recorded %d pages, bare Colly fetched %d distinct ones", prog.Stats.Recorded, n)
				}
				if got := int64(clock.Distinct()); got != n {
					b.Errorf("the site served %d distinct pages during Baton's crawl, not %d", got, n)
				}
			})
		}
	}
}

// runs counts the runs of BenchmarkPostgresCrawl's
// cases in this process (-count runs each again): their job IDs.
var runs int

// siteWide is a job's options for crawling the whole local site: every
// link followed, on its host.
func siteWide() crawl.Options {
	o := crawl.DefaultOptions()
	o.Follow, o.MaxDepth, o.AllowedDomains = true, 100, []string{"127.0.0.1"}
	return o
}
