package workflows

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	sdktest "go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/batoncrawl/baton/activities/cluster"
	"github.com/batoncrawl/baton/roles"
)

// children records the child workflows a Lifecycle starts.
type children struct {
	mu    sync.Mutex
	types []string
	ids   []string
}

func (c *children) listen(env *sdktest.TestWorkflowEnvironment) {
	env.SetOnChildWorkflowStartedListener(func(info *workflow.Info, _ workflow.Context, _ converter.EncodedValues) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.types = append(c.types, info.WorkflowType.Name)
		c.ids = append(c.ids, info.WorkflowExecution.ID)
	})
}

func (c *children) started() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.types)
}

// mockRoles mocks the role workflows a Lifecycle runs as children; each
// returns at once with ReasonChanged, so the Lifecycle dispatches again.
func mockRoles(env *sdktest.TestWorkflowEnvironment) {
	env.OnWorkflow(Heartbeat, mock.Anything, mock.Anything).Return(nil)
	for _, wf := range []any{Runner, PrimaryBackup, SecondaryBackup} {
		env.OnWorkflow(wf, mock.Anything, mock.Anything).Return(RoleResult{Reason: ReasonChanged}, nil)
	}
}

// lifecycleContinued returns the input the Lifecycle continued as new with.
func lifecycleContinued(t *testing.T, env *sdktest.TestWorkflowEnvironment) LifecycleInput {
	t.Helper()
	require.True(t, env.IsWorkflowCompleted())
	err := env.GetWorkflowError()
	require.True(t, workflow.IsContinueAsNewError(err), "want continue-as-new, got %v", err)
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(err, &can))
	assert.Equal(t, "Lifecycle", can.WorkflowType.Name)
	var in LifecycleInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &in))
	return in
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// TestLifecycleDispatchesElectionOutcome runs the Lifecycle with mocked
// activities: Register, WaitMembers and Elect run in that order, then the
// position decides the role workflow: a Winner runs Runner, the standby
// Loser runs PrimaryBackup, another Loser runs SecondaryBackup. The loop
// continues as new after maxLoops/4 dispatches.
func TestLifecycleDispatchesElectionOutcome(t *testing.T) {
	const dispatches = maxLoops / 4
	for _, tc := range []struct {
		name  string
		elect roles.Role
		pos   cluster.Position
		child string
	}{
		{"winner", roles.RoleRunner, cluster.Position{Role: roles.RoleRunner}, "Runner"},
		{"loser standby", roles.RoleBackup, cluster.Position{Role: roles.RoleBackup, Standby: true}, "PrimaryBackup"},
		{"loser", roles.RoleBackup, cluster.Position{Role: roles.RoleBackup}, "SecondaryBackup"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := cluster.Member{Group: testGroup, Name: crawler(2), Runner: 1, Backup: 2, Timers: testTimers()}
			env, rec := newEnv(t)
			var kids children
			kids.listen(env)
			mockRoles(env)
			env.OnActivity(ma.Register, mock.Anything, m).Return(cluster.RegisterResult{Role: roles.RoleInitial}, nil).Once()
			env.OnActivity(ma.Position, mock.Anything, m).Return(cluster.Position{Role: roles.RoleInitial}, nil).Once()
			env.OnActivity(ma.WaitMembers, mock.Anything, m).Return(roles.GroupState{}, nil).Once()
			env.OnActivity(ma.Elect, mock.Anything, m).Return(tc.elect, nil).Once()
			env.OnActivity(ma.Position, mock.Anything, m).Return(tc.pos, nil)

			env.ExecuteWorkflow(Lifecycle, LifecycleInput{Member: m})
			next := lifecycleContinued(t, env)
			assert.Equal(t, LifecycleInput{Member: m, Registered: true, Dispatches: dispatches}, next)

			want := []string{"Register", "Position", "WaitMembers", "Elect"}
			want = append(want, repeat("Position", dispatches-1)...)
			assert.Equal(t, want, rec.started())
			assert.Equal(t, append([]string{"Heartbeat"}, repeat(tc.child, dispatches-1)...), kids.started())
			assert.Contains(t, kids.ids, childID(testGroup, m.Name, "heartbeat"))

			v, err := env.QueryWorkflow(QueryPosition)
			require.NoError(t, err)
			var pos cluster.Position
			require.NoError(t, v.Get(&pos))
			assert.Equal(t, tc.pos, pos)
		})
	}
}

// TestLifecycleRealElection runs the Lifecycle of each member of a group
// of one runner and two backups with the REAL Register, WaitMembers,
// Elect and Position activities on a Memory store (the other members have
// registered already); the role workflows are mocked.
func TestLifecycleRealElection(t *testing.T) {
	const dispatches = maxLoops / 4
	for _, tc := range []struct {
		index int
		role  roles.Role
		child string
	}{
		{1, roles.RoleRunner, "Runner"},
		{2, roles.RoleBackup, "PrimaryBackup"},
		{3, roles.RoleBackup, "SecondaryBackup"},
	} {
		t.Run(crawler(tc.index), func(t *testing.T) {
			var others []int
			for i := 1; i <= 3; i++ {
				if i != tc.index {
					others = append(others, i)
				}
			}
			cl := registerOnly(t, 1, 2, others...)
			env, rec := newEnv(t)
			var kids children
			kids.listen(env)
			mockRoles(env)
			cl.acts(newClock(t0).Now).register(env)
			env.ExecuteWorkflow(Lifecycle, LifecycleInput{Member: cl.member(tc.index)})
			next := lifecycleContinued(t, env)
			assert.True(t, next.Registered)
			assert.Equal(t, dispatches, next.Dispatches)

			assert.Equal(t, []string{"Register", "Position", "WaitMembers", "Elect", "Position"}, rec.started()[:5])
			locals := rec.locals()
			require.GreaterOrEqual(t, len(locals), 4, "the short steps run as local activities: %v", locals)
			assert.Equal(t, []string{"Register", "Position", "Elect", "Position"}, locals[:4],
				"the short steps run as local activities, WaitMembers as an activity")
			assert.Equal(t, append([]string{"Heartbeat"}, repeat(tc.child, dispatches-1)...), kids.started())
			assert.Equal(t, tc.role, cl.node(tc.index).Role)
			g := cl.group()
			assert.Equal(t, "2", g.StandbyID, "standby_id is the smallest backup index")
			assert.ElementsMatch(t, []string{crawler(1), crawler(2), crawler(3)}, g.CurrentCrawler)
			if tc.role == roles.RoleRunner {
				assert.Equal(t, []string{crawler(tc.index)}, g.CurrentRunner)
			} else {
				assert.Equal(t, []string{crawler(tc.index)}, g.CurrentBackup)
			}
		})
	}
}

// TestLifecycleRejoinsWhenDead: a Lifecycle that finds its instance
// declared dead registers again (as a backup) and dispatches the new role.
func TestLifecycleRejoinsWhenDead(t *testing.T) {
	m := cluster.Member{Group: testGroup, Name: crawler(1), Runner: 1, Backup: 1, Timers: testTimers()}
	env, rec := newEnv(t)
	var kids children
	kids.listen(env)
	mockRoles(env)
	env.OnActivity(ma.Position, mock.Anything, m).Return(cluster.Position{Role: roles.RoleDeadRunner}, nil).Once()
	env.OnActivity(ma.Register, mock.Anything, m).Return(cluster.RegisterResult{Role: roles.RoleBackup, Rejoined: true}, nil).Once()
	env.OnActivity(ma.Position, mock.Anything, m).Return(cluster.Position{Role: roles.RoleBackup}, nil)
	env.ExecuteWorkflow(Lifecycle, LifecycleInput{Member: m, Registered: true, Dispatches: 7})
	next := lifecycleContinued(t, env)
	assert.Equal(t, 7+maxLoops/4, next.Dispatches)
	assert.Equal(t, []string{"Position", "Register", "Position"}, rec.started()[:3])
	assert.Equal(t, 1, rec.count("Register"), "registered again once; not at the start of a continued run")
	assert.Equal(t, append([]string{"Heartbeat"}, repeat("SecondaryBackup", maxLoops/4-1)...), kids.started())
}

// TestLifecycleStandbyTakesOver runs the Lifecycle of the standby backup
// with the REAL activities and the REAL PrimaryBackup child: runner 1's
// heartbeat is stale, so the child takes it over and the Lifecycle then
// dispatches the instance as a Runner (mocked).
func TestLifecycleStandbyTakesOver(t *testing.T) {
	cl := newCluster(t, 1, 1)
	cl.putTask(1, processingTask(3, 1, crawler(1), 2))
	env, rec := newEnv(t)
	var kids children
	kids.listen(env)
	env.OnWorkflow(Heartbeat, mock.Anything, mock.Anything).Return(nil)
	env.OnWorkflow(Runner, mock.Anything, mock.Anything).Return(RoleResult{Reason: ReasonChanged}, nil)
	cl.acts(newClock(t0.Add(time.Hour)).Now).register(env)
	env.ExecuteWorkflow(Lifecycle, LifecycleInput{Member: cl.member(2)})
	lifecycleContinued(t, env)

	assert.Equal(t, append([]string{"Heartbeat", "PrimaryBackup"}, repeat("Runner", maxLoops/4-1)...), kids.started())
	assert.Equal(t, []string{"Register", "Position", "WatchRunners", "Discover", "Activate", "HandOver", "Position"}, rec.started()[:7])
	assert.Contains(t, kids.ids, childID(testGroup, crawler(2), "primary-backup"))
	assertRunnerFailedOver(t, cl, 1, 2)
	own := cl.task(2)
	assert.Equal(t, 1, own.NextIndex)
	assert.True(t, own.Pending())
}
