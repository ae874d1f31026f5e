package jobs_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/crawl/demosite"
	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/activities/jobs/sqlstore"
)

// BenchmarkRecrawl crawls the demo site's recrawl section of 10,000 pages
// (a BFS tree, a 2 ms latency per answer), moves it to its next revision
// (10 % of the pages change) and crawls it again with the first run as
// baseline, on one in-process Runner over a SQLite store. It reports the
// second run's time and body bytes as a share of the first's
// (second/first-time, second/first-bytes) and the pages answered 304.
// Run it alone:
//
//	go test -run '^$' -bench BenchmarkRecrawl -benchtime 1x ./activities/jobs/
func BenchmarkRecrawl(b *testing.B) {
	const pages = 10000
	site := demosite.New(demosite.Config{Recrawl: pages, Latency: 2 * time.Millisecond})
	srv := httptest.NewServer(site)
	b.Cleanup(srv.Close)
	for i := 0; i < b.N; i++ {
		site.SetRevision(1)
		st, err := sqlstore.OpenSQLite(context.Background(), b.TempDir())
		require.NoError(b, err)
		spec := func(id, baseline string) jobs.Spec {
			opts := crawl.DefaultOptions()
			opts.Follow, opts.MaxDepth, opts.Parallelism = true, 100, 8
			opts.AllowedDomains = []string{strings.TrimPrefix(srv.URL, "http://")}
			opts.Selectors = map[string]string{"price": ".price"}
			return jobs.Spec{ID: id, Group: testGroup, Seeds: []string{srv.URL + demosite.RecrawlPrefix}, Options: opts,
				BatchSize: 500, Baseline: baseline}
		}
		b.ResetTimer()
		start := time.Now()
		benchCrawl(b, st, spec("first", ""))
		first := time.Since(start)
		site.SetRevision(2)
		site.ResetHits()
		start = time.Now()
		benchCrawl(b, st, spec("second", "first"))
		second := time.Since(start)
		b.StopTimer()

		r1, err := jobs.BuildReport(context.Background(), st, "first")
		require.NoError(b, err)
		r2, err := jobs.BuildReport(context.Background(), st, "second")
		require.NoError(b, err)
		require.Equal(b, pages+1, r2.Pages)
		not := 0
		for _, a := range site.Answers() {
			not += a.NotModified
		}
		b.ReportMetric(first.Seconds(), "first-s")
		b.ReportMetric(second.Seconds(), "second-s")
		b.ReportMetric(second.Seconds()/first.Seconds(), "second/first-time")
		b.ReportMetric(float64(r2.Bytes)/float64(r1.Bytes), "second/first-bytes")
		b.ReportMetric(float64(not), "answered-304")
		b.Logf("first %v (%d pages, %d body bytes), second %v (%d body bytes, %d answered 304), changes %s",
			first.Round(time.Millisecond), r1.Pages, r1.Bytes, second.Round(time.Millisecond), r2.Bytes, not, r2.Changes.Line("first"))
		_ = st.Close()
	}
}

// benchCrawl runs a job to its end with one Runner, batch after batch.
func benchCrawl(b *testing.B, st jobs.Store, spec jobs.Spec) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	_, err := (&jobs.Activities{Store: st}).JobStart(ctx, spec)
	require.NoError(b, err)
	br := &jobs.BatchRunner{Store: st, Pages: crawl.NewEngine(), Concurrency: 16}
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
