package testsuite_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/cmdline/exitcode"
	"github.com/batoncrawl/baton/activities/jobs/sqlstore"
	"github.com/batoncrawl/baton/testsuite"
	"github.com/batoncrawl/baton/workflows"
)

var jobIDLine = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*\n$`)

// The scripting contract of every command against a real cluster (issue
// 17): with -q stdout is the job ID alone, with --output json one JSON
// document and nothing else, whatever the command prints for people
// (`N URLs queued in the job store` went to stdout); every bad input
// exits with the documented code (exitcode), naming what is wrong; Ctrl-C
// stops crawl --wait, not the job, and says so (130).
func TestCLIContractOfEveryCommand(t *testing.T) {
	c := testsuite.NewCluster(t, 1, 1, testsuite.FastTimers)
	site := testsuite.NewSite(t, time.Millisecond)
	c.StartAll()
	c.WaitElected(electTimeout)
	baton := func(args ...string) cliRun {
		return runCLI(t, c.Starter, nil, append(c.StarterArgs(), args...)...)
	}
	seeds := filepath.Join(t.TempDir(), "seeds.txt")
	require.NoError(t, os.WriteFile(seeds, []byte(strings.Join(append(site.URLs("s", 3), site.URL+"/missing/1"), "\n")+"\n"), 0o644))

	t.Run("stdout is only the document", func(t *testing.T) {
		oneDoc := func(r cliRun, args []string) map[string]any {
			t.Helper()
			require.Equal(t, 0, r.code, "%v: %s", args, r.stderr)
			var v any
			decodeOne(t, r, &v)
			m, _ := v.(map[string]any)
			return m
		}
		idOnly := func(r cliRun, args []string) string {
			t.Helper()
			require.Equal(t, 0, r.code, "%v: %s", args, r.stderr)
			assert.Regexp(t, jobIDLine, r.stdout, "%v: stdout is the job ID alone", args)
			return strings.TrimSpace(r.stdout)
		}
		for _, args := range [][]string{
			{"crawl", "-q", site.URL + "/q/1"},
			{"crawl", "-q", "--seeds-file", seeds},
			{"crawl", "-q", "--wait", site.URL + "/q/2"},
			{"crawl", "-q", "--wait", "--seeds-file", seeds},
		} {
			idOnly(baton(args...), args)
		}
		for _, args := range [][]string{
			{"crawl", "--output", "json", site.URL + "/j/1"},
			{"crawl", "--output", "json", "--seeds-file", seeds},
			{"crawl", "--output", "json", "--wait", "--id", "pure", "--seeds-file", seeds},
		} {
			d := oneDoc(baton(args...), args)
			assert.NotEmpty(t, d["id"], "%v", args)
		}
		r := baton("jobs", "-q")
		require.Equal(t, 0, r.code, r.stderr)
		for _, line := range strings.SplitAfter(r.stdout, "\n") {
			if line != "" {
				assert.Regexp(t, jobIDLine, line, "jobs -q: IDs alone")
			}
		}
		for _, args := range [][]string{
			{"cluster", "--output", "json"},
			{"cluster", "scale", "--runners", "1", "--output", "json"},
			{"status", "pure", "--output", "json"},
			{"results", "pure", "--stats", "--format", "json"},
		} {
			oneDoc(baton(args...), args)
		}
		var list []any
		r = baton("jobs", "--output", "json")
		require.Equal(t, 0, r.code, r.stderr)
		decodeOne(t, r, &list)
		assert.GreaterOrEqual(t, len(list), 7)

		var st struct {
			Job         string         `json:"job"`
			Pages       int            `json:"pages"`
			Failed      int            `json:"failed"`
			StatusCodes map[string]int `json:"status_codes"`
		}
		r = baton("results", "pure", "--stats", "--format", "json")
		decodeOne(t, r, &st)
		assert.Equal(t, "pure", st.Job)
		assert.Equal(t, 4, st.Pages)
		assert.Equal(t, 1, st.Failed)
		assert.Equal(t, 1, st.StatusCodes["404"])
		// --stats honours -o.
		file := filepath.Join(t.TempDir(), "stats.txt")
		r = baton("results", "pure", "--stats", "-o", file)
		require.Equal(t, 0, r.code, r.stderr)
		assert.Empty(t, r.stdout)
		b, err := os.ReadFile(file)
		require.NoError(t, err)
		assert.Contains(t, string(b), "job pure\n")

		// rerun: its failed URL again; the document alone.
		args := []string{"rerun", "pure", "--failed", "--wait", "--output", "json"}
		d := oneDoc(baton(args...), args)
		assert.Equal(t, "pure", d["id"])
		args = []string{"rerun", "pure", "--failed", "-q", "--wait"}
		assert.Equal(t, "pure", idOnly(baton(args...), args))
	})

	t.Run("exit codes", func(t *testing.T) {
		// Another store than the group's, and none at all.
		other := t.TempDir()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		os2, err := sqlstore.OpenSQLite(ctx, other)
		require.NoError(t, err)
		require.NoError(t, os2.Close())
		missing := filepath.Join(t.TempDir(), "none")
		groupStore := filepath.Join(c.DataDir, sqlstore.SQLiteFile)
		for _, tc := range []struct {
			args []string
			code int
			msg  string
		}{
			{[]string{"status", "pure"}, exitcode.OK, ""},
			// 2: bad usage or input, configuration.
			{[]string{"status"}, exitcode.Usage, "missing JOB"},
			{[]string{"results", "a", "b"}, exitcode.Usage, "one JOB only"},
			{[]string{"task", "show"}, exitcode.Usage, "missing NAME"},
			{[]string{"--zk-hosts", "notaport", "cluster"}, exitcode.Usage, `--zk-hosts "notaport": "notaport" is not host:port`},
			{[]string{"--zk-hosts", "notaport", "crawl", site.URL + "/x"}, exitcode.Usage, `--zk-hosts "notaport"`},
			{[]string{"--temporal-address", "notaport", "status", "pure"}, exitcode.Usage, `--temporal-address "notaport"`},
			{[]string{"results", "pure", "--output", "json"}, exitcode.Usage, "-o/--output names the FILE to write"},
			{[]string{"results", "pure", "--stats", "--format", "csv"}, exitcode.Usage, "--format json"},
			{[]string{"jobs", "--data-dir", other}, exitcode.Usage, "group " + c.Group + " keeps its crawl data in sqlite " + groupStore},
			{[]string{"results", "pure", "--data-dir", other}, exitcode.Usage, "point --store/--data-dir at the group's store"},
			{[]string{"jobs", "--data-dir", missing}, exitcode.Usage, "keeps its crawl data in sqlite " + groupStore},
			{[]string{"crawl", "--id", "pure", site.URL + "/x"}, exitcode.Usage, "choose another --id"},
			{[]string{"crawl", site.URL + "/x", "--depth", "-1"}, exitcode.Usage, "--depth"},
			// 3: not found.
			{[]string{"--group", "nosuch", "cluster"}, exitcode.NotFound, "no group nosuch under ZooKeeper root " + c.Root},
			{[]string{"--group", "nosuch", "cluster", "--output", "json"}, exitcode.NotFound, "the groups there: "},
			{[]string{"task", "show", "sc-crawler_9"}, exitcode.NotFound, "no instance sc-crawler_9"},
			{[]string{"task", "assign", "--node", "sc-crawler_9", "--url", site.URL + "/x"}, exitcode.NotFound, "no instance sc-crawler_9"},
			{[]string{"status", "nosuch"}, exitcode.NotFound, "nosuch"},
			{[]string{"results", "nosuch"}, exitcode.NotFound, `no job "nosuch"`},
			{[]string{"cancel", "nosuch"}, exitcode.NotFound, `no running job "nosuch"`},
			{[]string{"rerun", "nosuch", "--failed"}, exitcode.NotFound, `no running job "nosuch"`},
			// 5: a server that does not answer.
			{[]string{"--zk-hosts", testsuite.ClosedPort(t), "--connect-timeout", "1s", "cluster"}, exitcode.Unavailable, "did not answer within 1s"},
			{[]string{"--temporal-address", testsuite.ClosedPort(t), "--connect-timeout", "1s", "cancel", "pure"}, exitcode.Unavailable, "Temporal at"},
			// 6: no live Runner in the group.
			{[]string{"--group", "empty", "crawl", "--wait", "--wait-for-runners", "1s", site.URL + "/x"}, exitcode.NoRunner, "no live Runner in group empty for 1s"},
		} {
			r := baton(tc.args...)
			assert.Equal(t, tc.code, r.code, "%v: %s", tc.args, r.stderr)
			assert.Contains(t, r.stderr, tc.msg, "%v", tc.args)
			if tc.code != exitcode.OK && tc.code != exitcode.NoRunner {
				assert.Empty(t, r.stdout, "%v: nothing on stdout", tc.args)
			}
			assert.NotContains(t, r.stderr, "znode does not exist", "%v: the raw error", tc.args)
			if tc.code == exitcode.Usage {
				assert.Contains(t, r.stderr, "--help' for usage", "%v", tc.args)
			}
		}
		_, err = os.Stat("json")
		assert.ErrorIs(t, err, os.ErrNotExist, "results --output json wrote a file named json")
	})

	t.Run("Ctrl-C", func(t *testing.T) {
		slow := testsuite.NewSite(t, 3*time.Second)
		p := testsuite.StartProcess(t, testsuite.ProcessSpec{Name: "baton-crawl-interrupted", Path: c.Starter,
			Args: append(append(c.StarterArgs(), "crawl", "--id", "goes-on", "--wait", "--parallelism", "1"), slow.URLs("i", 8)...)})
		testsuite.Eventually(t, taskTimeout, "job goes-on to run", func() (bool, error) {
			r := baton("status", "goes-on", "--output", "json")
			var pr workflows.JobProgress
			return r.code == 0 && json.Unmarshal([]byte(r.stdout), &pr) == nil && pr.State == workflows.JobRunning, nil
		})
		require.NoError(t, p.Signal(syscall.SIGINT))
		require.NotErrorIs(t, p.Wait(30*time.Second), testsuite.ErrWaitTimeout, p.Logs())
		assert.Equal(t, exitcode.Interrupted, p.ExitCode(), p.Logs())
		assert.Contains(t, p.Logs(), "stopped waiting; job goes-on goes on in the cluster (follow it: baton status goes-on; stop it: baton cancel goes-on)")
		r := baton("status", "goes-on", "--output", "json")
		var pr workflows.JobProgress
		decodeOne(t, r, &pr)
		assert.Contains(t, []string{workflows.JobRunning, workflows.JobCompleted}, pr.State, "the job went on")
		r = baton("cancel", "goes-on")
		assert.Contains(t, []int{exitcode.OK, exitcode.NotFound}, r.code, fmt.Sprint(r.stderr))
	})
}
