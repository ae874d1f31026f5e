package testsuite_test

import (
	"fmt"
	"os/exec"
	"testing"
	"time"

	"github.com/batoncrawl/baton/testsuite"
)

// BenchmarkCrawlWait times a one-page crawl as a user sees it: `baton
// crawl URL --max-pages 1 --wait`, from the command's start to its exit,
// on a one-worker group that is up and idle, against a local site that
// answers at once. One job first warms the cluster up; then it reports
// the median, fastest and slowest of BATON_BENCH_RUNS jobs (5 by
// default) and the machine's 1-minute load average. Run it with
//
//	make bench BENCH='^BenchmarkCrawlWait$' PKGS=./testsuite/ BENCH_FLAGS=-benchtime=1x
func BenchmarkCrawlWait(b *testing.B) {
	runs := benchRuns(b, 5)
	c := testsuite.NewCluster(b, 1, 0)
	site := testsuite.NewSite(b, 0)
	c.StartAll()
	c.WaitElected(60 * time.Second)
	job := 0
	crawl := func() time.Duration {
		job++
		args := append(c.StarterArgs(), "crawl", "--id", fmt.Sprintf("one-%d", job), "--max-pages", "1", "--wait",
			site.URLs(fmt.Sprintf("p%d", job), 1)[0])
		start := time.Now()
		out, err := exec.Command(c.Starter, args...).CombinedOutput()
		if err != nil {
			b.Fatalf("baton crawl: %v: %s", err, out)
		}
		d := time.Since(start)
		return d
	}
	crawl() // the first job after the start, not measured
	var took []time.Duration
	for i := 0; i < b.N; i++ {
		for r := 0; r < runs; r++ {
			took = append(took, crawl())
		}
	}
	b.Logf("baton crawl --wait, one page: %v", took)
	reportSpread(b, took, "cli")
}
