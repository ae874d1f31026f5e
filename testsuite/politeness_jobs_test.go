package testsuite_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/batoncrawl/baton/testsuite"
)

// At the site: two jobs of the group crawling one host at once keep its
// --parallelism 2 and --delay together, as one job would (the group's
// budget, crawl --politeness group, the default). One host is crawled by
// two jobs at --parallelism 2 (no delay: its parallelism is shared out),
// another by two jobs at --parallelism 2 --delay 50ms (held by one batch
// of one job at a time), all four jobs at once: at most 2 requests in
// flight at each host, no two page requests at the second closer than
// 50 ms, and every job crawls its whole site.
func TestPolitenessTwoJobsShareAHost(t *testing.T) {
	const delay = 50 * time.Millisecond
	c := testsuite.NewCluster(t, 3, 1, testsuite.FastTimers, testsuite.WithWorkerArgs("--concurrency", "4"))
	shared := &politeSite{pages: 40, latency: 40 * time.Millisecond}
	delayed := &politeSite{pages: 30, latency: 10 * time.Millisecond}
	sharedBase, delayedBase := shared.serveOn(t, "127.0.0.2"), delayed.serveOn(t, "127.0.0.3")
	c.StartAll()
	c.WaitElected(electTimeout)

	type run struct {
		id, base string
		site     *politeSite
		args     []string
	}
	common := []string{"--follow", "--depth", "100", "--max-pages", "0", "--parallelism", "2"}
	var runs []run
	for _, j := range []string{"a", "b"} {
		runs = append(runs,
			run{"shared-" + j, sharedBase, shared, append(slices.Clone(common), "--user-agent", "shared-"+j)},
			run{"delayed-" + j, delayedBase, delayed, append(slices.Clone(common), "--user-agent", "delayed-"+j, "--delay", delay.String())})
	}
	start := time.Now()
	var ps []*testsuite.Process
	for _, r := range runs {
		ps = append(ps, startCrawl(c, r.id, append(r.args, r.base+"/")...))
	}
	for i, r := range runs {
		crawled(t, c, ps[i], r.id, r.site, r.base)
	}
	took := time.Since(start)

	for _, site := range []struct {
		site *politeSite
		base string
		gap  time.Duration
	}{{shared, sharedBase, 0}, {delayed, delayedBase, delay}} {
		host := strings.TrimPrefix(site.base, "http://")
		spans := site.site.byHost()[host]
		perJob := map[string]int{}
		for _, s := range spans {
			perJob[s.agent]++
		}
		peak := maxInFlight(spans)
		gap, at := minGap(pageSpans(spans))
		t.Logf("%s, two jobs at once: %d requests by job %v in %v; at most %d in flight; least gap between two page requests %v (request %d)",
			host, len(spans), perJob, took.Round(time.Millisecond), peak, gap.Round(10*time.Microsecond), at)
		assert.LessOrEqual(t, peak, 2, "%s: requests of both jobs in flight at once", host)
		assert.GreaterOrEqual(t, gap, site.gap, "%s: least gap between two page requests of both jobs (request %d)", host, at)
		assert.Len(t, perJob, 2, "%s: both jobs crawled it: %v", host, perJob)
	}
}
