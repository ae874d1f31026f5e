package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/activities/jobs/sqlstore"
	"github.com/batoncrawl/baton/testsuite"
)

// manyResults stores a job of n recorded pages, each with a title, a few
// links and two fields, as a crawl of a shop would.
func manyResults(tb testing.TB, dir string, n int) (*sqlstore.Store, jobs.Spec) {
	tb.Helper()
	ctx := context.Background()
	js, err := sqlstore.OpenSQLite(ctx, dir)
	require.NoError(tb, err)
	tb.Cleanup(func() { js.Close() })
	opts := crawl.DefaultOptions()
	opts.Selectors = map[string]string{"price": ".price", "heading": "h1"}
	u := func(i int) string { return fmt.Sprintf("http://127.0.0.1:1/page/%d.html", i) }
	spec := jobs.Spec{ID: "many", Group: "g", Seeds: []string{u(0)}, Options: opts}
	seeds := make([]jobs.Entry, n)
	for i := range seeds {
		seeds[i] = jobs.Entry{URL: u(i)}
	}
	_, err = js.CreateJob(ctx, spec, seeds)
	require.NoError(tb, err)
	_, err = js.TakeBatch(ctx, spec.ID, "b1", n)
	require.NoError(tb, err)
	_, err = js.Claim(ctx, spec.ID, "b1", "r1", 1)
	require.NoError(tb, err)
	const group = 2000
	for lo := 0; lo < n; lo += group {
		var rs []jobs.Record
		for i := lo; i < min(n, lo+group); i++ {
			p := crawl.Page{URL: u(i), FinalURL: u(i), StatusCode: 200, ContentType: "text/html; charset=utf-8", Bytes: 4200,
				DurationMS: 21, Title: "Product " + strconv.Itoa(i) + " — a shop's page title of usual length", Attempts: 1,
				BodyHash: fmt.Sprintf("%064x", i), Links: []string{u(i + 1), u(i + 2), u(i * 7 % n), u(i * 13 % n), u(0)},
				Fields: map[string][]string{"price": {"$" + strconv.Itoa(i%500) + ".99"}, "heading": {"Product " + strconv.Itoa(i)}}}
			rs = append(rs, jobs.Record{Job: spec.ID, Batch: "b1", Runner: "r1", Epoch: 1, URL: p.URL,
				Page: &jobs.PageRecord{Page: p, Job: spec.ID, Batch: "b1", Runner: "r1", Epoch: 1}})
		}
		_, err := js.RecordAll(ctx, rs)
		require.NoError(tb, err)
	}
	return js, spec
}

// TestParquetRowGroups: an export is written in row groups of
// parquetRowGroupRows, every row in it.
func TestParquetRowGroups(t *testing.T) {
	old := parquetRowGroupRows
	parquetRowGroupRows = 100
	t.Cleanup(func() { parquetRowGroupRows = old })
	js, spec := manyResults(t, t.TempDir(), 350)
	path := filepath.Join(t.TempDir(), "pages.parquet")
	f, err := os.Create(path)
	require.NoError(t, err)
	require.NoError(t, writeResults(context.Background(), f, js, spec, formatParquet))
	require.NoError(t, f.Close())
	rf, err := os.Open(path)
	require.NoError(t, err)
	defer rf.Close()
	st, err := rf.Stat()
	require.NoError(t, err)
	pf, err := parquet.OpenFile(rf, st.Size())
	require.NoError(t, err)
	assert.Equal(t, int64(350), pf.NumRows())
	assert.Len(t, pf.RowGroups(), 4, "row groups of 100 rows")
}

// BenchmarkExport exports a job of 10^6 pages (BATON_EXPORT_ROWS to
// change it) with the real CLI, `baton results JOB --format F -o FILE`, as
// JSONL, CSV and Parquet, and reports each one's time and the CLI
// process's peak RSS (its rusage).
//
// Run it with: make bench BENCH=Export PKGS=./starter/ BENCH_FLAGS=-benchtime=1x
func BenchmarkExport(b *testing.B) {
	n := 1000000
	if s := os.Getenv("BATON_EXPORT_ROWS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n <= 0 {
			b.Fatalf("BATON_EXPORT_ROWS=%q: not a row count", s)
		}
	}
	bin := filepath.Join(b.TempDir(), "baton")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v: %s", err, out)
	}
	dir := b.TempDir()
	t0 := time.Now()
	js, spec := manyResults(b, dir, n)
	js.Close()
	b.Logf("stored %d pages in %v", n, time.Since(t0).Round(time.Millisecond))
	zk := testsuite.ClosedPort(b)
	for _, format := range []string{formatJSONL, formatCSV, formatParquet} {
		b.Run(format, func(b *testing.B) {
			out := filepath.Join(b.TempDir(), "pages."+format)
			cmd := exec.Command(bin, "--zk-hosts", zk, "--connect-timeout", "2s", "results", spec.ID,
				"--data-dir", dir, "--format", format, "-o", out)
			var msg bytes.Buffer
			cmd.Stdout, cmd.Stderr = &msg, &msg
			b.ResetTimer()
			took, rss, err := testsuite.RunMeasured(cmd)
			b.StopTimer()
			if err != nil {
				b.Fatalf("baton results: %v: %s", err, msg.String())
			}
			fi, err := os.Stat(out)
			require.NoError(b, err)
			b.ReportMetric(float64(rss)/1024, "cli-peak-RSS-MiB")
			b.ReportMetric(float64(n)/took.Seconds(), "rows/s")
			b.Logf("%s: %d rows in %v, %d MiB written, CLI peak RSS %d MiB", format, n, took.Round(time.Millisecond), fi.Size()>>20, rss/1024)
		})
	}
}
