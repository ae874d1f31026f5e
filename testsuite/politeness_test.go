package testsuite_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/roles"
	"github.com/batoncrawl/baton/testsuite"
)

// Politeness across the cluster: a job's --parallelism, --delay and
// robots.txt hold for the whole job, whichever Runners crawl it.

// span is one request a politeSite served: its host, path, User-Agent,
// and when its handler started and ended.
type span struct {
	host, path, agent string
	start, end        time.Time
}

// politeSite serves a tree of pages (/, /p/1 … /p/pages-1; page i links
// to 2i+1 and 2i+2, and back to /), each after latency, on every host it
// listens on, with a robots.txt that allows all; it records every
// request's start and end.
type politeSite struct {
	pages   int
	latency time.Duration
	mu      sync.Mutex
	spans   []span
	srvs    []*httptest.Server
}

// serveOn listens on ip (a loopback address: 127/8 all works on Linux)
// and returns the site's base URL there.
func (s *politeSite) serveOn(t *testing.T, ip string) string {
	t.Helper()
	ln, err := net.Listen("tcp", ip+":0")
	require.NoError(t, err, "listen on %s", ip)
	srv := httptest.NewUnstartedServer(s)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	s.srvs = append(s.srvs, srv)
	return srv.URL
}

func (s *politeSite) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	defer func() {
		s.mu.Lock()
		s.spans = append(s.spans, span{host: r.Host, path: r.URL.Path, agent: r.UserAgent(), start: start, end: time.Now()})
		s.mu.Unlock()
	}()
	if r.URL.Path == "/robots.txt" {
		fmt.Fprint(w, "User-agent: *\nAllow: /\n")
		return
	}
	i := 0
	if r.URL.Path != "/" {
		if _, err := fmt.Sscanf(r.URL.Path, "/p/%d", &i); err != nil || i <= 0 || i >= s.pages {
			http.NotFound(w, r)
			return
		}
	}
	time.Sleep(s.latency)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	fmt.Fprintf(w, "<html><head><title>page %d</title></head><body><a href=\"/\">home</a>", i)
	for _, k := range []int{2*i + 1, 2*i + 2} {
		if k < s.pages {
			fmt.Fprintf(w, " <a href=\"/p/%d\">%d</a>", k, k)
		}
	}
	fmt.Fprint(w, "</body></html>")
}

// byHost returns the requests served so far, by host, in start order.
func (s *politeSite) byHost() map[string][]span {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string][]span{}
	for _, sp := range s.spans {
		out[sp.host] = append(out[sp.host], sp)
	}
	for _, ss := range out {
		slices.SortFunc(ss, func(a, b span) int { return a.start.Compare(b.start) })
	}
	return out
}

// maxInFlight is the most requests of spans in flight at one moment (an
// end at the very moment of a start does not overlap it).
func maxInFlight(spans []span) int {
	type ev struct {
		at time.Time
		d  int
	}
	var evs []ev
	for _, s := range spans {
		evs = append(evs, ev{s.start, 1}, ev{s.end, -1})
	}
	slices.SortFunc(evs, func(a, b ev) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.d - b.d // ends first
	})
	cur, peak := 0, 0
	for _, e := range evs {
		cur += e.d
		peak = max(peak, cur)
	}
	return peak
}

// pageSpans leaves robots.txt out (it is fetched once per job, before the
// host's first page, outside the per-host limiter).
func pageSpans(spans []span) []span {
	return slices.DeleteFunc(slices.Clone(spans), func(s span) bool { return s.path == "/robots.txt" })
}

// minGap is the smallest gap between two starts of spans (in start
// order), and where.
func minGap(spans []span) (time.Duration, int) {
	gap, at := time.Duration(1<<62), -1
	for i := 1; i < len(spans); i++ {
		if g := spans[i].start.Sub(spans[i-1].start); g < gap {
			gap, at = g, i
		}
	}
	return gap, at
}

func robotsFetches(spans []span) int {
	return len(spans) - len(pageSpans(spans))
}

// crawled waits for a job's CLI to exit 0, and checks every page of the
// site on each base was recorded exactly once; it returns the job's pages
// per Runner.
func crawled(t *testing.T, c *testsuite.Cluster, p *testsuite.Process, job string, site *politeSite, bases ...string) map[string]int {
	t.Helper()
	require.NoError(t, p.Wait(5*time.Minute), p.Logs())
	require.Equal(t, 0, p.ExitCode(), p.Logs())
	recs := readResults(t, c.OpenStore(), job)
	count := map[string]int{}
	by := map[string]int{}
	for _, r := range recs {
		count[r.URL]++
		by[r.Runner]++
		assert.Empty(t, r.Error, "%s", r.URL)
	}
	for _, b := range bases {
		for i := 0; i < site.pages; i++ {
			u := b + "/"
			if i > 0 {
				u = fmt.Sprintf("%s/p/%d", b, i)
			}
			assert.Equal(t, 1, count[u], "%s recorded once", u)
		}
	}
	assert.Len(t, recs, len(bases)*site.pages, "every page of every host, once")
	return by
}

// At the site: a 3-Runner crawl of one host with
// --parallelism 2 --delay 50ms keeps both, measured at the server: at
// most 2 requests in flight at any moment, no two page requests started
// closer than 50 ms, whichever Runners fetch them (batches of 8, so the
// host changes hands); robots.txt is fetched once for the job.
func TestPolitenessOneHostAcrossThreeRunners(t *testing.T) {
	const delay = 50 * time.Millisecond
	c := testsuite.NewCluster(t, 3, 1, testsuite.FastTimers)
	site := &politeSite{pages: 60, latency: 20 * time.Millisecond}
	base := site.serveOn(t, "127.0.0.1")
	c.StartAll()
	c.WaitElected(electTimeout)

	start := time.Now()
	// Batches of 8: the host changes hands between the Runners as the
	// job hands the batches out.
	p := startCrawl(c, "polite1", base+"/", "--follow", "--depth", "100", "--max-pages", "0",
		"--parallelism", "2", "--delay", delay.String(), "--batch-size", "8")
	by := crawled(t, c, p, "polite1", site, base)
	took := time.Since(start)

	spans := site.byHost()[strings.TrimPrefix(base, "http://")]
	pages := pageSpans(spans)
	peak := maxInFlight(spans)
	gap, at := minGap(pages)
	t.Logf("one host, 3 Runners, --parallelism 2 --delay %v: %d requests (%d robots.txt) in %v; at most %d in flight; "+
		"least gap between two starts %v (request %d); pages per Runner %v",
		delay, len(spans), robotsFetches(spans), took.Round(time.Millisecond), peak, gap.Round(10*time.Microsecond), at, by)
	assert.LessOrEqual(t, peak, 2, "requests in flight to the host at once")
	assert.GreaterOrEqual(t, gap, delay, "least gap between two starts (request %d)", at)
	assert.Equal(t, 1, robotsFetches(spans), "robots.txt fetched once for the job")
	assert.Len(t, pages, site.pages, "each page fetched once")
	assert.GreaterOrEqual(t, len(by), 2, "the host changed hands: pages per Runner %v", by)
}

// A crawl of six hosts (127.0.0.2-7) by 3 Runners of 4 requests each, at
// --parallelism 2: the hosts are spread over the Runners, every Runner
// fetches pages, no host ever has more than 2 requests in flight, and
// each host's robots.txt is fetched once for the job.
func TestPolitenessManyHostsKeepEveryRunnerBusy(t *testing.T) {
	c := testsuite.NewCluster(t, 3, 1, testsuite.FastTimers, testsuite.WithWorkerArgs("--concurrency", "4"))
	site := &politeSite{pages: 80, latency: 20 * time.Millisecond}
	var bases []string
	for i := 2; i <= 7; i++ {
		bases = append(bases, site.serveOn(t, fmt.Sprintf("127.0.0.%d", i)))
	}
	c.StartAll()
	c.WaitElected(electTimeout)

	start := time.Now()
	args := []string{"--follow", "--depth", "100", "--max-pages", "0", "--parallelism", "2"}
	for _, b := range bases {
		args = append(args, b+"/")
	}
	p := startCrawl(c, "polite6", args...)
	by := crawled(t, c, p, "polite6", site, bases...)
	took := time.Since(start)

	hosts := site.byHost()
	var peaks []string
	for _, b := range bases {
		h := strings.TrimPrefix(b, "http://")
		spans := hosts[h]
		peak := maxInFlight(spans)
		peaks = append(peaks, fmt.Sprintf("%s:%d", h, peak))
		assert.LessOrEqual(t, peak, 2, "%s: requests in flight at once", h)
		assert.Equal(t, 1, robotsFetches(spans), "%s: robots.txt fetched once for the job", h)
	}
	t.Logf("6 hosts, 3 Runners × 4, --parallelism 2: %d pages in %v (%.0f pages/s); most in flight per host %v; pages per Runner %v",
		len(bases)*site.pages, took.Round(time.Millisecond), float64(len(bases)*site.pages)/took.Seconds(), peaks, by)
	for i := 1; i <= 3; i++ {
		assert.Positive(t, by[testsuite.Name(i)], "%s fetched pages", testsuite.Name(i))
	}
}

// A Runner SIGKILLed mid-crawl of several hosts held with a delay: its
// hosts stay its batch's only until the fail-over acts on the batch (the
// backup takes it over with its host leases; with no backup left, the
// job re-queues it, which frees them): each is fetched again within the
// fail-over's bound of the kill (jobs.LeaseTTL: twice the detection
// bound plus 2 s), still at most 2 in flight and 50 ms apart, and every
// page is recorded once.
func TestPolitenessRunnerKilledFreesItsHostsWithinTheFailover(t *testing.T) {
	t.Run("backup takes over", func(t *testing.T) { politeKill(t, false) })
	t.Run("re-queued", func(t *testing.T) { politeKill(t, true) })
}

func politeKill(t *testing.T, noBackup bool) {
	const delay = 50 * time.Millisecond
	c := testsuite.NewCluster(t, 3, 1, testsuite.FastTimers, testsuite.WithWorkerArgs("--concurrency", "4"))
	site := &politeSite{pages: 60, latency: 20 * time.Millisecond}
	var bases []string
	for i := 2; i <= 7; i++ {
		bases = append(bases, site.serveOn(t, fmt.Sprintf("127.0.0.%d", i)))
	}
	c.StartAll()
	c.WaitElected(electTimeout)
	if noBackup {
		c.Kill(4) // the only backup
	}

	args := []string{"--follow", "--depth", "100", "--max-pages", "0", "--parallelism", "2", "--delay", delay.String()}
	for _, b := range bases {
		args = append(args, b+"/")
	}
	p := startCrawl(c, "polite-kill", args...)
	js := c.OpenStore()
	ctx := context.Background()
	// Runner 2 well inside its batch: hosts leased, pages of them left.
	var held []jobs.HostLease
	var batch string
	testsuite.Eventually(t, taskTimeout, "runner 2 to hold hosts with pages left", func() (bool, error) {
		tk := c.Task(2)
		if tk.Job == nil || !tk.Pending() {
			return false, nil
		}
		batch = tk.Job.Batch
		ls, err := js.Leases(ctx, "polite-kill", batch)
		if err != nil || len(ls) == 0 {
			return false, err
		}
		un, err := js.Unfinished(ctx, "polite-kill", batch)
		held = ls
		return len(un) >= 4 && len(readResults(t, js, "polite-kill")) >= 20, err
	})
	killed := c.Kill(2)
	t.Logf("runner 2 SIGKILLed holding batch %s with hosts %v", batch, held)

	by := crawled(t, c, p, "polite-kill", site, bases...)
	bs, err := js.Batches(ctx, "polite-kill", []string{batch})
	require.NoError(t, err)
	require.Len(t, bs, 1)
	if noBackup {
		assert.Equal(t, jobs.BatchRequeued, bs[0].State, "no backup: the job re-queued the batch")
	} else {
		assert.Equal(t, testsuite.Name(4), bs[0].Holder, "the backup took the batch over")
	}
	bound := jobs.LeaseTTL(roles.FastTimers())
	hosts := site.byHost()
	for _, l := range held {
		spans := hosts[l.Host]
		var after time.Time
		for _, s := range spans {
			if s.start.After(killed) && s.path != "/robots.txt" {
				after = s.start
				break
			}
		}
		require.False(t, after.IsZero(), "%s was crawled after the kill", l.Host)
		pages := pageSpans(spans)
		gap, at := minGap(pages)
		t.Logf("%s: next request %v after the kill (fail-over bound %v); at most %d in flight, least gap %v (request %d)",
			l.Host, after.Sub(killed).Round(time.Millisecond), bound, maxInFlight(spans), gap.Round(10*time.Microsecond), at)
		assert.Less(t, after.Sub(killed), bound+3*time.Second, "%s locked no longer than the fail-over takes (and the next pull)", l.Host)
		assert.LessOrEqual(t, maxInFlight(spans), 2, "%s: requests in flight at once", l.Host)
		assert.GreaterOrEqual(t, gap, delay, "%s: least gap between two starts (request %d)", l.Host, at)
	}
	t.Logf("batch %s after the kill: holder %s, epoch %d, state %s; pages per Runner %v", batch, bs[0].Holder, bs[0].Epoch, bs[0].State, by)
}
