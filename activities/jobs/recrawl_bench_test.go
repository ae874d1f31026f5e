package jobs_test

import (
	"context"
	"net/http/httptest"
	"runtime/pprof"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/crawl/demosite"
	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/activities/jobs/sqlstore"
)

// BenchmarkRecrawl is a daily crawl of the demo site's recrawl section of
// 10,000 pages (a BFS tree, a 2 ms latency per answer, 304s included), of
// which the same 10 % change every day, on one in-process Runner over a
// SQLite store, with --adaptive --adaptive-floor 20h --adaptive-cap 336h.
// The days are a calendar of the benchmark's own (BatchRunner.Clock, one
// day between runs); the site, its 304s and its changes are real. Three
// runs, each with the previous as baseline, the site at its next revision:
//
//   - first: every page new, downloaded in full;
//   - second (day 2): every page due (its floor of 20 h has passed), so
//     every page is requested with its validators: the plain second run,
//     9,000 pages answered 304;
//   - third (day 3): the steady state of --adaptive: the 9,000 pages found
//     unchanged have an interval of 30 h and are not due (carried over,
//     not requested), the 1,000 that changed have 20 h and are due:
//     requested, found changed again.
//
// Each run's CPU samples carry the label run=first|second|third
// (go tool pprof -tagfocus run=second). It reports each later run's time, CPU time (the process's: the site's
// and the store's too) and body bytes as a share of the first's, the pages answered 304 in the second run and the requests and
// changed pages of the third. Run it alone:
//
//	go test -run '^$' -bench BenchmarkRecrawl -benchtime 1x -count 5 ./activities/jobs/
func BenchmarkRecrawl(b *testing.B) {
	const pages = 10000
	site := demosite.New(demosite.Config{Recrawl: pages, Latency: 2 * time.Millisecond})
	srv := httptest.NewServer(site)
	b.Cleanup(srv.Close)
	for i := 0; i < b.N; i++ {
		st, err := sqlstore.OpenSQLite(context.Background(), b.TempDir())
		require.NoError(b, err)
		var day atomic.Int64
		start := time.Now()
		clock := func() time.Time { return start.Add(time.Duration(day.Load()) * 24 * time.Hour) }
		spec := func(id, baseline string) jobs.Spec { return dailySpec(srv.URL, id, baseline, 500) }
		runs := []string{"first", "second", "third"}
		took := make([]time.Duration, len(runs))
		cpu := make([]time.Duration, len(runs))
		answers := make([]demosite.Answers, len(runs))
		reports := make([]jobs.Report, len(runs))
		b.ResetTimer()
		for n, id := range runs {
			site.SetRevision(n + 1)
			site.ResetHits()
			day.Store(int64(n))
			baseline := ""
			if n > 0 {
				baseline = runs[n-1]
			}
			t0, c0 := time.Now(), cpuTime()
			pprof.Do(context.Background(), pprof.Labels("run", id), func(context.Context) {
				benchCrawl(b, st, spec(id, baseline), clock, false)
			})
			took[n], cpu[n] = time.Since(t0), cpuTime()-c0
			for _, a := range site.Answers() {
				answers[n].Full += a.Full
				answers[n].NotModified += a.NotModified
			}
		}
		b.StopTimer()
		for n, id := range runs {
			reports[n], err = jobs.BuildReport(context.Background(), st, id)
			require.NoError(b, err)
		}
		require.Equal(b, pages+1, reports[2].Pages)
		require.Equal(b, pages/10, reports[2].Changes.Changed, "the third run finds the 10 % that changed")
		ratio := func(n int) (float64, float64) {
			return took[n].Seconds() / took[0].Seconds(), float64(reports[n].Bytes) / float64(reports[0].Bytes)
		}
		t2, b2 := ratio(1)
		t3, b3 := ratio(2)
		b.ReportMetric(took[0].Seconds(), "first-s")
		b.ReportMetric(t2, "second/first-time")
		b.ReportMetric(b2, "second/first-bytes")
		b.ReportMetric(float64(answers[1].NotModified), "second-answered-304")
		b.ReportMetric(t3, "third/first-time")
		b.ReportMetric(cpu[1].Seconds()/cpu[0].Seconds(), "second/first-cpu")
		b.ReportMetric(cpu[2].Seconds()/cpu[0].Seconds(), "third/first-cpu")
		b.ReportMetric(b3, "third/first-bytes")
		b.ReportMetric(float64(answers[2].Full+answers[2].NotModified), "third-requests")
		for n, id := range runs {
			changes := "none (no baseline)"
			if c := reports[n].Changes; c != nil {
				changes = c.Line(reports[n].Baseline)
			}
			b.Logf("%s: %v, %d pages, %d body bytes, %d answered in full, %d answered 304, changes %s", id, took[n].Round(time.Millisecond),
				reports[n].Pages, reports[n].Bytes, answers[n].Full, answers[n].NotModified, changes)
		}
		_ = st.Close()
	}
}

// dailySpec is a job of the daily recrawl over the demo site's recrawl
// section at siteURL: followed to depth 100, its prices selected, each
// run with the previous as baseline under --adaptive (floor 20 h, cap
// 336 h), in batches of batch URLs.
func dailySpec(siteURL, id, baseline string, batch int) jobs.Spec {
	opts := crawl.DefaultOptions()
	opts.Follow, opts.MaxDepth, opts.Parallelism = true, 100, 8
	opts.AllowedDomains = []string{strings.TrimPrefix(siteURL, "http://")}
	opts.Selectors = map[string]string{"price": ".price"}
	return jobs.Spec{ID: id, Group: testGroup, Seeds: []string{siteURL + demosite.RecrawlPrefix}, Options: opts,
		BatchSize: batch, Baseline: baseline, Adaptive: &jobs.Adaptive{Floor: 20 * time.Hour, Cap: 336 * time.Hour}}
}

// cpuTime is the CPU time (user and system) the process has used: on a
// shared machine a run's CPU time varies less with the load than its time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchCrawl runs a job to its end with one Runner, batch after batch,
// its adaptive schedule on clock; perPage: its pages not due recorded page
// by page (BatchRunner.NoBulkCarry).
func benchCrawl(b testing.TB, st jobs.Store, spec jobs.Spec, clock func() time.Time, perPage bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	_, err := (&jobs.Activities{Store: st}).JobStart(ctx, spec)
	require.NoError(b, err)
	br := &jobs.BatchRunner{Store: st, Pages: crawl.NewEngine(), Concurrency: 16, Clock: clock, NoBulkCarry: perPage}
	for seq := 0; ; seq++ {
		id := jobs.BatchID(spec.ID, seq)
		bi, err := st.TakeBatch(ctx, spec.ID, id, spec.BatchSize)
		require.NoError(b, err)
		if bi.Size == 0 {
			return
		}
		_, err = st.Claim(ctx, spec.ID, id, "sc-crawler_1", 1)
		require.NoError(b, err)
		_, err = br.RunBatch(ctx, jobs.BatchRun{Job: spec.ID, Batch: id, Runner: "sc-crawler_1", Epoch: 1, Log: quiet()})
		require.NoError(b, err)
	}
}
