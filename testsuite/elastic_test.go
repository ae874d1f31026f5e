package testsuite_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/batoncrawl/baton/activities/crawl/demosite"
	"github.com/batoncrawl/baton/roles"
	"github.com/batoncrawl/baton/testsuite"
)

// runningLifecycles lists the instances whose Lifecycle workflow is
// Running in Temporal, as a user filtering the Web UI would see them.
func runningLifecycles(t *testing.T, c *testsuite.Cluster) []string {
	t.Helper()
	tc := c.Temporal.Client(t)
	q := fmt.Sprintf("BatonCluster = '%s' AND WorkflowType = 'Lifecycle' AND ExecutionStatus = 'Running'", c.Group)
	resp, err := tc.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{Query: q})
	require.NoError(t, err)
	var out []string
	for _, e := range resp.Executions {
		out = append(out, e.Execution.WorkflowId)
	}
	slices.Sort(out)
	return out
}

func lifecycleIDs(c *testsuite.Cluster, idx ...int) []string {
	var out []string
	for _, i := range idx {
		out = append(out, fmt.Sprintf("baton/%s/%s", c.Group, testsuite.Name(i)))
	}
	slices.Sort(out)
	return out
}

// resultsBy counts the recorded pages per Runner.
func resultsBy(t *testing.T, c *testsuite.Cluster, job string) map[string]int {
	out := map[string]int{}
	for _, r := range readResults(t, c.OpenStore(), job) {
		out[r.Runner]++
	}
	return out
}

// A running 2+1 group grows to 4+2 mid-crawl (new workers join on their
// own, `baton cluster scale` promotes backups), loses a Runner to SIGKILL,
// shrinks back to 2 runners (the surplus step down after draining their
// batches) and loses a backup to SIGTERM (it leaves cleanly): every page
// is recorded exactly once, and Temporal lists only live instances as
// Running.
func TestElasticClusterGrowsAndShrinksMidCrawl(t *testing.T) {
	c := testsuite.NewCluster(t, 2, 1, testsuite.FastTimers, testsuite.WithWorkerArgs("--concurrency", "2"))
	site := demosite.New(demosite.Config{Pages: 1500, Seed: 3, BrokenLinks: 3, Latency: 40 * time.Millisecond})
	srv := httptest.NewServer(site)
	t.Cleanup(srv.Close)
	c.StartAll()
	c.WaitElected(electTimeout)

	// One host: its parallelism holds for the whole job, shared among the
	// Runners (2 each, their --concurrency): 8 leaves a share to each of
	// the 4 Runners after the scale-up.
	p := startCrawl(c, "elastic", srv.URL+"/", "--follow", "--depth", "100", "--max-pages", "0", "--parallelism", "8")
	js := c.OpenStore()
	recorded := func(n int) func() (bool, error) {
		return func() (bool, error) { return len(readResults(t, js, "elastic")) >= n, nil }
	}
	testsuite.Eventually(t, taskTimeout, "50 pages recorded", recorded(50))

	// Grow: three more workers join the formed group as backups.
	for i := 4; i <= 6; i++ {
		c.Start(i)
	}
	testsuite.Eventually(t, electTimeout, "workers 4-6 joined as backups", func() (bool, error) {
		g := c.GroupState()
		return len(g.CurrentBackup) == 4 && c.Role(4) == roles.RoleBackup && c.Role(5) == roles.RoleBackup && c.Role(6) == roles.RoleBackup, nil
	})
	out, code := baton(c, "cluster", "scale", "--runners", "4", "--backups", "2", "--wait", "60s")
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "2 backups will be promoted to runners")
	g := c.GroupState()
	assert.Len(t, g.CurrentRunner, 4, "runners after the scale-up: %v", g.CurrentRunner)
	assert.Len(t, g.CurrentBackup, 2)
	promoted := slices.DeleteFunc(slices.Clone(g.CurrentRunner), func(n string) bool {
		return n == testsuite.Name(1) || n == testsuite.Name(2)
	})
	require.Len(t, promoted, 2)
	testsuite.Eventually(t, taskTimeout, "the promoted runners crawl", func() (bool, error) {
		by := resultsBy(t, c, "elastic")
		return by[promoted[0]] > 0 && by[promoted[1]] > 0, nil
	})
	// The membership directory lists the six, and `baton cluster` shows
	// each watched by two ring predecessors.
	kids, err := c.Meta.Store.Children(context.Background(), c.Meta.MembersPath())
	require.NoError(t, err)
	assert.ElementsMatch(t, append(slices.Clone(g.CurrentRunner), g.CurrentBackup...), kids)
	out, code = baton(c, "cluster", "--output", "json")
	require.Equal(t, 0, code, out)
	var view struct {
		Instances []struct {
			Name      string   `json:"name"`
			WatchedBy []string `json:"watched_by"`
		} `json:"instances"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &view), out)
	watched := 0
	for _, in := range view.Instances {
		if slices.Contains(kids, in.Name) {
			assert.Len(t, in.WatchedBy, 2, "%s is watched by two", in.Name)
			watched++
		}
	}
	assert.Equal(t, 6, watched)

	// A Runner dies: a backup takes its place and its batch.
	c.Kill(1)
	testsuite.Eventually(t, electTimeout, "runner 1 replaced", func() (bool, error) {
		g := c.GroupState()
		return c.Role(1).Dead() && len(g.CurrentRunner) == 4 && !slices.Contains(g.CurrentRunner, testsuite.Name(1)), nil
	})

	// Shrink: the two largest runners step down after draining.
	out, code = baton(c, "cluster", "scale", "--runners", "2", "--wait", "60s")
	require.Equal(t, 0, code, out)
	g = c.GroupState()
	require.Len(t, g.CurrentRunner, 2, "runners after the scale-down: %v", g.CurrentRunner)

	// A backup leaves with SIGTERM: removed from the group, its znodes gone.
	leaver := 0
	for i := 2; i <= 6; i++ {
		if slices.Contains(g.CurrentBackup, testsuite.Name(i)) {
			leaver = i
		}
	}
	require.NotZero(t, leaver, "a backup to stop: %v", g.CurrentBackup)
	require.NoError(t, c.Process(leaver).Signal(syscall.SIGTERM))
	require.NoError(t, c.Process(leaver).Wait(30*time.Second))
	assert.Equal(t, 0, c.Process(leaver).ExitCode(), c.Process(leaver).LogTail(20))
	assert.Contains(t, c.Process(leaver).Logs(), "left the group")
	g = c.GroupState()
	assert.NotContains(t, g.CurrentCrawler, testsuite.Name(leaver))
	assert.NotContains(t, g.FailCrawler, testsuite.Name(leaver), "a clean leave is not a death")
	assert.Equal(t, roles.Role(""), c.Role(leaver), "its NodeState is deleted")

	require.NoError(t, p.Wait(3*time.Minute), p.Logs())
	require.Equal(t, 0, p.ExitCode(), p.Logs())
	assertEveryPageOnce(t, site, srv.URL, readResults(t, js, "elastic"))

	// Temporal lists only the live instances as Running: not the killed
	// runner (closed once its Task was handed over), not the one that left.
	live := []int{}
	for i := 2; i <= 6; i++ {
		if i != leaver {
			live = append(live, i)
		}
	}
	testsuite.Eventually(t, 30*time.Second, "only live lifecycles Running", func() (bool, error) {
		got := runningLifecycles(t, c)
		return slices.Equal(got, lifecycleIDs(c, live...)), fmt.Errorf("running %v", got)
	})
}
