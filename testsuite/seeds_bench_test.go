package testsuite_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/batoncrawl/baton/testsuite"
)

// BenchmarkSeedsFile submits a job with a seed file of 10^6 URLs
// (BATON_SEEDS=N to change it) through the real CLI, `baton crawl
// --seeds-file FILE`, against a real Temporal server and the SQLite store,
// and reports the command's time, its CPU time (user and system: on a
// shared machine the time mostly waits for a core), its peak RSS (VmHWM,
// sampled until it exits) and the 1-minute load average. One worker runs,
// as in a user's cluster; the seeds go to the store in chunks before the
// job's workflow starts.
//
// Run it with: make bench BENCH=SeedsFile PKGS=./testsuite/ BENCH_FLAGS=-benchtime=1x
func BenchmarkSeedsFile(b *testing.B) {
	n := 1000000
	if s := os.Getenv("BATON_SEEDS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n <= 0 {
			b.Fatalf("BATON_SEEDS=%q: not a count", s)
		}
	}
	c := testsuite.NewCluster(b, 1, 0)
	path := filepath.Join(b.TempDir(), "seeds.txt")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriter(f)
	for i := range n {
		fmt.Fprintf(w, "http://127.0.0.1:8000/product/%d/item-%d.html\n", i/100, i)
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	f.Close()
	c.Start(1)
	c.WaitElected(60 * time.Second)
	cmd := exec.Command(c.Starter, append(c.StarterArgs(), "crawl", "--id", "seeds", "--seeds-file", path, "--max-pages", "0")...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	b.ResetTimer()
	took, rss, err := testsuite.RunMeasured(cmd)
	b.StopTimer()
	if err != nil {
		b.Fatalf("baton crawl: %v: %s", err, out.String())
	}
	cpu := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	b.ReportMetric(float64(rss)/1024, "cli-peak-RSS-MiB")
	b.ReportMetric(took.Seconds(), "cli-s")
	b.ReportMetric(cpu.Seconds(), "cli-cpu-s")
	b.ReportMetric(loadAverage(b), "loadavg")
	b.Logf("%d seeds submitted in %v, CLI peak RSS %d MiB: %s", n, took.Round(time.Millisecond), rss/1024, strings.TrimSpace(out.String()))
}
