package testsuite

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// This file holds what the harness needs of the machine it runs on: the
// environment variables it reads, the module's root, and what a test does
// when a dependency is not installed or -short is set.

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
