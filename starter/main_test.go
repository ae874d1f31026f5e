package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/cmdline/exitcode"
	"github.com/batoncrawl/baton/testsuite"
)

// run executes the CLI in-process and returns stdout, stderr and the exit
// code.
func run(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errw bytes.Buffer
	code := execute(args, &out, &errw)
	return out.String(), errw.String(), code
}

func TestVersion(t *testing.T) {
	out, _, code := run(t, "--version")
	assert.Equal(t, exitcode.OK, code)
	assert.Regexp(t, `^baton \S+ \(.*go1\.[0-9]+.*\)\n$`, out)
}

// Bad usage is exit code 2, with a pointer to the help, and contacts no
// server (the addresses are closed ports: a dial would be exit code 5).
func TestBadUsageExitsTwo(t *testing.T) {
	t.Chdir(t.TempDir()) // results --output json must write no file named json
	zk, temporal := testsuite.ClosedPort(t), testsuite.ClosedPort(t)
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--bogus"}, "unknown flag: --bogus"},
		{[]string{"nosuchcommand"}, `unknown command "nosuchcommand"`},
		{[]string{"jobs", "extra"}, "unknown command"},
		{[]string{"status"}, "missing JOB: give the ID of the job (baton jobs lists them) ('baton status JOB')"},
		{[]string{"results"}, "missing JOB"},
		{[]string{"cancel"}, "missing JOB"},
		{[]string{"pause", "a", "b"}, "one JOB only, got 2 ('a' 'b')"},
		{[]string{"task", "show"}, "missing NAME"},
		{[]string{"--zk-hosts", "notaport", "cluster"}, `--zk-hosts "notaport": "notaport" is not host:port`},
		{[]string{"--zk-hosts", "127.0.0.1:x", "task", "show", "sc-crawler_1"}, `port "x" is not a number`},
		{[]string{"--zk-hosts", "notaport", "crawl", "http://127.0.0.1:1/"}, `--zk-hosts "notaport"`},
		{[]string{"--temporal-address", "notaport", "cancel", "j"}, `--temporal-address "notaport": "notaport" is not host:port`},
		{[]string{"--temporal-address", "notaport", "status", "j"}, `--temporal-address "notaport"`},
		{[]string{"results", "j", "--output", "json"}, "in 'baton results', -o/--output names the FILE to write, not the format"},
		{[]string{"results", "j", "-o", "csv"}, "to write a file named csv: -o ./csv"},
		{[]string{"results", "j", "--stats", "--output", "json"}, "--stats --format json"},
		{[]string{"results", "j", "--stats", "--format", "csv"}, "one JSON document with --format json"},
		{[]string{"results", "j", "--format", "json"}, "--format json is for --stats"},
		{[]string{"jobs", "--output", "yaml"}, `invalid argument "yaml" for "--output" flag: want table or json`},
		{[]string{"crawl", "http://127.0.0.1:1/", "-q", "--output", "json"}, "exclude each other"},
		{[]string{"crawl", "http://127.0.0.1:1/", "--wait-for-runners", "1m"}, "--wait-for-runners applies to --wait only"},
		{[]string{"crawl", "http://127.0.0.1:1/", "--wait", "--wait-for-runners", "-1s"}, "--wait-for-runners: is -1s"},
		{[]string{"crawl", "http://127.0.0.1:1/", "--depth", "-1"}, "invalid crawl: --depth: is -1, must be >= 0"},
		{[]string{"crawl", "http://127.0.0.1:1/", "--max-pages", "-1"}, "--max-pages: -1 is negative"},
		{[]string{"crawl", "http://127.0.0.1:1/", "--retries", "1000"}, "--retries: is 1000, must be <= 100"},
		{[]string{"cluster", "--connect-timeout", "0s"}, "--connect-timeout: is 0s, must be > 0"},
		{[]string{"jobs", "-q", "--output", "json"}, "exclude each other"},
		{[]string{"jobs", "--store", "mysql://x"}, "--store: "},
	} {
		args := append([]string{"--zk-hosts", zk, "--temporal-address", temporal, "--connect-timeout", "5s"}, tc.args...)
		out, errw, code := run(t, args...)
		assert.Equal(t, exitcode.Usage, code, "%v: %s", tc.args, errw)
		assert.Empty(t, out, "%v: nothing on stdout", tc.args)
		assert.Contains(t, errw, tc.msg, "%v", tc.args)
		assert.Contains(t, errw, "--help' for usage", "%v", tc.args)
		assert.NotContains(t, errw, "max_depth")
	}
	entries, err := os.ReadDir(".")
	require.NoError(t, err)
	assert.Empty(t, entries, "a usage error wrote a file")
}

// A command's own flags are never read from the environment, and its help
// shows no variable for them; the global settings are, and their help
// says so.
func TestOnlyGlobalSettingsComeFromTheEnvironment(t *testing.T) {
	out, _, code := run(t, "crawl", "--help")
	require.Equal(t, exitcode.OK, code)
	for _, line := range strings.Split(out, "\n") {
		for _, own := range []string{"--id ", "--depth ", "--wait ", "--select ", "--output ", "--max-pages "} {
			if strings.Contains(line, own) {
				assert.NotContains(t, line, "(env ", "a command's own flag bound to a variable: %s", line)
			}
		}
	}
	assert.Contains(t, out, "(env BATON_ZK_HOSTS)")
	assert.Contains(t, out, "(env BATON_STORE)")

	// BATON_DEPTH=-1 would make the crawl invalid (exit 2) if it were read;
	// BATON_ZK_HOSTS is read: the cluster command goes to the closed port.
	t.Setenv("BATON_DEPTH", "-1")
	t.Setenv("BATON_ID", "../stray")
	temporal := testsuite.ClosedPort(t)
	t.Setenv("BATON_TEMPORAL_ADDRESS", temporal)
	// Not the default ZooKeeper address: a local stack may listen there.
	t.Setenv("BATON_ZK_HOSTS", testsuite.ClosedPort(t))
	_, errw, code := run(t, "crawl", "http://127.0.0.1:1/", "--connect-timeout", "2s")
	assert.Equal(t, exitcode.Unavailable, code, "BATON_DEPTH and BATON_ID ignored, BATON_TEMPORAL_ADDRESS used: %s", errw)
	assert.Contains(t, errw, "Temporal at "+temporal, "BATON_TEMPORAL_ADDRESS used")
	t.Setenv("BATON_CONNECT_TIMEOUT", "soon")
	_, errw, code = run(t, "cluster")
	assert.Equal(t, exitcode.Usage, code)
	assert.Contains(t, errw, `environment variable BATON_CONNECT_TIMEOUT="soon" (for --connect-timeout)`)
}

// Every command against an unreachable server fails within about
// --connect-timeout with exit code 5, naming the server and what to check;
// `make stack-up` is suggested only for the local stack's addresses.
func TestUnreachableServersFailFast(t *testing.T) {
	zk, temporal := testsuite.ClosedPort(t), testsuite.ClosedPort(t)
	dir := t.TempDir()
	store := filepath.Join(dir, "store")
	require.NoError(t, os.Mkdir(store, 0o755))
	global := []string{"--zk-hosts", zk, "--temporal-address", temporal, "--connect-timeout", "1s", "--data-dir", store}
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"cluster"}, "ZooKeeper at " + zk + " did not answer within 1s"},
		{[]string{"task", "show", "sc-crawler_1"}, "ZooKeeper at " + zk},
		{[]string{"crawl", "http://127.0.0.1:1/"}, "Temporal at " + temporal + " did not answer within 1s"},
		{[]string{"crawl", "http://127.0.0.1:1/", "--wait"}, "ZooKeeper at " + zk},
		{[]string{"status", "j"}, "Temporal at " + temporal},
		{[]string{"cancel", "j"}, "Temporal at " + temporal},
		{[]string{"jobs", "--store", "postgres://baton@" + testsuite.ClosedPort(t) + "/baton"}, "the job store did not answer within 1s"},
	} {
		start := time.Now()
		out, errw, code := run(t, append(global, tc.args...)...)
		took := time.Since(start)
		assert.Equal(t, exitcode.Unavailable, code, "%v: %s", tc.args, errw)
		assert.Less(t, took, 5*time.Second, "%v took %v", tc.args, took)
		assert.Empty(t, out, "%v", tc.args)
		assert.Contains(t, errw, tc.msg, "%v", tc.args)
		assert.NotContains(t, errw, "make stack-up", "%v: no local-stack advice for another address", tc.args)
	}
	entries, err := os.ReadDir(store)
	require.NoError(t, err)
	assert.Empty(t, entries, "read-only commands created files in --data-dir")

	// The local stack's default address: the hint is the local stack.
	_, errw, code := run(t, "cluster", "--connect-timeout", "1s")
	if code == exitcode.Unavailable { // (a local stack may be up on this machine)
		assert.Contains(t, errw, "make stack-up")
	}
}

// Read-only commands create nothing: not the --data-dir, not the default
// one in the working directory.
func TestReadOnlyCommandsCreateNothing(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	missing := filepath.Join(dir, "no", "such", "dir")
	global := []string{"--zk-hosts", testsuite.ClosedPort(t), "--temporal-address", testsuite.ClosedPort(t), "--connect-timeout", "1s"}
	for _, args := range [][]string{
		{"results", "x", "--data-dir", missing},
		{"jobs", "--data-dir", missing},
		{"results", "x"},
		{"jobs"},
	} {
		_, errw, code := run(t, append(global, args...)...)
		assert.Equal(t, exitcode.Usage, code, "%v: %s", args, errw)
		assert.Contains(t, errw, "no Baton store in", "%v", args)
		assert.Contains(t, errw, "--data-dir", "%v", args)
	}
	// status tries Temporal first (unreachable: exit 5), then the store.
	_, errw, code := run(t, append(global, "status", "x", "--data-dir", missing)...)
	assert.Equal(t, exitcode.Unavailable, code, errw)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries, "a read-only command created %v", entries)
}
