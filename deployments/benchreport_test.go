package deployments_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// benchReport builds the generator of docs/benchmarks.md's tables
// (deployments/scripts/benchreport, run by make bench-report) once per
// test binary and returns its path.
var benchReport = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "benchreport")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "benchreport")
	cmd := exec.Command("go", "build", "-o", bin, "deployments/scripts/benchreport/main.go")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", &exec.ExitError{Stderr: out}
	}
	return bin, nil
})

// runBenchReport runs the generator from the repository's root.
func runBenchReport(t *testing.T, args ...string) (string, error) {
	t.Helper()
	bin, err := benchReport()
	if err != nil {
		t.Fatalf("building benchreport: %v %s", err, err.(*exec.ExitError).Stderr)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = ".."
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestBenchReportRewritesTables: captured `go test -bench` outputs (runs
// repeated, a result line cut by the benchmark's own output, -v name
// lines, log lines; a real run without ns/op) become the tables between
// their markers, with the command, machine and date; a marker given no
// output is left as it was.
func TestBenchReportRewritesTables(t *testing.T) {
	page := filepath.Join(t.TempDir(), "page.md")
	copyFile(t, "testdata/benchreport/page.md", page)
	pgOut, _ := filepath.Abs("testdata/benchreport/postgrescrawl.txt")
	engineOut, _ := filepath.Abs("testdata/benchreport/engine.txt")
	if out, err := runBenchReport(t, "-doc", page, "-from", "PostgresCrawl="+pgOut, "-from", "EngineVsBareColly="+engineOut); err != nil {
		t.Fatalf("benchreport: %v\n%s", err, out)
	}
	got, want := readText(t, page), readText(t, "testdata/benchreport/page.want.md")
	if got != want {
		t.Errorf("rewritten page:\n%s\nwant:\n%s", got, want)
	}
	for _, s := range []string{"| 3000pages/1x24 | 1,080 (1,068 to 1,091) |", "| −5 (−30 to 10) |", "kept as it is", "Measured 2026-11-27 on 2 cores, 24 GiB",
		"| EngineVsBareColly | 1,338 (1,123 to 1,889) | 1,294 (1,139 to 1,977) | — |"} {
		if !strings.Contains(got, s) {
			t.Errorf("rewritten page lacks %q", s)
		}
	}
}

// TestBenchReportRefusesBadInput: an output with no results, or a marker
// without its end, is an error naming it, and the page is not written.
func TestBenchReportRefusesBadInput(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.txt")
	if err := os.WriteFile(empty, []byte("PASS\nok  \tx\t0.1s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(dir, "page.md")
	copyFile(t, "testdata/benchreport/page.md", page)
	out, err := runBenchReport(t, "-doc", page, "-from", "PostgresCrawl="+empty)
	if err == nil || !strings.Contains(out, "bench:PostgresCrawl") || !strings.Contains(out, "no benchmark results") {
		t.Errorf("an output without results: err %v, output %q; want an error naming the marker", err, out)
	}
	if readText(t, page) != readText(t, "testdata/benchreport/page.md") {
		t.Error("the page was written despite the error")
	}
	open := filepath.Join(dir, "open.md")
	if err := os.WriteFile(open, []byte("<!-- bench:Failover pkg=./testsuite/ cols=\"median-s=median\" -->\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := runBenchReport(t, "-check", "-doc", open); err == nil || !strings.Contains(out, "no <!-- /bench -->") {
		t.Errorf("an unclosed marker: err %v, output %q", err, out)
	}
}

// TestBenchmarksPageMarkers: every table of docs/benchmarks.md names a
// benchmark of its package, so make bench-report can regenerate it.
func TestBenchmarksPageMarkers(t *testing.T) {
	if out, err := runBenchReport(t, "-check", "-doc", "docs/benchmarks.md"); err != nil {
		t.Errorf("docs/benchmarks.md: %v\n%s", err, out)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
