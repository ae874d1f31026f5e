package testsuite_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/metadata"
	"github.com/batoncrawl/baton/roles"
	"github.com/batoncrawl/baton/testsuite"
)

// Corrupted JSON in each kind of znode, an unknown role and a Task with an
// invalid URL: each gives a clear error naming the znode and the field, and
// the cluster keeps running.
func TestBadInputKeepsClusterRunning(t *testing.T) {
	c := testsuite.NewCluster(t, 2, 1, testsuite.FastTimers)
	site := testsuite.NewSite(t, 5*time.Millisecond)
	c.StartAll()
	c.WaitElected(electTimeout)
	ctx := context.Background()
	s := c.Meta.Store
	set := func(path, data string) {
		t.Helper()
		_, err := s.Set(ctx, path, []byte(data), metadata.AnyVersion)
		require.NoError(t, err)
	}
	logsOf := func(i int) func() string { return func() string { return c.Process(i).Logs() } }
	waitLog := func(i int, parts ...string) {
		t.Helper()
		testsuite.Eventually(t, 30*time.Second, "a log line with "+strings.Join(parts, " … "), func() (bool, error) {
			for _, line := range strings.Split(logsOf(i)(), "\n") {
				ok := true
				for _, p := range parts {
					ok = ok && strings.Contains(line, p)
				}
				if ok {
					return true, nil
				}
			}
			return false, nil
		})
	}

	// A corrupted Task: the runner reports it and waits; a valid Task then runs.
	set(c.Meta.TaskPath("sc-crawler_1"), `{"running_content": [`)
	waitLog(1, "corrupted", c.Meta.TaskPath("sc-crawler_1"), "Task.(document)")
	set(c.Meta.TaskPath("sc-crawler_1"), `{"running_content": [], "running_status": "bogus"}`)
	waitLog(1, "Task.running_status", "bogus")

	// A Task with an invalid URL among valid ones: that request fails with a
	// clear error, the others run.
	urls := site.URLs("p", 3)
	task := roles.EmptyTask()
	for i, u := range []string{urls[0], "htp://not a url", urls[1], urls[2]} {
		task.RunningContent = append(task.RunningContent, roles.Request{TaskID: i, URL: u, Method: "GET"})
	}
	task.Epoch = 10
	set(c.Meta.TaskPath("sc-crawler_1"), string(metadata.Encode(task)))
	done := c.WaitTaskDone(taskTimeout, 1)
	testsuite.AssertExactlyOnce(t, done, 4)
	assert.Equal(t, 3, done.RunningResult.SuccessCount)
	assert.Equal(t, 1, done.RunningResult.FailCount)
	assert.Contains(t, done.ResultDetail[1].ErrorMsg, "node sc-crawler_1 task: running_content[1]: Request.url")

	// A corrupted Heartbeat: a member watching runner 2 (runner 1 and the
	// standby 3 both have it among their ring successors) reports it; the
	// runner's next beat repairs it and nobody is declared dead. The
	// heartbeat is corrupted once per round, rounds 1.5 s apart: a
	// corrupted heartbeat counts as a late one, and a watcher that read
	// it clears that count after reset_timeout (10) healthy checks, 1 s.
	reported := func() bool {
		for _, i := range []int{1, 3} {
			for _, line := range strings.Split(logsOf(i)(), "\n") {
				if strings.Contains(line, "corrupted") && strings.Contains(line, c.Meta.HeartbeatPath("sc-crawler_2")) &&
					strings.Contains(line, "Heartbeat.(document)") {
					return true
				}
			}
		}
		return false
	}
	for round := 0; !reported(); round++ {
		require.Less(t, round, 40, "no watcher of runner 2 reported its corrupted heartbeat")
		set(c.Meta.HeartbeatPath("sc-crawler_2"), `not json`)
		end := time.Now().Add(1500 * time.Millisecond)
		for time.Now().Before(end) && !reported() {
			time.Sleep(20 * time.Millisecond) // polling the logs, as Eventually does
		}
	}

	// An unknown role in the primary backup's NodeState: its monitor reports
	// the znode and field; the runners keep running; once repaired, the
	// backup works again.
	set(c.Meta.NodePath("sc-crawler_3"), `{"group": "`+c.Group+`", "role": "wizard"}`)
	waitLog(3, c.Meta.NodePath("sc-crawler_3"), "NodeState.role", "wizard")
	c.Assign(2, site.URLs("q", 5))
	testsuite.AssertExactlyOnce(t, c.WaitTaskDone(taskTimeout, 2), 5)

	set(c.Meta.NodePath("sc-crawler_3"), `{"group": "`+c.Group+`", "role": "backup-runner"}`)

	// A corrupted GroupState: reported by the monitor, tasks still run.
	good, _, err := s.Get(ctx, c.Meta.GroupPath())
	require.NoError(t, err)
	set(c.Meta.GroupPath(), `{"current_runner": 7}`)
	waitLog(3, c.Meta.GroupPath(), "GroupState.current_runner")
	c.Assign(1, site.URLs("r", 5))
	testsuite.AssertExactlyOnce(t, c.WaitTaskDone(taskTimeout, 1), 5)

	// Repair everything; the backup still takes over a dead runner.
	set(c.Meta.GroupPath(), string(good))
	assert.Equal(t, roles.RoleRunner, c.Role(1))
	assert.Equal(t, roles.RoleRunner, c.Role(2), "no runner was declared dead by bad input")
	c.Assign(2, site.URLs("s", 30))
	c.WaitTaskProgress(taskTimeout, 2, 2)
	c.Kill(2)
	testsuite.AssertExactlyOnce(t, c.WaitTaskDone(taskTimeout, 3), 30)
}

// The starter refuses bad input before writing anything: an invalid URL, an
// unknown flag, a node that is not a runner.
func TestStarterRejectsBadTask(t *testing.T) {
	c := testsuite.NewCluster(t, 1, 1, testsuite.FastTimers)
	c.StartAll()
	c.WaitElected(electTimeout)
	before := c.Task(1)
	run := func(args ...string) (string, int) {
		cmd := exec.Command(c.Starter, append([]string{"--zk-hosts", c.ZK.Addr(), "--zk-root", c.Root, "--group", c.Group}, args...)...)
		out, _ := cmd.CombinedOutput()
		return string(out), cmd.ProcessState.ExitCode()
	}
	out, code := run("task", "assign", "--node", "sc-crawler_1", "--url", "http://127.0.0.1:1/ok", "--url", "ftp://x/y")
	assert.Equal(t, 2, code, out)
	assert.Contains(t, out, "running_content[1].url")
	out, code = run("task", "assign", "--node", "sc-crawler_1", "--bogus")
	assert.Equal(t, 2, code, out)
	assert.Contains(t, out, "unknown flag")
	out, code = run("task", "assign", "--node", "sc-crawler_2", "--url", "http://127.0.0.1:1/ok")
	assert.Equal(t, 2, code, out)
	assert.Contains(t, out, "not a runner")
	assert.Equal(t, before.Epoch, c.Task(1).Epoch, "nothing was written")
	out, code = run("cluster")
	assert.Equal(t, 0, code, out)
	assert.Contains(t, out, "sc-crawler_1  runner")
}
