package testsuite_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gocolly/colly/v2"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/crawl/demosite"
	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/testsuite"
	"github.com/batoncrawl/baton/workflows"
)

// firstHit wraps a site and remembers when it first served a page (not
// robots.txt) after Arm.
type firstHit struct {
	h     http.Handler
	armed atomic.Bool
	mu    sync.Mutex
	at    time.Time
	hit   chan struct{}
}

func (f *firstHit) Arm() {
	f.mu.Lock()
	f.at, f.hit = time.Time{}, make(chan struct{})
	f.mu.Unlock()
	f.armed.Store(true)
}

func (f *firstHit) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/robots.txt" && f.armed.CompareAndSwap(true, false) {
		f.mu.Lock()
		f.at = time.Now()
		close(f.hit)
		f.mu.Unlock()
	}
	f.h.ServeHTTP(w, r)
}

func submit(b *testing.B, c *testsuite.Cluster, tc client.Client, id string, seeds []string, opts crawl.Options, maxPages int) client.WorkflowRun {
	b.Helper()
	spec := jobs.Spec{ID: id, Group: c.Group, Seeds: seeds, Options: opts, MaxPages: maxPages}
	run, err := tc.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{
		ID: workflows.JobWorkflowID(c.Group, id), TaskQueue: workflows.JobQueue(c.Group), WorkflowTaskTimeout: workflows.JobTaskTimeout,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
	}, workflows.CrawlJob, workflows.JobInput{Spec: spec})
	if err != nil {
		b.Fatalf("submit %s: %v", id, err)
	}
	return run
}

// crawlTimed runs a job as the benchmark's measured crawl (the timer
// runs from its submission to its end) and returns its progress and how
// long it took.
func crawlTimed(b *testing.B, c *testsuite.Cluster, tc client.Client, id string, seeds []string, opts crawl.Options) (workflows.JobProgress, time.Duration) {
	b.Helper()
	b.ResetTimer()
	t0 := time.Now()
	run := submit(b, c, tc, id, seeds, opts, 0)
	var prog workflows.JobProgress
	if err := run.Get(context.Background(), &prog); err != nil {
		b.Fatal(err)
	}
	took := time.Since(t0)
	b.StopTimer()
	return prog, took
}

func historyEvents(b *testing.B, tc client.Client, wid string) int {
	n := 0
	// Follow continue-as-new runs: count every run of the workflow ID.
	runID := ""
	for {
		it := tc.GetWorkflowHistory(context.Background(), wid, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		next := ""
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				b.Fatalf("history of %s: %v", wid, err)
			}
			n++
			if a := ev.GetWorkflowExecutionContinuedAsNewEventAttributes(); a != nil {
				next = a.NewExecutionRunId
			}
		}
		if next == "" || runID == next {
			return n
		}
		runID = next
	}
}

func rssKB(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			f := strings.Fields(line)
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	return 0
}

// taskWrites sums the versions of the group's Task znodes: how many times
// ZooKeeper wrote them.
func taskWrites(b *testing.B, c *testsuite.Cluster, n int) int {
	total := 0
	for i := 1; i <= n; i++ {
		_, v, err := c.Meta.Store.Get(context.Background(), c.Meta.TaskPath(testsuite.Name(i)))
		if err != nil {
			b.Fatalf("task of %s: %v", testsuite.Name(i), err)
		}
		total += int(v)
	}
	return total
}

// bareColly crawls the site at base with one Colly collector and the given
// parallelism, as a user would without Baton, and returns pages/s.
func bareColly(base string, parallelism int) (int64, float64) {
	var pages atomic.Int64
	cc := newBareColly(parallelism)
	cc.OnResponse(func(*colly.Response) { pages.Add(1) })
	cc.OnError(func(*colly.Response, error) { pages.Add(1) })
	t := time.Now()
	_ = cc.Visit(base + "/")
	cc.Wait()
	return pages.Load(), float64(pages.Load()) / time.Since(t).Seconds()
}

// collyStart is bareColly that stops after n requests: the start of a
// crawl, measured at the site (pageClock).
func collyStart(base string, parallelism, n int) {
	cc := newBareColly(parallelism)
	cc.MaxRequests = uint32(n)
	_ = cc.Visit(base + "/")
	cc.Wait()
}

// newBareColly is the collector of bareColly: async, the local site's
// links followed, robots.txt obeyed, parallelism requests at once.
func newBareColly(parallelism int) *colly.Collector {
	cc := colly.NewCollector(colly.Async(true), colly.AllowedDomains("127.0.0.1"), colly.MaxDepth(101))
	cc.IgnoreRobotsTxt = false
	_ = cc.Limit(&colly.LimitRule{DomainGlob: "*", Parallelism: parallelism})
	cc.OnHTML("a[href]", func(e *colly.HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })
	cc.OnHTML("title", func(*colly.HTMLElement) {})
	return cc
}

// BenchmarkCrawlCluster measures a Baton cluster against bare Colly at the
// same total concurrency (24), side by side in one run, on the demo site
// with 20 ms per page and 10,000 pages, on both job stores (SQLite, and
// PostgreSQL with every worker on its own data directory) and two shapes:
// 1 Runner × 24 and 3 Runners × 8 (each cluster has one backup too, real
// ZooKeeper, Temporal and worker processes); and 3 Runners × 1 on a
// 1,000-page site against bare Colly at 3, the shape of the figures before
// concurrent Runners. For each it reports:
//   - throughput: pages/s, and the ratio to bare Colly;
//   - pickup: submit → first page fetched, and submit → job completed, for
//     one-page jobs on the idle cluster (10 each), and submit → first page
//     fetched after the cluster idled for 2 s (5 jobs);
//   - orchestration: CrawlJob history events and ZooKeeper Task writes per
//     1,000 pages;
//   - the workers' peak RSS.
//
// Run it with: make bench BENCH=CrawlCluster PKGS=./testsuite/ BENCH_FLAGS=-benchtime=1x
func BenchmarkCrawlCluster(b *testing.B) {
	const latency = 20 * time.Millisecond
	type site struct {
		url         string
		hit         *firstHit
		bare        float64 // bare Colly's pages/s on it
		parallelism int     // bare Colly's parallelism
	}
	serve := func(pages, parallelism int) site {
		fh := &firstHit{h: demosite.New(demosite.Config{Pages: pages, Seed: 11, BrokenLinks: 5, Latency: latency})}
		srv := httptest.NewServer(fh)
		b.Cleanup(srv.Close)
		n, rate := bareColly(srv.URL, parallelism)
		b.Logf("bare Colly, parallelism %d: %d pages, %.1f pages/s (the site's limit is %.0f)", parallelism, n, rate, float64(parallelism)/latency.Seconds())
		return site{url: srv.URL, hit: fh, bare: rate, parallelism: parallelism}
	}
	// 10,000 pages for the shapes at 24 requests at once; the 1,000-page
	// site of the file store's figure (3 Runners, one fetch at a time) for
	// comparison with it.
	big, small := serve(10000, 24), serve(1000, 3)
	var pg *testsuite.Postgres // one server for every shape, stopped at the end
	outer := b
	for _, engine := range []string{"sqlite", "postgres"} {
		for _, shape := range []struct {
			runners, conc int
			site          site
		}{{1, 24, big}, {3, 8, big}, {3, 1, small}} {
			b.Run(fmt.Sprintf("%s/%dx%d", engine, shape.runners, shape.conc), func(b *testing.B) {
				fh, base, bareRate := shape.site.hit, shape.site.url, shape.site.bare
				opts := []testsuite.ClusterOption{testsuite.FastTimers,
					testsuite.WithWorkerArgs("--concurrency", strconv.Itoa(shape.conc))}
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
				n := shape.runners + 1
				c := testsuite.NewCluster(b, shape.runners, 1, opts...)
				c.StartAll()
				c.WaitElected(90 * time.Second)
				tc := c.Temporal.Client(b)
				prefix := fmt.Sprintf("%s-%dx%d", engine, shape.runners, shape.conc)

				// pickup runs one one-page job: submit → first page fetched,
				// and submit → job completed.
				pickup := func(id string, page int) (first, whole time.Duration) {
					fh.Arm()
					start := time.Now()
					run := submit(b, c, tc, id, []string{base + "/page/" + strconv.Itoa(page) + ".html"}, crawl.DefaultOptions(), 1)
					select {
					case <-fh.hit:
					case <-time.After(time.Minute):
						b.Fatalf("pickup job %s: no page fetched within a minute", id)
					}
					first = fh.at.Sub(start)
					if err := run.Get(context.Background(), nil); err != nil {
						b.Fatal(err)
					}
					return first, time.Since(start)
				}
				// Pickup, 10 one-page jobs on the idle cluster, one after
				// the other.
				var first, whole []time.Duration
				for i := 0; i < 10; i++ {
					f, w := pickup(fmt.Sprintf("%s-pickup-%d", prefix, i), i)
					first, whole = append(first, f), append(whole, w)
				}
				slices.Sort(first)
				slices.Sort(whole)
				// After the cluster idled for 2 s (its Runners waiting for
				// work, not just done with a batch), as a cluster that
				// crawls now and then is found.
				var idleFirst []time.Duration
				for i := 0; i < 5; i++ {
					time.Sleep(2 * time.Second) // the idle time measured after, not a synchronisation
					f, _ := pickup(fmt.Sprintf("%s-idle-%d", prefix, i), 40+i)
					idleFirst = append(idleFirst, f)
				}
				slices.Sort(idleFirst)
				// And as a user sees it: `baton crawl URL --wait`, from the
				// command's start to its exit.
				var cli []time.Duration
				for i := 0; i < 10; i++ {
					args := append(c.StarterArgs(), "crawl", "--id", fmt.Sprintf("%s-cli-%d", prefix, i), "--max-pages", "1",
						"--timers", "fast", "--wait", base+"/page/"+strconv.Itoa(20+i)+".html")
					start := time.Now()
					if out, err := exec.Command(c.Starter, args...).CombinedOutput(); err != nil {
						b.Fatalf("baton crawl: %v: %s", err, out)
					}
					cli = append(cli, time.Since(start))
				}
				slices.Sort(cli)

				o := crawl.DefaultOptions()
				o.Follow, o.MaxDepth, o.AllowedDomains = true, 100, []string{"127.0.0.1"}
				// The job's parallelism holds across its Runners: the
				// host's, as bare Colly's, is the total concurrency.
				o.Parallelism = shape.runners * shape.conc
				writes0 := taskWrites(b, c, n)
				b.ResetTimer()
				t0 := time.Now()
				run := submit(b, c, tc, prefix+"-throughput", []string{base + "/"}, o, 0)
				var prog workflows.JobProgress
				if err := run.Get(context.Background(), &prog); err != nil {
					b.Fatal(err)
				}
				took := time.Since(t0)
				b.StopTimer()
				pages := prog.Stats.Recorded
				rate := float64(pages) / took.Seconds()
				writes := taskWrites(b, c, n) - writes0
				events := historyEvents(b, tc, workflows.JobWorkflowID(c.Group, prefix+"-throughput"))
				peak := 0
				for i := 1; i <= n; i++ {
					peak = max(peak, rssKB(c.Process(i).Pid()))
				}
				b.ReportMetric(rate, "pages/s")
				b.ReportMetric(bareRate, fmt.Sprintf("colly%d-pages/s", shape.site.parallelism))
				b.ReportMetric(rate/bareRate, "ratio")
				b.ReportMetric(float64(first[len(first)/2].Milliseconds()), "pickup-first-fetch-median-ms")
				b.ReportMetric(float64(idleFirst[len(idleFirst)/2].Milliseconds()), "pickup-idle-first-fetch-median-ms")
				b.ReportMetric(float64(whole[len(whole)/2].Milliseconds()), "pickup-done-median-ms")
				b.ReportMetric(float64(cli[len(cli)/2].Milliseconds()), "pickup-cli-median-ms")
				b.ReportMetric(float64(events)*1000/float64(pages), "job-events/1000pages")
				b.ReportMetric(float64(writes)*1000/float64(pages), "zk-task-writes/1000pages")
				b.ReportMetric(float64(peak)/1024, "worker-peak-MiB")
				b.Logf("%s %dx%d: %d pages in %v (%.1f/s, %.2f of bare Colly); pickup first fetch %v, done %v, CLI %v; %d job events (%d batches, %d runs); %d Task writes; peak RSS %d MiB",
					engine, shape.runners, shape.conc, pages, took.Round(time.Millisecond), rate, rate/bareRate,
					first, whole, cli, events, prog.Batches, prog.Runs+1, writes, peak/1024)
			})
		}
	}
}
