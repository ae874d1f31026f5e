package testsuite_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
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
	"github.com/batoncrawl/baton/roles"
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
	spec := jobs.Spec{ID: id, Group: c.Group, Seeds: seeds, Options: opts, MaxPages: maxPages, BatchSize: 50, Timers: roles.FastTimers()}
	run, err := tc.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{
		ID: workflows.JobWorkflowID(c.Group, id), TaskQueue: workflows.JobQueue(c.Group),
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
	}, workflows.CrawlJob, workflows.JobInput{Spec: spec})
	if err != nil {
		b.Fatalf("submit %s: %v", id, err)
	}
	return run
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

// BenchmarkCrawlCluster measures, in one run against a real 3-Runner
// cluster (3 runners + 1 backup, real ZooKeeper, Temporal and worker
// processes) and the demo site with a simulated latency per page:
//   - throughput: pages/s of the cluster vs a bare Colly program with the
//     same total concurrency (one request at a time per Runner);
//   - pickup latency: from submitting a job to the first page fetch;
//   - orchestration cost: Temporal history events per 1,000 pages, and the
//     workers' peak memory after a 10,000-page crawl.
//
// Run it with: make bench BENCH=CrawlCluster PKGS=./testsuite/ BENCH_FLAGS=-benchtime=1x
func BenchmarkCrawlCluster(b *testing.B) {
	const latency = 20 * time.Millisecond
	c := testsuite.NewCluster(b, 3, 1, testsuite.FastTimers)
	site := demosite.New(demosite.Config{Pages: 1000, Seed: 11, BrokenLinks: 5, Latency: latency})
	fh := &firstHit{h: site}
	srv := httptest.NewServer(fh)
	b.Cleanup(srv.Close)
	c.StartAll()
	c.WaitElected(90 * time.Second)
	tc := c.Temporal.Client(b)
	opts := crawl.DefaultOptions()
	opts.Follow, opts.MaxDepth, opts.AllowedDomains = true, 100, []string{"127.0.0.1"}
	opts.Parallelism = 8

	// Pickup latency, 10 one-page jobs.
	var pickups []time.Duration
	for i := 0; i < 10; i++ {
		fh.Arm()
		start := time.Now()
		run := submit(b, c, tc, fmt.Sprintf("pickup-%d", i), []string{srv.URL + "/page/" + strconv.Itoa(i) + ".html"}, crawl.DefaultOptions(), 1)
		<-fh.hit
		pickups = append(pickups, fh.at.Sub(start))
		if err := run.Get(context.Background(), nil); err != nil {
			b.Fatal(err)
		}
	}
	slices.Sort(pickups)

	// Throughput: the cluster, then bare Colly with the same concurrency.
	b.ResetTimer()
	t0 := time.Now()
	run := submit(b, c, tc, "throughput", []string{srv.URL + "/"}, opts, 0)
	var prog workflows.JobProgress
	if err := run.Get(context.Background(), &prog); err != nil {
		b.Fatal(err)
	}
	cluster := time.Since(t0)
	b.StopTimer()
	pages := prog.Stats.Recorded
	clusterRate := float64(pages) / cluster.Seconds()

	var bare atomic.Int64
	cc := colly.NewCollector(colly.Async(true), colly.AllowedDomains("127.0.0.1"), colly.MaxDepth(101))
	cc.IgnoreRobotsTxt = false
	_ = cc.Limit(&colly.LimitRule{DomainGlob: "*", Parallelism: 3})
	cc.OnHTML("a[href]", func(e *colly.HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })
	cc.OnHTML("title", func(*colly.HTMLElement) {})
	cc.OnResponse(func(*colly.Response) { bare.Add(1) })
	cc.OnError(func(*colly.Response, error) { bare.Add(1) })
	t1 := time.Now()
	_ = cc.Visit(srv.URL + "/")
	cc.Wait()
	bareRate := float64(bare.Load()) / time.Since(t1).Seconds()
	// (after ResetTimer, which clears reported metrics)
	b.ReportMetric(float64(pickups[len(pickups)/2].Milliseconds()), "pickup-median-ms")
	b.ReportMetric(float64(pickups[len(pickups)-1].Milliseconds()), "pickup-max-ms")
	b.Logf("pickup latency over %d jobs: %v", len(pickups), pickups)
	b.ReportMetric(clusterRate, "cluster-pages/s")
	b.ReportMetric(bareRate, "colly-pages/s")
	b.ReportMetric(clusterRate/bareRate, "ratio")
	b.Logf("throughput: cluster %d pages in %v (%.1f/s), bare Colly %d pages (%.1f/s), ratio %.2f",
		pages, cluster.Round(time.Millisecond), clusterRate, bare.Load(), bareRate, clusterRate/bareRate)

	// Orchestration cost: history events of the job and of the runners'
	// workflows for this crawl, per 1,000 pages.
	events := historyEvents(b, tc, workflows.JobWorkflowID(c.Group, "throughput"))
	b.ReportMetric(float64(events)*1000/float64(pages), "job-events/1000pages")
	b.Logf("job history: %d events for %d pages (%d batches, %d runs)", events, pages, prog.Batches, prog.Runs+1)

	// Memory: a 10,000-page crawl.
	big := demosite.New(demosite.Config{Pages: 10000, Seed: 12})
	bigSrv := httptest.NewServer(big)
	b.Cleanup(bigSrv.Close)
	o2 := opts
	run = submit(b, c, tc, "big", []string{bigSrv.URL + "/"}, o2, 0)
	if err := run.Get(context.Background(), &prog); err != nil {
		b.Fatal(err)
	}
	maxRSS := 0
	for i := 1; i <= 4; i++ {
		maxRSS = max(maxRSS, rssKB(c.Process(i).Pid()))
	}
	b.ReportMetric(float64(maxRSS)/1024, "worker-peak-MiB")
	events = historyEvents(b, tc, workflows.JobWorkflowID(c.Group, "big"))
	b.Logf("10k crawl: %d pages, %d job history events (%.0f per 1000 pages), %d runs, worker peak RSS %d MiB",
		prog.Stats.Recorded, events, float64(events)*1000/float64(prog.Stats.Recorded), prog.Runs+1, maxRSS/1024)
}
