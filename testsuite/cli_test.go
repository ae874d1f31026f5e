package testsuite_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/cmdline/exitcode"
	"github.com/batoncrawl/baton/testsuite"
	"github.com/batoncrawl/baton/workflows"
)

// cliRun is one run of a binary: stdout and stderr apart, as a script sees
// them.
type cliRun struct {
	stdout, stderr string
	code           int
	took           time.Duration
}

// runCLI runs bin with args and extra environment, killing it after a
// minute (a hang fails the test instead of the suite).
func runCLI(t *testing.T, bin string, env []string, args ...string) cliRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errw bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errw
	start := time.Now()
	_ = cmd.Run()
	require.NoError(t, ctx.Err(), "%s %v hung:\n%s\n%s", bin, args, out.String(), errw.String())
	return cliRun{stdout: out.String(), stderr: errw.String(), code: cmd.ProcessState.ExitCode(), took: time.Since(start)}
}

// decodeOne parses stdout as exactly one JSON document into v.
func decodeOne(t *testing.T, r cliRun, v any) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	require.NoError(t, dec.Decode(v), "stdout is JSON:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	var extra json.RawMessage
	require.ErrorIs(t, dec.Decode(&extra), io.EOF, "stdout holds one JSON document and nothing else:\n%s", r.stdout)
}

// The scripting contract of both binaries against a real cluster: --version,
// pure JSON on stdout with --output json (links and hints on stderr), -q
// prints only the job ID, a stray BATON_ID is ignored, the exit codes.
func TestCLIScriptingContract(t *testing.T) {
	c := testsuite.NewCluster(t, 1, 0, testsuite.FastTimers)
	site := testsuite.NewSite(t, time.Millisecond)
	c.StartAll()
	c.WaitElected(electTimeout)
	baton := func(env []string, args ...string) cliRun {
		return runCLI(t, c.Starter, env, append(c.StarterArgs(), args...)...)
	}

	for _, bin := range []string{c.Starter, c.Worker} {
		r := runCLI(t, bin, nil, "--version")
		assert.Equal(t, 0, r.code, r.stderr)
		assert.Regexp(t, `^baton(-worker)? \S+ \(.*go1\.\d+.*\)\n(crawlers: builtin \S+\n)?$`, r.stdout)
		r = runCLI(t, bin, nil, "--no-such-flag")
		assert.Equal(t, exitcode.Usage, r.code, "%s: a bad flag is exit code 2 for both binaries", bin)
		assert.Contains(t, r.stderr, "unknown flag: --no-such-flag")
	}

	// cluster --output json: the instances, parseable.
	r := baton(nil, "cluster", "--output", "json")
	require.Equal(t, 0, r.code, r.stderr)
	var cl struct {
		Group     string `json:"group"`
		Instances []struct {
			Name, Role, Health string
			HeartbeatAgeMS     *int64 `json:"heartbeat_age_ms"`
		} `json:"instances"`
	}
	decodeOne(t, r, &cl)
	assert.Equal(t, c.Group, cl.Group)
	require.Len(t, cl.Instances, 1)
	assert.Equal(t, "sc-crawler_1", cl.Instances[0].Name)
	assert.Equal(t, "runner", cl.Instances[0].Role)
	assert.NotNil(t, cl.Instances[0].HeartbeatAgeMS)

	// crawl -q: only the job ID; a stray BATON_ID is not read (two crawls
	// with it do not collide).
	stray := []string{"BATON_ID=stray", "BATON_DEPTH=-1", "BATON_WAIT=true"}
	var ids []string
	for range 2 {
		r = baton(stray, "crawl", "-q", site.URL+"/q/1")
		require.Equal(t, 0, r.code, r.stderr)
		id := strings.TrimSuffix(r.stdout, "\n")
		assert.Regexp(t, `^job-\d{8}-\d{6}-[0-9a-f]{6}$`, id, "stdout is the job ID alone: %q", r.stdout)
		ids = append(ids, id)
	}
	assert.NotEqual(t, ids[0], ids[1])

	// crawl --wait --output json: one document with the outcome; the Web
	// UI link is data there, the progress bar is on stderr.
	r = baton(nil, "crawl", "--id", "scripted", "--wait", "--output", "json", site.URL+"/s/1", site.URL+"/s/2")
	require.Equal(t, 0, r.code, r.stderr)
	var sub struct {
		ID         string                 `json:"id"`
		WorkflowID string                 `json:"workflow_id"`
		RunID      string                 `json:"run_id"`
		WebUI      string                 `json:"web_ui"`
		Progress   *workflows.JobProgress `json:"progress"`
	}
	decodeOne(t, r, &sub)
	assert.Equal(t, "scripted", sub.ID)
	assert.Equal(t, workflows.JobWorkflowID(c.Group, "scripted"), sub.WorkflowID)
	assert.NotEmpty(t, sub.RunID)
	assert.Contains(t, sub.WebUI, "/workflows/")
	require.NotNil(t, sub.Progress)
	assert.Equal(t, workflows.JobCompleted, sub.Progress.State)
	assert.Equal(t, 2, sub.Progress.Stats.Recorded)

	// status: JSON for scripts, a table for people; links on stderr.
	r = baton(nil, "status", "scripted", "--output", "json")
	require.Equal(t, 0, r.code, r.stderr)
	var p workflows.JobProgress
	decodeOne(t, r, &p)
	assert.Equal(t, workflows.JobCompleted, p.State)
	assert.Equal(t, 2, p.Stats.Recorded)
	assert.Contains(t, r.stderr, "Web UI: ")
	r = baton(nil, "status", "scripted")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Regexp(t, `STATE\s+completed`, r.stdout)
	assert.Regexp(t, `PAGES\s+2 recorded, 0 failed`, r.stdout)

	// jobs: JSON, and -q for the IDs.
	r = baton(nil, "jobs", "--output", "json")
	require.Equal(t, 0, r.code, r.stderr)
	var list []struct{ ID, Status string }
	decodeOne(t, r, &list)
	got := map[string]string{}
	for _, j := range list {
		got[j.ID] = j.Status
	}
	assert.Equal(t, "completed", got["scripted"])
	assert.Contains(t, got, ids[0])
	r = baton(nil, "jobs", "-q")
	require.Equal(t, 0, r.code, r.stderr)
	assert.ElementsMatch(t, append([]string{"scripted"}, ids...), strings.Fields(r.stdout))

	// The exit codes of the scheme.
	r = baton(nil, "status", "no-such-job")
	assert.Equal(t, exitcode.NotFound, r.code, r.stderr)
	r = baton(nil, "crawl", "--id", "scripted", site.URL+"/s/1")
	assert.Equal(t, exitcode.Usage, r.code, "an existing --id: %s", r.stderr)
	assert.Contains(t, r.stderr, "choose another --id")
}

// crawl --wait on a group without a live Runner says so within seconds on
// stderr, and gives up after --wait-for-runners with exit code 6, the job
// still queued; with --wait-for-runners 0 it keeps waiting and finishes
// once a Runner joins.
func TestCrawlWaitWithoutRunners(t *testing.T) {
	c := testsuite.NewCluster(t, 1, 0, testsuite.FastTimers)
	site := testsuite.NewSite(t, time.Millisecond)

	r := runCLI(t, c.Starter, nil, append(c.StarterArgs(), "crawl", "--id", "early", "--wait",
		"--wait-for-runners", "2s", "--output", "json", site.URL+"/e/1")...)
	assert.Equal(t, exitcode.NoRunner, r.code, r.stderr)
	assert.Less(t, r.took, 20*time.Second, "gave up within seconds")
	assert.Contains(t, r.stderr, "no live Runner in group "+c.Group)
	assert.Contains(t, r.stderr, "giving up in 2s")
	assert.Contains(t, r.stderr, "job early stays queued")
	var sub struct {
		ID string `json:"id"`
	}
	decodeOne(t, r, &sub)
	assert.Equal(t, "early", sub.ID, "the JSON still names the job")
	// It is queued: its workflow runs, no worker has started it.
	r = runCLI(t, c.Starter, nil, append(c.StarterArgs(), "status", "early")...)
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Regexp(t, `STATE\s+running`, r.stdout)
	assert.Contains(t, r.stderr, "no worker")
	r = runCLI(t, c.Starter, nil, append(c.StarterArgs(), "cancel", "early")...)
	require.Equal(t, 0, r.code, r.stderr)

	// Asked to keep waiting, it does, and says why.
	p := testsuite.StartProcess(t, testsuite.ProcessSpec{Name: "baton-crawl-patient", Path: c.Starter,
		Args: append(c.StarterArgs(), "crawl", "--id", "patient", "--wait", "--wait-for-runners", "0", site.URL+"/p/1")})
	p.WaitForLog(t, 30*time.Second, "no live Runner in group "+c.Group)
	assert.Contains(t, p.Logs(), "waiting for one as long as it takes")
	assert.False(t, p.Exited(), "still waiting: %s", p.Logs())

	c.StartAll()
	require.NoError(t, p.Wait(3*time.Minute), p.Logs())
	assert.Equal(t, 0, p.ExitCode(), p.Logs())
	assert.Contains(t, p.Logs(), "job patient completed: 1 pages")

	// The job given up on stayed queued: cancelled while no worker ran, it
	// ends cancelled once one does. (Not crawled alongside "patient": two
	// jobs started together on one fresh Runner can lose a batch, a
	// JobAssign race reported separately.)
	testsuite.Eventually(t, taskTimeout, "job early to end cancelled", func() (bool, error) {
		r := runCLI(t, c.Starter, nil, append(c.StarterArgs(), "status", "early", "--output", "json")...)
		var p workflows.JobProgress
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &p) != nil {
			return false, nil
		}
		return p.State == workflows.JobCanceled, nil
	})

	// A job that ends cancelled is exit code 4.
	slow := testsuite.NewSite(t, 2*time.Second)
	w := testsuite.StartProcess(t, testsuite.ProcessSpec{Name: "baton-crawl-doomed", Path: c.Starter,
		Args: append(c.StarterArgs(), "crawl", "--id", "doomed", "--wait", slow.URL+"/d/1", slow.URL+"/d/2", "--batch-size", "1")})
	testsuite.Eventually(t, taskTimeout, "job doomed to start", func() (bool, error) {
		r := runCLI(t, c.Starter, nil, append(c.StarterArgs(), "status", "doomed", "--output", "json")...)
		return r.code == 0, nil
	})
	r = runCLI(t, c.Starter, nil, append(c.StarterArgs(), "cancel", "doomed")...)
	require.Equal(t, 0, r.code, r.stderr)
	require.NotErrorIs(t, w.Wait(2*time.Minute), testsuite.ErrWaitTimeout, w.Logs())
	assert.Equal(t, exitcode.JobFailed, w.ExitCode(), w.Logs())
	assert.Contains(t, w.Logs(), "job doomed ended cancelled")
}

// A worker whose Temporal does not answer stops within --connect-timeout
// with exit code 5, as baton does (ZooKeeper is real here; the worker
// unit tests cover a closed ZooKeeper port).
func TestWorkerUnreachableTemporalExitsFive(t *testing.T) {
	zk := testsuite.StartZooKeeper(t)
	workerBin, _ := testsuite.BuildBinaries(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := l.Addr().String()
	require.NoError(t, l.Close())
	dir := filepath.Join(t.TempDir(), "data")
	r := runCLI(t, workerBin, nil, "--name", "sc-crawler_1", "--zk-hosts", zk.Addr(), "--temporal-address", closed,
		"--metrics-addr", "", "--connect-timeout", "2s", "--data-dir", dir)
	assert.Equal(t, exitcode.Unavailable, r.code, r.stderr)
	assert.Less(t, r.took, 15*time.Second)
	assert.Contains(t, r.stderr, "Temporal at "+closed+" did not answer within 2s")
	assert.Contains(t, r.stderr, "--temporal-address (BATON_TEMPORAL_ADDRESS)")
	assert.NotContains(t, r.stderr, "make stack-up")
}
