package worker

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/batoncrawl/baton/activities/cmdline/exitcode"
	"github.com/batoncrawl/baton/testsuite"
)

func runWorker(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errw bytes.Buffer
	code := Execute(args, &out, &errw)
	return out.String(), errw.String(), code
}

func TestWorkerVersion(t *testing.T) {
	out, _, code := runWorker(t, "--version")
	assert.Equal(t, exitcode.OK, code)
	assert.Regexp(t, `^baton-worker \S+ \(.*go1\.[0-9]+.*\)\ncrawlers: builtin \S+\n$`, out)
}

// The worker's bad flags and configurations are exit code 2, as baton's,
// and the error names the flag.
func TestWorkerBadUsageExitsTwo(t *testing.T) {
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--bogus"}, "unknown flag: --bogus"},
		{[]string{"--name", "sc-crawler_1", "--runner", "x"}, `invalid argument "x" for "--runner" flag`},
		{[]string{"--name", "sc-crawler_1", "stray"}, "unknown command"},
		{[]string{}, "--name: required"},
		{[]string{"--name", "sc-crawler_1", "--runner", "0"}, "--runner: is 0, must be >= 1"},
		{[]string{"--name", "sc-crawler_1", "--update-time", "0s"}, "--update-time: is 0s, must be > 0"},
		{[]string{"--name", "sc-crawler_1", "--update-timeout", "100ms"}, "--update-timeout: is 100ms, must be longer than"},
		{[]string{"--name", "sc-crawler_1", "--timers", "slow"}, `--timers: unknown profile "slow"`},
		{[]string{"--name", "sc-crawler_1", "--log-level", "loud"}, `--log-level: "loud"`},
		{[]string{"--name", "sc-crawler_1", "--store", "mysql://x"}, "--store: "},
		{[]string{"--name", "sc-crawler_1", "--connect-timeout", "0s"}, "--connect-timeout: is 0s"},
		{[]string{"--name", "sc-crawler_1", "--zk-hosts", "notaport"}, `--zk-hosts "notaport": "notaport" is not host:port`},
		{[]string{"--name", "sc-crawler_1", "--temporal-address", "notaport"}, `--temporal-address "notaport"`},
		{[]string{"--name", "sc-crawler_1", "--metrics-job-grace", "0s"}, "--metrics-job-grace: is 0s, must be > 0"},
	} {
		_, errw, code := runWorker(t, tc.args...)
		assert.Equal(t, exitcode.Usage, code, "%v: %s", tc.args, errw)
		assert.Contains(t, errw, tc.msg, "%v", tc.args)
		assert.Contains(t, errw, "Run 'baton-worker --help' for usage.", "%v", tc.args)
		assert.NotContains(t, errw, "update_time", "%v", tc.args)
	}
	t.Setenv("BATON_RUNNER", "two")
	_, errw, code := runWorker(t, "--name", "sc-crawler_1")
	assert.Equal(t, exitcode.Usage, code)
	assert.Contains(t, errw, `BATON_RUNNER="two" (for --runner)`)
}

// A worker that cannot reach ZooKeeper or Temporal stops within
// --connect-timeout with exit code 5, naming the server and what to check.
func TestWorkerUnreachableServersExitFive(t *testing.T) {
	base := []string{"--name", "sc-crawler_1", "--metrics-addr", "", "--connect-timeout", "1s",
		"--data-dir", filepath.Join(t.TempDir(), "data")}
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--zk-hosts", testsuite.ClosedPort(t)}, "ZooKeeper at "},
	} {
		start := time.Now()
		_, errw, code := runWorker(t, append(base, tc.args...)...)
		assert.Equal(t, exitcode.Unavailable, code, errw)
		assert.Less(t, time.Since(start), 5*time.Second)
		assert.Contains(t, errw, tc.msg)
		assert.Contains(t, errw, "did not answer within 1s")
		assert.Contains(t, errw, "--zk-hosts (BATON_ZK_HOSTS)")
	}
	_, err := os.Stat(base[len(base)-1])
	assert.True(t, os.IsNotExist(err), "nothing created before the servers answered")
}
