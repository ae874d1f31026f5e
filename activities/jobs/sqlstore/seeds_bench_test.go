package sqlstore_test

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/activities/jobs/sqlstore"
)

// BenchmarkSeedsQueue runs in one process what `baton crawl --seeds-file`
// does with a seed file (testsuite's BenchmarkSeedsFile runs the real
// CLI): the file checked whole (jobs.ScanSeedFile), then queued into a new
// SQLite store (Plan.Queue). BATON_SEEDS=N sets the file's size (200,000
// by default). It reports the process's CPU time per submission; profile
// it with -cpuprofile.
//
// Run it with: go test ./activities/jobs/sqlstore/ -run '^$' -bench SeedsQueue -benchtime=1x
func BenchmarkSeedsQueue(b *testing.B) {
	n := 200000
	if s := os.Getenv("BATON_SEEDS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n <= 0 {
			b.Fatalf("BATON_SEEDS=%q: not a count", s)
		}
	}
	path := filepath.Join(b.TempDir(), "seeds.txt")
	f, err := os.Create(path)
	require.NoError(b, err)
	w := bufio.NewWriter(f)
	for i := range n {
		fmt.Fprintf(w, "http://127.0.0.1:8000/product/%d/item-%d.html\n", i/100, i)
	}
	require.NoError(b, w.Flush())
	require.NoError(b, f.Close())
	ctx := testCtx(b, 10*time.Minute)
	var scan, queue time.Duration
	cpu0 := processCPU(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		s, err := sqlstore.OpenSQLite(ctx, b.TempDir())
		require.NoError(b, err)
		b.StartTimer()
		t0 := time.Now()
		sf, err := jobs.ScanSeedFile(path, nil)
		require.NoError(b, err)
		t1 := time.Now()
		plan, err := jobs.Submission{ID: fmt.Sprintf("seeds%d", i), Group: "g", Options: crawl.DefaultOptions(), File: sf}.Build()
		require.NoError(b, err)
		got, err := plan.Queue(ctx, s)
		require.NoError(b, err)
		require.Equal(b, n, got)
		scan, queue = scan+t1.Sub(t0), queue+time.Since(t1)
		sf.Close()
		b.StopTimer()
		require.NoError(b, s.Close())
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric((processCPU(b)-cpu0).Seconds()/float64(b.N), "cpu-s/op")
	b.ReportMetric(scan.Seconds()/float64(b.N), "scan-s/op")
	b.ReportMetric(queue.Seconds()/float64(b.N), "queue-s/op")
}

// BenchmarkSeedsStore measures the store's part of BenchmarkSeedsQueue
// alone: 200,000 seeds (BATON_SEEDS=N), normalised already, added to a
// new job of a new SQLite store in chunks of 20,000, as Plan.Queue adds
// a seed file's; it reports the process's CPU time per seed.
//
// Run it with: go test ./activities/jobs/sqlstore/ -run '^$' -bench SeedsStore -benchtime=1x
func BenchmarkSeedsStore(b *testing.B) {
	n := 200000
	if s := os.Getenv("BATON_SEEDS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n <= 0 {
			b.Fatalf("BATON_SEEDS=%q: not a count", s)
		}
	}
	seeds := make([]jobs.Entry, n)
	for i := range seeds {
		seeds[i] = jobs.Entry{URL: fmt.Sprintf("http://127.0.0.1:8000/product/%d/item-%d.html", i/100, i)}
	}
	ctx := testCtx(b, 10*time.Minute)
	var cpu time.Duration
	for i := 0; i < b.N; i++ {
		s, err := sqlstore.OpenSQLite(ctx, b.TempDir())
		require.NoError(b, err)
		job := fmt.Sprintf("seeds%d", i)
		_, err = s.CreateJob(ctx, jobs.Spec{ID: job, Group: "g", Seeds: []string{seeds[0].URL}, Options: crawl.DefaultOptions()}, nil)
		require.NoError(b, err)
		cpu0 := processCPU(b)
		added := 0
		for c := 0; c < n; c += 20000 {
			k, err := s.AddSeeds(ctx, job, seeds[c:min(c+20000, n)])
			require.NoError(b, err)
			added += k
		}
		cpu += processCPU(b) - cpu0
		require.Equal(b, n, added)
		require.NoError(b, s.Close())
	}
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N*n), "cpu-µs/seed")
}
