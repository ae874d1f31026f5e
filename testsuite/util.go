package testsuite

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// Environment variables read by the harness.
const (
	// EnvTemporalBin names the temporal CLI binary used for dev servers.
	EnvTemporalBin = "BATON_TEMPORAL_BIN"
	// EnvZooKeeperHome names the ZooKeeper installation directory.
	EnvZooKeeperHome = "BATON_ZK_HOME"
	// EnvZooKeeperClasspath overrides ZooKeeper server classpath discovery.
	EnvZooKeeperClasspath = "BATON_ZK_CLASSPATH"
	// EnvAllowSkip, when "1", makes missing ZooKeeper/Temporal installs skip
	// tests instead of failing them.
	EnvAllowSkip = "BATON_ALLOW_SKIP"
)

// pollInterval is how often Eventually and the readiness checks re-evaluate
// their condition.
const pollInterval = 50 * time.Millisecond

// FreePort returns a TCP port on 127.0.0.1 that was free at the time of the
// call (the kernel picks it; the listener is closed before returning).
// Another process may still grab it before the caller binds it, so servers
// started by this package retry with a fresh port if binding fails.
func FreePort(t testing.TB) int {
	t.Helper()
	port, err := freePort()
	if err != nil {
		t.Fatalf("testsuite: %v", err)
	}
	return port
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find free port: listen on 127.0.0.1:0: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		return 0, fmt.Errorf("find free port: close listener: %w", err)
	}
	return port, nil
}

// ClosedPort returns a loopback address nothing listens on (for a client
// that must find its server unreachable).
func ClosedPort(t testing.TB) string {
	t.Helper()
	port, err := freePort()
	if err != nil {
		t.Fatalf("testsuite: %v", err)
	}
	return fmt.Sprintf("127.0.0.1:%d", port)
}

// Eventually calls cond every 50ms until it returns true or timeout passes.
// An error from cond does not stop the polling; it is remembered and
// reported if the deadline is reached. On timeout Eventually fails the test
// with t.Fatalf naming what was awaited, so like t.Fatal it must be called
// from the goroutine running the test.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	EventuallyEvery(t, timeout, pollInterval, what, cond)
}

// EventuallyEvery is Eventually polling every interval, for measurements
// that need a finer grain than the default.
func EventuallyEvery(t testing.TB, timeout, interval time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	if err := poll(timeout, interval, cond); err != nil {
		t.Fatalf("testsuite: waiting for %s: %v", what, err)
	}
}

// errPermanent marks a condition error that should end polling at once.
type errPermanent struct{ err error }

func (e errPermanent) Error() string { return e.err.Error() }
func (e errPermanent) Unwrap() error { return e.err }

// poll is Eventually without the testing.TB: it returns an error describing
// the timeout (and the last error cond returned) instead of failing. A cond
// error wrapped in errPermanent stops polling immediately.
func poll(timeout, interval time.Duration, cond func() (bool, error)) error {
	start := time.Now()
	deadline := start.Add(timeout)
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	var lastErr error
	attempts := 0
	for {
		attempts++
		ok, err := cond()
		if ok {
			return nil
		}
		if err != nil {
			var perm errPermanent
			if errors.As(err, &perm) {
				return perm.err
			}
			lastErr = err
		}
		if time.Now().After(deadline) {
			if lastErr != nil {
				return fmt.Errorf("condition not met within %v (%d attempts); last error: %w",
					timeout, attempts, lastErr)
			}
			return fmt.Errorf("condition not met within %v (%d attempts)", timeout, attempts)
		}
		<-ticker.C
	}
}

var repoRoot struct {
	once sync.Once
	dir  string
	err  error
}

// RepoRoot returns the directory holding the module's go.mod, found by
// walking up from the current working directory (go test runs tests in
// their package directory).
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := findRepoRoot()
	if err != nil {
		t.Fatalf("testsuite: %v", err)
	}
	return dir
}

func findRepoRoot() (string, error) {
	repoRoot.once.Do(func() {
		wd, err := os.Getwd()
		if err != nil {
			repoRoot.err = fmt.Errorf("find repo root: getwd: %w", err)
			return
		}
		for dir := wd; ; dir = filepath.Dir(dir) {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				repoRoot.dir = dir
				return
			}
			if filepath.Dir(dir) == dir {
				repoRoot.err = fmt.Errorf("find repo root: no go.mod in %s or any parent", wd)
				return
			}
		}
	})
	return repoRoot.dir, repoRoot.err
}

// skipIfShort skips integration helpers under go test -short.
func skipIfShort(t testing.TB, what string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("testsuite: %s skipped in -short mode (integration test)", what)
	}
}

// missingDependency fails the test (or skips it when BATON_ALLOW_SKIP=1)
// because an external dependency is not installed.
func missingDependency(t testing.TB, what string, err error) {
	t.Helper()
	if os.Getenv(EnvAllowSkip) == "1" {
		t.Skipf("testsuite: %s not available (%v); skipping because %s=1", what, err, EnvAllowSkip)
	}
	t.Fatalf("testsuite: %s not available: %v; run `make deps` to install it "+
		"(or set %s=1 to skip tests that need it)", what, err, EnvAllowSkip)
}
