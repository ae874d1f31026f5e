package testsuite_test

import (
	"context"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/roles"
	"github.com/batoncrawl/baton/testsuite"
)

func TestMain(m *testing.M) { testsuite.Main(m) }

const (
	electTimeout = 60 * time.Second
	taskTimeout  = 90 * time.Second
)

// The reference's scenario: 2 runners + 1 backup, runner 2 killed mid-task.
// Afterwards 1 is runner, 2 dead-runner, 3 runner, standby_id advanced and
// the task finished by 3 with every result recorded once.
func TestFailover2Runners1Backup(t *testing.T) {
	c := testsuite.NewCluster(t, 2, 1, testsuite.FastTimers)
	site := testsuite.NewSite(t, 40*time.Millisecond)
	c.StartAll()
	c.WaitElected(electTimeout)
	assert.Equal(t, "3", c.GroupState().StandbyID)

	const n = 40
	c.Assign(2, site.URLs("p", n))
	c.WaitTaskProgress(taskTimeout, 2, 5)
	c.Kill(2)

	task := c.WaitTaskDone(taskTimeout, 3)
	testsuite.AssertExactlyOnce(t, task, n)
	assert.Equal(t, "sc-crawler_2", task.HandedOverFrom)
	c.WaitRoles(10*time.Second, map[int]roles.Role{1: roles.RoleRunner, 2: roles.RoleDeadRunner, 3: roles.RoleRunner})
	g := c.GroupState()
	assert.ElementsMatch(t, []string{"sc-crawler_1", "sc-crawler_3"}, g.CurrentRunner)
	assert.Empty(t, g.CurrentBackup)
	assert.Equal(t, []string{"sc-crawler_2"}, g.FailRunner)
	assert.Equal(t, []string{"sc-crawler_2"}, g.FailCrawler)
	assert.Equal(t, "", g.StandbyID, "standby_id advanced past the last backup")
	assert.Equal(t, 0, g.TotalBackup)
	hb, _, err := c.Meta.GetHeartbeat(context.Background(), "sc-crawler_2")
	require.NoError(t, err)
	assert.Equal(t, roles.HeartAsystole, hb.HealthyState)
}

// 2 runners + 2 backups: runner 2 dies, 3 takes over, 4 stays a backup and
// becomes the standby.
func TestFailover2Runners2Backups(t *testing.T) {
	c := testsuite.NewCluster(t, 2, 2, testsuite.FastTimers)
	site := testsuite.NewSite(t, 30*time.Millisecond)
	c.StartAll()
	c.WaitElected(electTimeout)
	const n = 30
	c.Assign(2, site.URLs("p", n))
	c.WaitTaskProgress(taskTimeout, 2, 3)
	c.Kill(2)
	task := c.WaitTaskDone(taskTimeout, 3)
	testsuite.AssertExactlyOnce(t, task, n)
	c.WaitRoles(10*time.Second, map[int]roles.Role{1: roles.RoleRunner, 2: roles.RoleDeadRunner, 3: roles.RoleRunner, 4: roles.RoleBackup})
	g := c.GroupState()
	assert.Equal(t, "4", g.StandbyID)
	assert.Equal(t, []string{"sc-crawler_4"}, g.CurrentBackup)
	assert.Equal(t, 1, g.TotalBackup)
}

// 3 runners + 3 backups, runners 1 and 2 killed with tasks: two backups
// take one each, the third stays standby.
func TestFailover3Runners3BackupsTwoKilled(t *testing.T) {
	c := testsuite.NewCluster(t, 3, 3, testsuite.FastTimers)
	site := testsuite.NewSite(t, 30*time.Millisecond)
	c.StartAll()
	c.WaitElected(electTimeout)
	const n = 30
	c.Assign(1, site.URLs("a", n))
	c.Assign(2, site.URLs("b", n))
	c.WaitTaskProgress(taskTimeout, 1, 3)
	c.WaitTaskProgress(taskTimeout, 2, 3)
	c.Kill(1)
	c.Kill(2)
	c.WaitRoles(taskTimeout, map[int]roles.Role{1: roles.RoleDeadRunner, 2: roles.RoleDeadRunner,
		3: roles.RoleRunner, 4: roles.RoleRunner, 5: roles.RoleRunner, 6: roles.RoleBackup})
	t4 := c.WaitTaskDone(taskTimeout, 4)
	t5 := c.WaitTaskDone(taskTimeout, 5)
	testsuite.AssertExactlyOnce(t, t4, n)
	testsuite.AssertExactlyOnce(t, t5, n)
	assert.ElementsMatch(t, []string{"sc-crawler_1", "sc-crawler_2"}, []string{t4.HandedOverFrom, t5.HandedOverFrom})
	g := c.GroupState()
	assert.Equal(t, "6", g.StandbyID)
	assert.ElementsMatch(t, []string{"sc-crawler_3", "sc-crawler_4", "sc-crawler_5"}, g.CurrentRunner)
	assert.ElementsMatch(t, []string{"sc-crawler_1", "sc-crawler_2"}, g.FailRunner)
}

// The primary backup dies between two fail-over steps (after Activate,
// before HandOver) and is restarted: the hand-over completes and nothing is
// lost or recorded twice.
func TestPrimaryBackupKilledMidHandOver(t *testing.T) {
	c := testsuite.NewCluster(t, 2, 1, testsuite.FastTimers)
	site := testsuite.NewSite(t, 30*time.Millisecond)
	c.Start(1)
	c.Start(2)
	p3 := c.Start(3, "BATON_FAULT_KILL_AFTER=Activate")
	c.WaitElected(electTimeout)
	const n = 30
	c.Assign(2, site.URLs("p", n))
	c.WaitTaskProgress(taskTimeout, 2, 3)
	c.Kill(2)
	select {
	case <-p3.Done():
	case <-time.After(taskTimeout):
		t.Fatal("the primary backup did not crash after Activate")
	}
	assert.Contains(t, p3.Logs(), "fault injection: SIGKILL after activity")
	// Activate was done, HandOver was not: the Task is still at 2.
	assert.Equal(t, roles.RoleRunner, c.Role(3))
	assert.NotEqual(t, roles.TaskDone, c.Task(3).RunningStatus)
	c.Start(3)
	task := c.WaitTaskDone(taskTimeout, 3)
	testsuite.AssertExactlyOnce(t, task, n)
	assert.Equal(t, "sc-crawler_2", task.HandedOverFrom)
}

// All-are-Runner: 3 instances all crawl; one is killed mid-task and exactly
// one survivor takes its Task over.
func TestAllAreRunnerOneKilled(t *testing.T) {
	c := testsuite.NewCluster(t, 3, 0, testsuite.FastTimers, testsuite.WithWorkerArgs("--capacity", "2"))
	site := testsuite.NewSite(t, 30*time.Millisecond)
	c.StartAll()
	c.WaitElected(electTimeout)
	const n = 30
	c.Assign(1, site.URLs("a", n))
	c.Assign(2, site.URLs("b", n))
	c.Assign(3, site.URLs("c", n))
	c.WaitTaskProgress(taskTimeout, 2, 3)
	c.Kill(2)
	c.WaitRoles(taskTimeout, map[int]roles.Role{2: roles.RoleDeadRunner})
	node, _, err := c.Meta.GetNode(context.Background(), "sc-crawler_2")
	require.NoError(t, err)
	require.Contains(t, []string{"sc-crawler_1", "sc-crawler_3"}, node.TakenOverBy, "exactly one survivor claimed it")
	// The adopted Task stays in 2's znode, held by the survivor.
	var adopted roles.Task
	testsuite.Eventually(t, taskTimeout, "the adopted task to finish", func() (bool, error) {
		adopted = c.Task(2)
		return adopted.RunningStatus == roles.TaskDone, nil
	})
	assert.Equal(t, node.TakenOverBy, adopted.Holder)
	testsuite.AssertExactlyOnce(t, adopted, n)
	testsuite.AssertExactlyOnce(t, c.WaitTaskDone(taskTimeout, 1), n)
	testsuite.AssertExactlyOnce(t, c.WaitTaskDone(taskTimeout, 3), n)
	g := c.GroupState()
	assert.ElementsMatch(t, []string{"sc-crawler_1", "sc-crawler_3"}, g.CurrentRunner)
}

// A lone backup is watched too: 2 runners + 1 backup, the backup SIGKILLed.
// A runner (its ring predecessor) declares it dead and removes it from the
// group (before every member watched its ring, nobody watched it); restarted, it rejoins as the
// standby and takes a dead runner over.
func TestLoneBackupKilledIsDeclaredDead(t *testing.T) {
	c := testsuite.NewCluster(t, 2, 1, testsuite.FastTimers)
	site := testsuite.NewSite(t, 20*time.Millisecond)
	c.StartAll()
	c.WaitElected(electTimeout)
	killed := c.Kill(3)
	c.WaitRoles(10*time.Second, map[int]roles.Role{3: roles.RoleDeadBackupRunner})
	took := time.Since(killed)
	node, _, err := c.Meta.GetNode(context.Background(), "sc-crawler_3")
	require.NoError(t, err)
	assert.Contains(t, []string{"sc-crawler_1", "sc-crawler_2"}, node.TakenOverBy, "a runner claimed the dead backup")
	t.Logf("lone backup declared dead %v after the SIGKILL (detection bound %v)", took.Round(time.Millisecond), roles.FastTimers().DetectionBound())
	testsuite.Eventually(t, 10*time.Second, "3 removed from the group", func() (bool, error) {
		g := c.GroupState()
		return len(g.CurrentBackup) == 0 && slices.Contains(g.FailBackup, "sc-crawler_3") && g.StandbyID == "", nil
	})
	kids, err := c.Meta.Store.Children(context.Background(), c.Meta.MembersPath())
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"sc-crawler_1", "sc-crawler_2"}, kids, "its membership entry is gone")

	c.Start(3)
	c.WaitRoles(taskTimeout, map[int]roles.Role{3: roles.RoleBackup})
	testsuite.Eventually(t, 30*time.Second, "3 the standby again", func() (bool, error) {
		return c.GroupState().StandbyID == "3", nil
	})
	c.Assign(1, site.URLs("p", 20))
	c.WaitTaskProgress(taskTimeout, 1, 2)
	c.Kill(1)
	testsuite.AssertExactlyOnce(t, c.WaitTaskDone(taskTimeout, 3), 20)
}

// A killed runner, restarted after its Task was handed over, rejoins as a
// backup (and becomes the standby), and can take over in turn.
func TestKilledRunnerRejoinsAsBackup(t *testing.T) {
	c := testsuite.NewCluster(t, 2, 1, testsuite.FastTimers)
	site := testsuite.NewSite(t, 20*time.Millisecond)
	c.StartAll()
	c.WaitElected(electTimeout)
	c.Assign(2, site.URLs("p", 20))
	c.WaitTaskProgress(taskTimeout, 2, 2)
	c.Kill(2)
	testsuite.AssertExactlyOnce(t, c.WaitTaskDone(taskTimeout, 3), 20)
	c.Start(2)
	c.WaitRoles(taskTimeout, map[int]roles.Role{2: roles.RoleBackup})
	testsuite.Eventually(t, 30*time.Second, "2 to be the standby", func() (bool, error) {
		g := c.GroupState()
		return g.StandbyID == "2" && len(g.FailCrawler) == 0, nil
	})
	g := c.GroupState()
	assert.Equal(t, []string{"sc-crawler_2"}, g.CurrentBackup)
	assert.Equal(t, 1, g.TotalBackup)
	// The rejoined backup works: runner 1 dies, 2 takes over.
	c.Assign(1, site.URLs("q", 20))
	c.WaitTaskProgress(taskTimeout, 1, 2)
	c.Kill(1)
	testsuite.AssertExactlyOnce(t, c.WaitTaskDone(taskTimeout, 2), 20)
}

// SIGTERM stops a worker cleanly: it exits 0; with a plain Task pending it
// does not leave the group (the Task's requests may take long): its last
// heartbeat says Apparent Death, and the backup takes its Task over as for
// a crash. (An idle worker, or one whose crawl-job batch drains, leaves:
// TestElasticClusterGrowsAndShrinksMidCrawl.)
func TestSIGTERMShutsDownCleanly(t *testing.T) {
	c := testsuite.NewCluster(t, 2, 1, testsuite.FastTimers)
	site := testsuite.NewSite(t, 30*time.Millisecond)
	c.StartAll()
	c.WaitElected(electTimeout)
	const n = 30
	c.Assign(2, site.URLs("p", n))
	c.WaitTaskProgress(taskTimeout, 2, 3)
	p := c.Process(2)
	require.NoError(t, p.Signal(syscall.SIGTERM))
	require.NoError(t, p.Wait(30*time.Second), p.Logs())
	assert.Equal(t, 0, p.ExitCode(), p.Logs())
	assert.Contains(t, p.Logs(), "shutting down")
	testsuite.AssertExactlyOnce(t, c.WaitTaskDone(taskTimeout, 3), n)
	c.WaitRoles(10*time.Second, map[int]roles.Role{2: roles.RoleDeadRunner, 3: roles.RoleRunner})
}
