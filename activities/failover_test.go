package activities_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/cluster"
	"github.com/batoncrawl/baton/roles"
)

func peer(m cluster.Member, dead int, role roles.Role) cluster.PeerInput {
	return cluster.PeerInput{Member: m, Dead: name(dead), DeadRole: role}
}

// crashMidTask runs member i's Task with a fetcher that records the first
// `done` requests and then "crashes" (its context ends) inside the next.
func (f *clusterFixture) crashMidTask(i, done int) roles.Task {
	f.t.Helper()
	gate := newGate()
	ctx, cancel := context.WithCancel(context.Background())
	run := goRun(func() (cluster.RunTaskResult, error) {
		return f.acts(gate).RunTask(ctx, cluster.RunTaskInput{Member: f.member(i)})
	})
	for k := 0; k < done; k++ {
		gate.next(f.t)
		gate.ok(f.t)
	}
	gate.next(f.t)
	cancel()
	_, err := await(f.t, run, "crashing RunTask")
	require.ErrorIs(f.t, err, context.Canceled)
	return f.task(i)
}

func taskIDs(tk roles.Task) []int {
	out := []int{}
	for _, d := range tk.ResultDetail {
		out = append(out, d.TaskID)
	}
	return out
}

func TestFailOverProcessingTask(t *testing.T) {
	f := newClusterFixture(t, 2, 1)
	f.start()
	ctx := context.Background()
	f.assign(2, requests(4))
	dead := f.crashMidTask(2, 2)
	require.Equal(t, roles.TaskProcessing, dead.RunningStatus)
	require.Equal(t, 2, dead.NextIndex)
	require.Equal(t, name(2), dead.Holder)

	a3 := f.acts(nil)
	in := peer(f.member(3), 2, roles.RoleRunner)

	d, err := a3.Discover(ctx, in)
	require.NoError(t, err)
	assert.True(t, d.Claimed)
	assert.Equal(t, name(3), d.By)
	assert.Equal(t, dead, d.Task, "Discover returns the dead runner's Task")
	assert.Equal(t, roles.NodeState{Group: group, Role: roles.RoleDeadRunner, TakenOverBy: name(3)}, f.node(2))
	assert.Equal(t, roles.HeartAsystole, f.heartbeat(2).HealthyState)

	pos, err := a3.Activate(ctx, in)
	require.NoError(t, err)
	assert.Equal(t, cluster.Position{Role: roles.RoleRunner}, pos)
	assert.Equal(t, roles.RoleRunner, f.node(3).Role)
	// The reference's scenario: runner 2 dead, the backup took its place.
	want := gs(3, 2, 0, "", names(1, 3), names(1, 3), nil, names(2), names(2), nil)
	assert.Equal(t, want, f.group())

	h, err := a3.HandOver(ctx, in, false)
	require.NoError(t, err)
	assert.Equal(t, cluster.HandOverResult{Owner: name(3), Pending: true, Status: roles.TaskProcessing}, h)
	own := f.task(3)
	assert.Equal(t, dead.RunningContent, own.RunningContent)
	assert.Equal(t, 2, own.NextIndex, "continues at next_index")
	assert.Equal(t, []int{0, 1}, taskIDs(own))
	assert.Equal(t, roles.RunningResult{SuccessCount: 2}, own.RunningResult)
	assert.Greater(t, own.Epoch, dead.Epoch, "epoch raised")
	assert.Equal(t, name(3), own.Holder)
	assert.Equal(t, name(2), own.HandedOverFrom)
	moved := f.task(2)
	assert.Equal(t, name(3), moved.Holder, "the dead Task is fenced: it names its new holder")
	assert.Equal(t, own.Epoch, moved.Epoch)

	// Every step is idempotent (a retry after a crash).
	d2, err := a3.Discover(ctx, in)
	require.NoError(t, err)
	assert.True(t, d2.Claimed)
	pos, err = a3.Activate(ctx, in)
	require.NoError(t, err)
	assert.Equal(t, cluster.Position{Role: roles.RoleRunner}, pos)
	h2, err := a3.HandOver(ctx, in, false)
	require.NoError(t, err)
	assert.Equal(t, h, h2)
	assert.Equal(t, own, f.task(3), "a retried hand-over does not copy again")
	assert.Equal(t, want, f.group())

	// The new runner continues where the dead one stopped.
	rf := &recordingFetcher{}
	res, err := f.acts(rf).RunTask(ctx, cluster.RunTaskInput{Member: f.member(3), Owner: h.Owner})
	require.NoError(t, err)
	assert.Equal(t, []int{2, 3}, rf.ids(), "finished requests are not fetched again")
	assert.Equal(t, 2, res.Ran)
	assert.Equal(t, roles.TaskDone, res.Status)
	final := f.task(3)
	assert.Equal(t, roles.TaskDone, final.RunningStatus)
	assert.Equal(t, []int{0, 1, 2, 3}, taskIDs(final), "each request recorded exactly once")
	assert.Equal(t, roles.RunningResult{SuccessCount: 4}, final.RunningResult)
	for _, rd := range final.ResultDetail[2:] {
		assert.Equal(t, own.Epoch, rd.Epoch, "recorded under the new holder's epoch")
	}
}

func TestFailOverErrorTaskRunsAgain(t *testing.T) {
	f := newClusterFixture(t, 2, 1)
	f.start()
	ctx := context.Background()
	tk := f.assign(2, requests(3))
	tk.RunningStatus, tk.NextIndex, tk.Holder = roles.TaskError, 1, name(2)
	tk.RunningResult = roles.RunningResult{FailCount: 1}
	tk.ResultDetail = []roles.ResultDetail{{TaskID: 0, State: roles.TaskError, ErrorMsg: "boom", Epoch: tk.Epoch}}
	_, err := f.c().Put(ctx, f.c().TaskPath(name(2)), tk, 1)
	require.NoError(t, err)

	a3 := f.acts(nil)
	in := peer(f.member(3), 2, roles.RoleRunner)
	_, err = a3.Discover(ctx, in)
	require.NoError(t, err)
	_, err = a3.Activate(ctx, in)
	require.NoError(t, err)
	h, err := a3.HandOver(ctx, in, false)
	require.NoError(t, err)
	assert.Equal(t, cluster.HandOverResult{Owner: name(3), Pending: true, Status: roles.TaskNothing}, h)
	own := f.task(3)
	assert.Equal(t, roles.TaskNothing, own.RunningStatus, "reset")
	assert.Equal(t, 0, own.NextIndex)
	assert.Empty(t, own.ResultDetail)
	assert.Equal(t, roles.RunningResult{}, own.RunningResult)
	assert.Equal(t, tk.RunningContent, own.RunningContent)
	assert.Greater(t, own.Epoch, tk.Epoch)

	rf := &recordingFetcher{}
	res, err := f.acts(rf).RunTask(ctx, cluster.RunTaskInput{Member: f.member(3)})
	require.NoError(t, err)
	assert.Equal(t, []int{0, 1, 2}, rf.ids(), "an error Task runs again from the start")
	assert.Equal(t, roles.RunningResult{SuccessCount: 3}, res.Result)
}

func TestFailOverNothingToHandOver(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status roles.TaskState
		reqs   int
	}{
		{"done", roles.TaskDone, 2},
		{"terminate", roles.TaskTerminate, 2},
		{"nothing (empty)", roles.TaskNothing, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newClusterFixture(t, 2, 1)
			f.start()
			ctx := context.Background()
			if tc.reqs > 0 {
				tk := f.assign(2, requests(tc.reqs))
				tk.RunningStatus, tk.Holder = tc.status, name(2)
				if tc.status == roles.TaskDone {
					tk.NextIndex = tc.reqs
				}
				_, err := f.c().Put(ctx, f.c().TaskPath(name(2)), tk, 1)
				require.NoError(t, err)
			}
			deadBefore, ownBefore := f.task(2), f.task(3)

			a3 := f.acts(nil)
			in := peer(f.member(3), 2, roles.RoleRunner)
			d, err := a3.Discover(ctx, in)
			require.NoError(t, err)
			require.True(t, d.Claimed)
			_, err = a3.Activate(ctx, in)
			require.NoError(t, err)
			h, err := a3.HandOver(ctx, in, false)
			require.NoError(t, err)
			assert.Equal(t, cluster.HandOverResult{Owner: name(3), Pending: false, Status: tc.status}, h)
			assert.Equal(t, ownBefore, f.task(3), "nothing handed over")
			assert.Equal(t, deadBefore, f.task(2))
			assert.Equal(t, gs(3, 2, 0, "", names(1, 3), names(1, 3), nil, names(2), names(2), nil), f.group())
			assert.Equal(t, roles.RoleRunner, f.node(3).Role)
		})
	}
}

func TestFailOverAssignedButNeverStarted(t *testing.T) {
	f := newClusterFixture(t, 2, 1)
	f.start()
	ctx := context.Background()
	tk := f.assign(2, requests(2)) // status nothing, with content
	a3 := f.acts(nil)
	in := peer(f.member(3), 2, roles.RoleRunner)
	_, err := a3.Discover(ctx, in)
	require.NoError(t, err)
	_, err = a3.Activate(ctx, in)
	require.NoError(t, err)
	h, err := a3.HandOver(ctx, in, false)
	require.NoError(t, err)
	assert.Equal(t, cluster.HandOverResult{Owner: name(3), Pending: true, Status: roles.TaskNothing}, h)
	assert.Equal(t, tk.RunningContent, f.task(3).RunningContent)
}

func TestOnlyOneBackupClaimsADeadRunner(t *testing.T) {
	f := newClusterFixture(t, 1, 2)
	f.start()
	ctx := context.Background()
	f.assign(1, requests(2))
	a2, a3 := f.acts(nil), f.acts(nil)
	in2, in3 := peer(f.member(2), 1, roles.RoleRunner), peer(f.member(3), 1, roles.RoleRunner)

	d2, err := a2.Discover(ctx, in2)
	require.NoError(t, err)
	assert.True(t, d2.Claimed)
	d3, err := a3.Discover(ctx, in3)
	require.NoError(t, err)
	assert.False(t, d3.Claimed, "the second backup cannot claim the same dead runner")
	assert.Equal(t, name(2), d3.By)
	assert.Equal(t, name(2), f.node(1).TakenOverBy)

	_, err = a3.Activate(ctx, in3)
	require.Error(t, err)
	assert.True(t, cluster.IsLost(err), "%v", err)
	_, err = a3.HandOver(ctx, in3, false)
	require.Error(t, err)
	assert.True(t, cluster.IsLost(err), "%v", err)

	pos, err := a2.Activate(ctx, in2)
	require.NoError(t, err)
	assert.Equal(t, cluster.Position{Role: roles.RoleRunner}, pos)
	assert.Equal(t, gs(3, 1, 1, "3", names(2, 3), names(2), names(3), names(1), names(1), nil), f.group(),
		"the other backup becomes the standby")
	h, err := a2.HandOver(ctx, in2, false)
	require.NoError(t, err)
	assert.True(t, h.Pending)
	assert.Empty(t, f.task(3).RunningContent, "the loser got nothing")
	pos, err = a3.Position(ctx, f.member(3))
	require.NoError(t, err)
	assert.Equal(t, cluster.Position{Role: roles.RoleBackup, Standby: true}, pos)
}

func TestConcurrentClaimsHaveOneWinner(t *testing.T) {
	for round := 0; round < 20; round++ {
		f := newClusterFixture(t, 1, 3)
		f.start()
		ctx := context.Background()
		start := make(chan struct{})
		var results []<-chan result[cluster.DiscoverResult]
		for i := 2; i <= 4; i++ {
			a, in := f.acts(nil), peer(f.member(i), 1, roles.RoleRunner)
			results = append(results, goRun(func() (cluster.DiscoverResult, error) {
				<-start
				return a.Discover(ctx, in)
			}))
		}
		close(start)
		winners := 0
		var by string
		for _, ch := range results {
			d, err := await(t, ch, "Discover")
			require.NoError(t, err)
			if d.Claimed {
				winners++
				by = d.By
			}
		}
		require.Equal(t, 1, winners, "round %d", round)
		assert.Equal(t, by, f.node(1).TakenOverBy)
	}
}

func TestClaimOfADeadClaimerCanBeTakenOver(t *testing.T) {
	f := newClusterFixture(t, 1, 2)
	f.start()
	ctx := context.Background()
	in2, in3 := peer(f.member(2), 1, roles.RoleRunner), peer(f.member(3), 1, roles.RoleRunner)
	_, err := f.acts(nil).Discover(ctx, in2)
	require.NoError(t, err)
	// The claimer dies before activating.
	_, err = f.c().Put(ctx, f.c().NodePath(name(2)), roles.NodeState{Group: group, Role: roles.RoleDeadBackupRunner, TakenOverBy: name(3)}, -1)
	require.NoError(t, err)
	d, err := f.acts(nil).Discover(ctx, in3)
	require.NoError(t, err)
	assert.True(t, d.Claimed)
	assert.Equal(t, name(3), f.node(1).TakenOverBy)
}

func TestFailOverOfTheStandbyMovesItToTheNextBackup(t *testing.T) {
	f := newClusterFixture(t, 2, 2)
	f.start()
	ctx := context.Background()
	a3 := f.acts(nil)
	in := peer(f.member(3), 2, roles.RoleRunner)
	_, err := a3.Discover(ctx, in)
	require.NoError(t, err)
	_, err = a3.Activate(ctx, in)
	require.NoError(t, err)
	assert.Equal(t, gs(4, 2, 1, "4", names(1, 3, 4), names(1, 3), names(4), names(2), names(2), nil), f.group())
	pos, err := a3.Position(ctx, f.member(4))
	require.NoError(t, err)
	assert.Equal(t, cluster.Position{Role: roles.RoleBackup, Standby: true}, pos)
}

func TestFailOverOfABackup(t *testing.T) {
	f := newClusterFixture(t, 1, 3)
	f.start()
	ctx := context.Background()
	// Backup 3, a ring predecessor of the primary backup 2, finds it dead.
	a3 := f.acts(nil)
	in := peer(f.member(3), 2, roles.RoleBackup)
	d, err := a3.Discover(ctx, in)
	require.NoError(t, err)
	require.True(t, d.Claimed)
	assert.Equal(t, roles.RoleDeadBackupRunner, f.node(2).Role)
	pos, err := a3.Activate(ctx, in)
	require.NoError(t, err)
	assert.Equal(t, cluster.Position{Role: roles.RoleBackup, Standby: true}, pos, "the next backup becomes the standby")
	assert.Equal(t, gs(4, 1, 2, "3", names(1, 3, 4), names(1), names(3, 4), names(2), nil, names(2)), f.group())
	assert.Equal(t, roles.RoleBackup, f.node(3).Role)
}

func TestRejoinAfterHandOver(t *testing.T) {
	f := newClusterFixture(t, 2, 1)
	f.start()
	ctx := context.Background()
	f.assign(2, requests(3))
	dead := f.crashMidTask(2, 1)
	a3 := f.acts(nil)
	in := peer(f.member(3), 2, roles.RoleRunner)
	_, err := a3.Discover(ctx, in)
	require.NoError(t, err)
	_, err = a3.Activate(ctx, in)
	require.NoError(t, err)

	// Not handed over yet: the dead runner cannot rejoin, and nothing changes.
	before := f.group()
	_, err = f.acts(nil).Register(ctx, f.member(2))
	require.Error(t, err)
	assert.Equal(t, cluster.ErrTypeNotReady, errType(err), "%v", err)
	assert.Equal(t, before, f.group())
	assert.Equal(t, roles.RoleDeadRunner, f.node(2).Role)
	assert.Equal(t, dead.RunningContent, f.task(2).RunningContent, "its Task was not reset")

	_, err = a3.HandOver(ctx, in, false)
	require.NoError(t, err)
	moved := f.task(2)
	res, err := f.acts(nil).Register(ctx, f.member(2))
	require.NoError(t, err)
	assert.Equal(t, cluster.RegisterResult{Role: roles.RoleBackup, Rejoined: true}, res)
	assert.Equal(t, gs(3, 2, 1, "2", names(1, 3, 2), names(1, 3), names(2), nil, nil, nil), f.group(),
		"back as a backup: total_backup +1, off the fail lists")
	assert.Equal(t, roles.NodeState{Group: group, Role: roles.RoleBackup}, f.node(2))
	tk := f.task(2)
	assert.False(t, tk.Pending())
	assert.Empty(t, tk.RunningContent)
	assert.Greater(t, tk.Epoch, moved.Epoch, "a fresh Task with a higher epoch")
	assert.Empty(t, tk.Holder)
	assert.Equal(t, roles.HeartNewborn, f.heartbeat(2).HealthyState)
	pos, err := f.acts(nil).Position(ctx, f.member(2))
	require.NoError(t, err)
	assert.Equal(t, cluster.Position{Role: roles.RoleBackup, Standby: true}, pos)

	// Registering again is a resume, not another rejoin.
	res, err = f.acts(nil).Register(ctx, f.member(2))
	require.NoError(t, err)
	assert.Equal(t, cluster.RegisterResult{Role: roles.RoleBackup, Resumed: true}, res)
	assert.Equal(t, 1, f.group().TotalBackup)

	// The new runner's Task is untouched by the rejoin.
	assert.Equal(t, name(3), f.task(3).Holder)
	assert.True(t, f.task(3).Pending())
}

func TestRejoinWithNothingToHandOver(t *testing.T) {
	f := newClusterFixture(t, 2, 1)
	f.start()
	ctx := context.Background()
	a3 := f.acts(nil)
	in := peer(f.member(3), 2, roles.RoleRunner)
	_, err := a3.Discover(ctx, in)
	require.NoError(t, err)
	_, err = a3.Activate(ctx, in)
	require.NoError(t, err)
	res, err := f.acts(nil).Register(ctx, f.member(2))
	require.NoError(t, err, "an idle dead runner rejoins at once")
	assert.True(t, res.Rejoined)
	assert.Equal(t, roles.RoleBackup, res.Role)
}

func TestPrimaryRemovesADeadSecondaryAndItRejoins(t *testing.T) {
	f := newClusterFixture(t, 1, 2)
	f.start()
	ctx := context.Background()
	f.beat(3, t0.Add(-time.Minute), roles.HeartHealthy)
	w := f.watchFor(2, 1)
	require.Equal(t, name(3), w.Dead)
	require.Equal(t, roles.RoleBackup, w.DeadRole)

	a2 := f.acts(nil)
	in := peer(f.member(2), 3, roles.RoleBackup)
	_, err := a2.Discover(ctx, in)
	require.NoError(t, err)
	pos, err := a2.Activate(ctx, in)
	require.NoError(t, err)
	assert.Equal(t, cluster.Position{Role: roles.RoleBackup, Standby: true}, pos, "the primary stays primary")
	assert.Equal(t, gs(3, 1, 1, "2", names(1, 2), names(1), names(2), names(3), nil, names(3)), f.group())
	assert.Equal(t, roles.RoleDeadBackupRunner, f.node(3).Role)

	res, err := f.acts(nil).Register(ctx, f.member(3))
	require.NoError(t, err)
	assert.Equal(t, cluster.RegisterResult{Role: roles.RoleBackup, Rejoined: true}, res)
	assert.Equal(t, gs(3, 1, 2, "2", names(1, 2, 3), names(1), names(2, 3), nil, nil, nil), f.group())
}
