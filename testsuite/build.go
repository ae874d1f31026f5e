package testsuite

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

var built struct {
	once    sync.Once
	dir     string
	worker  string
	starter string
	err     error
}

// BuildBinaries builds the Baton worker (./worker/cmd/baton-worker) and starter (./starter)
// with `go build` from the repository root, once per test process, and
// returns the paths of the two executables. Build failures fail every test
// that calls it. The binaries live in a temporary directory that Main
// removes; under -short the test is skipped.
func BuildBinaries(t testing.TB) (workerBin, starterBin string) {
	t.Helper()
	skipIfShort(t, "building binaries")
	built.once.Do(func() {
		built.err = buildBinaries()
	})
	if built.err != nil {
		t.Fatalf("testsuite: %v", built.err)
	}
	return built.worker, built.starter
}

func buildBinaries() error {
	root, err := findRepoRoot()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "baton-bin-")
	if err != nil {
		return fmt.Errorf("build binaries: create output dir: %w", err)
	}
	built.dir = dir
	built.worker = filepath.Join(dir, "baton-worker")
	built.starter = filepath.Join(dir, "baton")
	if err := GoBuild(root, built.worker, "./worker/cmd/baton-worker"); err != nil {
		return err
	}
	return GoBuild(root, built.starter, "./starter")
}

var extra struct {
	mu   sync.Mutex
	bins map[string]string // package → binary
}

// BuildWorker builds a worker binary of one's own — a package whose main
// runs worker.Main with its crawlers, such as ./worker/examples/shop —
// once per test process, and returns its path (removed by Main with the
// others).
func BuildWorker(t testing.TB, pkg string) string {
	t.Helper()
	BuildBinaries(t)
	extra.mu.Lock()
	defer extra.mu.Unlock()
	if bin, ok := extra.bins[pkg]; ok {
		return bin
	}
	root, err := findRepoRoot()
	if err != nil {
		t.Fatalf("testsuite: %v", err)
	}
	bin := filepath.Join(built.dir, "worker-"+filepath.Base(pkg))
	if err := GoBuild(root, bin, pkg); err != nil {
		t.Fatalf("testsuite: %v", err)
	}
	if extra.bins == nil {
		extra.bins = map[string]string{}
	}
	extra.bins[pkg] = bin
	return bin
}

// GoBuild runs `go build -o out pkg` in dir, returning the compiler output
// in the error if it fails.
func GoBuild(dir, out, pkg string) error {
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	cmd := exec.Command(goBin, "build", "-o", out, pkg)
	cmd.Dir = dir
	if output, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build -o %s %s (in %s): %w\n%s", out, pkg, dir, err, output)
	}
	return nil
}

// Main runs the tests of a package that uses the harness and then removes
// the binaries built by BuildBinaries. Call it from TestMain:
//
//	func TestMain(m *testing.M) { testsuite.Main(m) }
func Main(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		if err := os.RemoveAll(built.dir); err != nil {
			fmt.Fprintf(os.Stderr, "testsuite: remove %s: %v\n", built.dir, err)
		}
	}
	os.Exit(code)
}
