package activities_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/cluster"
	"github.com/batoncrawl/baton/activities/metadata"
	"github.com/batoncrawl/baton/activities/scale"
	"github.com/batoncrawl/baton/roles"
)

// setTotals changes the group's targets as `baton cluster scale` does.
func (f *clusterFixture) setTotals(runners, minBackup int) {
	f.t.Helper()
	_, err := f.c().UpdateGroup(context.Background(), func(g *roles.GroupState) error {
		g.TotalRunner, g.MinBackup = runners, minBackup
		return nil
	})
	require.NoError(f.t, err)
}

// A worker started for a group that has elected already joins it at once,
// as a backup, and the totals count it (no new group, no wiped znodes).
func TestRegisterLateMemberJoinsAFormedGroupAsABackup(t *testing.T) {
	f := newClusterFixture(t, 2, 1)
	f.start()
	ctx := context.Background()
	res, err := f.acts(nil).Register(ctx, f.member(4))
	require.NoError(t, err)
	assert.Equal(t, roles.RoleBackup, res.Role)
	assert.Equal(t, roles.RoleBackup, f.node(4).Role)
	assert.Equal(t, gs(4, 2, 2, "3", names(1, 2, 3, 4), names(1, 2), names(3, 4), nil, nil, nil), f.group())
	// Registering again (a retried activity, a restart) changes nothing.
	res, err = f.acts(nil).Register(ctx, f.member(4))
	require.NoError(t, err)
	assert.Equal(t, roles.RoleBackup, res.Role)
	assert.Equal(t, gs(4, 2, 2, "3", names(1, 2, 3, 4), names(1, 2), names(3, 4), nil, nil, nil), f.group())
	pos, err := f.acts(nil).Position(ctx, f.member(4))
	require.NoError(t, err)
	assert.Equal(t, cluster.Position{Role: roles.RoleBackup}, pos, "a secondary backup")
}

// While the group has fewer runners than it wants, a joining member
// crawls at once; in All-are-Runner mode every member is a runner.
func TestRegisterLateMemberJoinsAsARunnerWhenTheGroupWantsOne(t *testing.T) {
	t.Run("scaled up", func(t *testing.T) {
		f := newClusterFixture(t, 1, 0+1)
		f.start()
		f.setTotals(2, 1) // two runners, keep one backup: the standby cannot go
		res, err := f.acts(nil).Register(context.Background(), f.member(3))
		require.NoError(t, err)
		assert.Equal(t, roles.RoleRunner, res.Role)
		g := f.group()
		assert.Equal(t, names(1, 3), g.CurrentRunner)
		assert.Equal(t, names(2), g.CurrentBackup)
		assert.Equal(t, 3, g.TotalCrawler)
	})
	t.Run("all are runners", func(t *testing.T) {
		f := newClusterFixture(t, 2, 0)
		f.start()
		res, err := f.acts(nil).Register(context.Background(), f.member(3))
		require.NoError(t, err)
		assert.Equal(t, roles.RoleRunner, res.Role)
		g := f.group()
		assert.Equal(t, gs(3, 3, 0, "", names(1, 2, 3), names(1, 2, 3), nil, nil, nil, nil), g)
		require.NotNil(t, f.modeOf())
		assert.True(t, *f.modeOf(), "the group keeps its mode")
	})
}

// The mode is recorded when the group forms: a runners-and-backups group
// whose backups are all promoted is not taken for All-are-Runner.
func TestGroupModeIsRecordedAtFormation(t *testing.T) {
	f := newClusterFixture(t, 1, 1)
	f.start()
	require.NotNil(t, f.modeOf())
	assert.False(t, *f.modeOf())
	f.setTotals(2, 0)
	pos, err := f.acts(nil).Promote(context.Background(), f.member(2))
	require.NoError(t, err)
	assert.Equal(t, roles.RoleRunner, pos.Role)
	g, _, err := f.c().GetGroup(context.Background())
	require.NoError(t, err)
	assert.False(t, g.AllAreRunners(), "2 runners, 0 backups, formed with backups")
}

// Scale-up: the standby sees the group wants more runners (WatchRunners
// says Promote) and promotes itself; standby_id moves to the next backup.
func TestScaleUpPromotesTheStandby(t *testing.T) {
	f := newClusterFixture(t, 1, 2)
	f.start()
	f.beat(1, f.clock.Now(), roles.HeartHealthy)
	f.beat(3, f.clock.Now(), roles.HeartHealthy)
	f.watchQuietly(2, 1)
	f.setTotals(2, 0)
	ctx := context.Background()
	w, err := f.watch(ctx, 2, 1)
	require.NoError(t, err)
	assert.True(t, w.Promote)
	assert.Empty(t, w.Dead)

	pos, err := f.acts(nil).Promote(ctx, f.member(2))
	require.NoError(t, err)
	assert.Equal(t, roles.RoleRunner, pos.Role)
	assert.Equal(t, roles.RoleRunner, f.node(2).Role)
	assert.Equal(t, gs(3, 2, 1, "3", names(1, 2, 3), names(1, 2), names(3), nil, nil, nil), f.group())

	// Reached: the next standby is not promoted, nor is a repeated call.
	pos, err = f.acts(nil).Promote(ctx, f.member(3))
	require.NoError(t, err)
	assert.Equal(t, roles.RoleBackup, pos.Role)
	assert.Equal(t, gs(3, 2, 1, "3", names(1, 2, 3), names(1, 2), names(3), nil, nil, nil), f.group())
	f.watchQuietly(3, 1)
}

// min_backup holds promotions back: the last backups stay backups.
func TestScaleUpKeepsMinBackup(t *testing.T) {
	f := newClusterFixture(t, 1, 1)
	f.start()
	f.setTotals(2, 1)
	pos, err := f.acts(nil).Promote(context.Background(), f.member(2))
	require.NoError(t, err)
	assert.Equal(t, roles.RoleBackup, pos.Role)
	assert.Equal(t, names(1), f.group().CurrentRunner)
}

// Scale-down: an idle surplus runner (the largest index) steps down to a
// backup on its own; the others keep running.
func TestScaleDownStepsDownTheIdleSurplusRunner(t *testing.T) {
	f := newClusterFixture(t, 3, 1)
	f.start()
	f.setTotals(2, 0)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	res, err := f.acts(nil).WaitTask(ctx, f.member(3))
	require.NoError(t, err)
	assert.Equal(t, cluster.WaitTaskResult{Fenced: true, Role: roles.RoleBackup}, res)
	assert.Equal(t, roles.RoleBackup, f.node(3).Role)
	g := f.group()
	assert.Equal(t, names(1, 2), g.CurrentRunner)
	assert.ElementsMatch(t, names(3, 4), g.CurrentBackup)
	assert.Equal(t, 2, g.TotalBackup)
	assert.Equal(t, "4", g.StandbyID, "the standby stays")

	// Runner 2 is wanted: it keeps waiting for work.
	qctx, qcancel := context.WithTimeout(context.Background(), quietWindow)
	defer qcancel()
	_, err = f.acts(nil).WaitTask(qctx, f.member(2))
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

// A surplus runner with a pending Task runs it first; it steps down after.
func TestScaleDownWaitsForThePendingTask(t *testing.T) {
	f := newClusterFixture(t, 2, 0+1)
	f.start()
	f.assignBatch(2, "j", "j-b000001", 5)
	f.setTotals(1, 0)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	res, err := f.acts(nil).WaitTask(ctx, f.member(2))
	require.NoError(t, err)
	assert.True(t, res.Pending, "the Task runs before the runner steps down")
	assert.ElementsMatch(t, names(1, 2), f.group().CurrentRunner)
	assert.Equal(t, roles.RoleBackup, f.node(3).Role, "3 stays the standby")

	// A job assignment made from a Task read before the step-down fails:
	// the step-down writes the Task back, so its version moved on.
	tk, _, err := f.c().GetTask(context.Background(), name(2))
	require.NoError(t, err)
	tk.RunningStatus = roles.TaskDone
	v, err := f.c().SetTask(context.Background(), name(2), tk, metadata.AnyVersion)
	require.NoError(t, err)
	res, err = f.acts(nil).WaitTask(ctx, f.member(2))
	require.NoError(t, err)
	assert.Equal(t, cluster.WaitTaskResult{Fenced: true, Role: roles.RoleBackup}, res)
	_, v2, err := f.c().GetTask(context.Background(), name(2))
	require.NoError(t, err)
	assert.Greater(t, v2, v, "the Task was written in the step-down's transaction")
}

// fakeCloser records CloseInstance calls.
type fakeCloser struct{ closed []string }

func (c *fakeCloser) CloseInstance(_ context.Context, group, name, reason string) error {
	c.closed = append(c.closed, group+"/"+name+": "+reason)
	return nil
}

// A dead instance's workflows are closed once its place is taken: after
// the hand-over of a dead runner, after Activate for a dead backup; not
// before (a crash between the steps must leave them for the retry).
func TestFailOverClosesTheDeadInstancesWorkflows(t *testing.T) {
	f := newClusterFixture(t, 2, 2)
	f.start()
	ctx := context.Background()
	fc := &fakeCloser{}
	a := f.acts(nil)
	a.Closer = fc
	in := peer(f.member(3), 2, roles.RoleRunner)
	_, err := a.Discover(ctx, in)
	require.NoError(t, err)
	_, err = a.Activate(ctx, in)
	require.NoError(t, err)
	assert.Empty(t, fc.closed, "not closed before the hand-over")
	_, err = a.HandOver(ctx, in, false)
	require.NoError(t, err)
	assert.Equal(t, []string{group + "/" + name(2) + ": declared dead; " + name(3) + " took its place"}, fc.closed)

	in = peer(f.member(3), 4, roles.RoleBackup)
	_, err = a.Discover(ctx, in)
	require.NoError(t, err)
	_, err = a.Activate(ctx, in)
	require.NoError(t, err)
	assert.Len(t, fc.closed, 2)
	assert.Contains(t, fc.closed[1], name(4))
}

// A member leaving (SIGTERM) with nothing pending is removed from the group
// and its znodes are deleted; the standby then sees the group short of a
// runner and promotes itself. A restarted worker joins as a new member.
func TestLeaveRemovesTheMemberAndTheGroupConverges(t *testing.T) {
	f := newClusterFixture(t, 2, 2)
	f.start()
	ctx := context.Background()
	res, err := scale.Leave(ctx, f.mem, "", f.member(2))
	require.NoError(t, err)
	assert.Equal(t, scale.LeaveResult{Left: true}, res)
	assert.Equal(t, gs(3, 2, 2, "3", names(1, 3, 4), names(1), names(3, 4), nil, nil, nil), f.group())
	for _, p := range []string{f.c().NodePath(name(2)), f.c().TaskPath(name(2)), f.c().HeartbeatPath(name(2))} {
		_, _, err := f.mem.Get(ctx, p)
		assert.ErrorIs(t, err, metadata.ErrNotFound, "%s deleted", p)
	}
	pos, err := f.acts(nil).Promote(ctx, f.member(3))
	require.NoError(t, err)
	assert.Equal(t, roles.RoleRunner, pos.Role)

	// The standby leaving hands the standby on.
	res, err = scale.Leave(ctx, f.mem, "", f.member(4))
	require.NoError(t, err)
	assert.True(t, res.Left)
	assert.Equal(t, gs(2, 2, 0, "", names(1, 3), names(1, 3), nil, nil, nil, nil), f.group())

	reg, err := f.acts(nil).Register(ctx, f.member(2))
	require.NoError(t, err)
	assert.Equal(t, roles.RoleBackup, reg.Role, "back as a new member")
}

// A member whose Task is pending does not leave: a backup takes it over.
func TestLeaveWithAPendingTaskStays(t *testing.T) {
	f := newClusterFixture(t, 1, 1)
	f.start()
	f.assignBatch(1, "j", "j-b000001", 5)
	res, err := scale.Leave(context.Background(), f.mem, "", f.member(1))
	require.NoError(t, err)
	assert.False(t, res.Left)
	assert.Contains(t, res.Reason, "pending")
	assert.Equal(t, names(1), f.group().CurrentRunner)
	ctx, cancel := context.WithTimeout(context.Background(), quietWindow)
	defer cancel()
	assert.False(t, scale.AwaitIdle(ctx, f.mem, "", f.member(1)), "a pending batch is not idle")
	assert.Error(t, ctx.Err(), "it waited for the batch to drain")
	tk := f.task(1)
	tk.RunningStatus = roles.TaskDone
	_, err = f.c().SetTask(context.Background(), name(1), tk, metadata.AnyVersion)
	require.NoError(t, err)
	assert.True(t, scale.AwaitIdle(context.Background(), f.mem, "", f.member(1)))
}

// In All-are-Runner mode a runner watches its two ring successors only:
// runner 1 does not read runner 4's heartbeat, runner 3 does and declares
// it dead.
func TestWatchRunnersAllAreRunnersWatchesItsRingSuccessors(t *testing.T) {
	f := newClusterFixture(t, 5, 0)
	f.start()
	f.clock.Set(t0.Add(time.Minute))
	for _, i := range []int{1, 2, 3, 5} {
		f.beat(i, t0.Add(time.Minute), roles.HeartHealthy)
	}
	f.watchQuietly(1, 1)
	assert.Zero(t, f.spy.count(f.spy.gets, f.c().HeartbeatPath(name(4))), "runner 1 read runner 4's heartbeat")
	assert.Positive(t, f.spy.count(f.spy.gets, f.c().HeartbeatPath(name(2))))
	w, err := f.watch(context.Background(), 3, 1)
	require.NoError(t, err)
	assert.Equal(t, name(4), w.Dead)
}

// More workers registered before the election than the group's size (a
// StatefulSet started with more replicas): the extra ones are backups,
// counted in the totals, and the election of the first ones is unchanged.
func TestElectExtraMembersAreCountedBackups(t *testing.T) {
	f := newClusterFixture(t, 2, 1)
	f.start(1, 2, 3, 4, 5)
	g := f.group()
	assert.Equal(t, names(1, 2), g.CurrentRunner)
	assert.ElementsMatch(t, names(3, 4, 5), g.CurrentBackup)
	assert.Equal(t, 3, g.TotalBackup)
	assert.Equal(t, 5, g.TotalCrawler)
	assert.Equal(t, "3", g.StandbyID)
	for i := 4; i <= 5; i++ {
		assert.Equal(t, roles.RoleBackup, f.node(i).Role)
	}
}

// A pending plain Task is not waited for on SIGTERM: it goes to a backup.
func TestAwaitIdleDoesNotWaitForAPlainTask(t *testing.T) {
	f := newClusterFixture(t, 1, 1)
	f.start()
	f.assign(1, requests(3))
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	assert.False(t, scale.AwaitIdle(ctx, f.mem, "", f.member(1)))
	assert.NoError(t, ctx.Err(), "it returned at once")
}

// During formation each member's Elect adds it to the runner or backup list
// in turn. A standby elected before one of the runners sees the group short
// of runners; it must not promote itself into the place that runner is
// about to take (CI: 2+2, backup 3 elected and promoted before runner 1,
// which then made 3 step down again and left 4 the standby).
func TestTheStandbyDoesNotPromoteItselfDuringTheElection(t *testing.T) {
	f := electedButRunner1(t) // runner 1 has not elected yet
	ctx := context.Background()
	a := f.acts(nil)
	require.Equal(t, []string{name(1)}, f.group().Unelected())
	require.True(t, f.group().WantsRunner(true), "the lists alone say the group is short")

	f.watchQuietly(3, 0) // 1's heartbeat is fresh: it is about to elect

	_, err := a.Elect(ctx, f.member(1))
	require.NoError(t, err)
	assert.Empty(t, f.group().Unelected())
	f.watchQuietly(3, 0)
	assert.ElementsMatch(t, names(1, 2), f.group().CurrentRunner)
	assert.Equal(t, roles.RoleBackup, f.node(3).Role, "3 stays the standby")

	// A member that died before electing does not hold the standby back.
	g := electedButRunner1(t)
	for i := 2; i <= 4; i++ {
		g.beat(i, t0, roles.HeartHealthy)
	}
	g.beat(1, t0.Add(-time.Minute), roles.HeartHealthy)
	w := g.watchFor(3, 0)
	assert.True(t, w.Promote, "%+v", w)
}

// electedButRunner1 is a 2+2 group whose members registered and elected,
// all but member 1 (a runner to be).
func electedButRunner1(t *testing.T) *clusterFixture {
	t.Helper()
	f := newClusterFixture(t, 2, 2)
	ctx := context.Background()
	a := f.acts(nil)
	for i := 1; i <= 4; i++ {
		_, err := a.Register(ctx, f.member(i))
		require.NoError(t, err)
	}
	for _, i := range []int{2, 3, 4} {
		_, err := a.Elect(ctx, f.member(i))
		require.NoError(t, err)
	}
	return f
}
