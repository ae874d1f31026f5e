package activities_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/cluster"
	"github.com/batoncrawl/baton/activities/metadata"
	"github.com/batoncrawl/baton/roles"
)

func TestRegisterWritesEveryZnode(t *testing.T) {
	f := newClusterFixture(t, 2, 1)
	ctx := context.Background()
	a := f.acts(nil)
	res, err := a.Register(ctx, f.member(1))
	require.NoError(t, err)
	assert.Equal(t, cluster.RegisterResult{Role: roles.RoleInitial}, res)

	assert.Equal(t, gs(3, 2, 1, "", names(1), nil, nil, nil, nil, nil), f.group())
	assert.Equal(t, roles.NodeState{Group: group, Role: roles.RoleInitial}, f.node(1))
	tk := f.task(1)
	assert.Equal(t, roles.TaskNothing, tk.RunningStatus)
	assert.Empty(t, tk.RunningContent)
	assert.False(t, tk.Pending())
	hb := f.heartbeat(1)
	assert.Equal(t, roles.NewHeartbeat(t0, f.timers), hb, "a Newborn heartbeat at the activity clock's time")
	data, _, err := f.mem.Get(ctx, f.c().AlivePath(name(1)))
	require.NoError(t, err, "the ephemeral alive znode exists")
	assert.Equal(t, name(1), string(data))
}

func TestRegisterElectThreeMembers(t *testing.T) {
	f := newClusterFixture(t, 2, 1)
	ctx := context.Background()
	a := f.acts(nil)
	for i := 1; i <= 3; i++ {
		_, err := a.Register(ctx, f.member(i))
		require.NoError(t, err)
	}
	g, err := a.WaitMembers(ctx, f.member(1))
	require.NoError(t, err)
	assert.Equal(t, names(1, 2, 3), g.CurrentCrawler)

	want := map[int]roles.Role{1: roles.RoleRunner, 2: roles.RoleRunner, 3: roles.RoleBackup}
	for i := 1; i <= 3; i++ {
		role, err := a.Elect(ctx, f.member(i))
		require.NoError(t, err)
		assert.Equal(t, want[i], role, "member %d", i)
		assert.Equal(t, roles.NodeState{Group: group, Role: want[i]}, f.node(i))
	}
	assert.Equal(t, gs(3, 2, 1, "3", names(1, 2, 3), names(1, 2), names(3), nil, nil, nil), f.group())

	pos, err := a.Position(ctx, f.member(3))
	require.NoError(t, err)
	assert.Equal(t, cluster.Position{Role: roles.RoleBackup, Standby: true}, pos)
	pos, err = a.Position(ctx, f.member(1))
	require.NoError(t, err)
	assert.Equal(t, cluster.Position{Role: roles.RoleRunner}, pos)

	// Electing again changes nothing.
	for i := 1; i <= 3; i++ {
		role, err := a.Elect(ctx, f.member(i))
		require.NoError(t, err)
		assert.Equal(t, want[i], role)
	}
	assert.Equal(t, gs(3, 2, 1, "3", names(1, 2, 3), names(1, 2), names(3), nil, nil, nil), f.group())
}

func TestElectOrderDoesNotMatter(t *testing.T) {
	// The standby is the smallest loser even when a bigger loser elects first.
	f := newClusterFixture(t, 2, 2)
	f.start(4, 2, 3, 1)
	g := f.group()
	assert.ElementsMatch(t, names(1, 2), g.CurrentRunner)
	assert.ElementsMatch(t, names(3, 4), g.CurrentBackup)
	assert.Equal(t, "3", g.StandbyID)
	assert.Equal(t, roles.RoleBackup, f.node(4).Role)
	assert.Equal(t, roles.RoleRunner, f.node(1).Role)
}

func TestElectByIndexNotByString(t *testing.T) {
	f := newClusterFixture(t, 9, 1)
	order := []int{10, 9, 8, 7, 6, 5, 4, 3, 2, 1}
	f.start(order...)
	g := f.group()
	assert.Equal(t, roles.RoleBackup, f.node(10).Role, "sc-crawler_10 sorts after sc-crawler_9")
	assert.Equal(t, names(10), g.CurrentBackup)
	assert.Equal(t, "10", g.StandbyID)
	assert.Len(t, g.CurrentRunner, 9)
}

func TestElectAllAreRunners(t *testing.T) {
	f := newClusterFixture(t, 3, 0)
	f.start()
	g := f.group()
	assert.Equal(t, gs(3, 3, 0, "", names(1, 2, 3), names(1, 2, 3), nil, nil, nil, nil), g)
	assert.True(t, g.AllAreRunners())
	pos, err := f.acts(nil).Position(context.Background(), f.member(2))
	require.NoError(t, err)
	assert.Equal(t, cluster.Position{Role: roles.RoleRunner, AllRunner: true}, pos)
}

func TestRegisterIsIdempotent(t *testing.T) {
	f := newClusterFixture(t, 2, 1)
	ctx := context.Background()
	a := f.acts(nil)
	_, err := a.Register(ctx, f.member(1))
	require.NoError(t, err)
	res, err := a.Register(ctx, f.member(1))
	require.NoError(t, err)
	assert.Equal(t, cluster.RegisterResult{Role: roles.RoleInitial, Resumed: true}, res)
	assert.Equal(t, names(1), f.group().CurrentCrawler, "no duplicate name")

	for i := 2; i <= 3; i++ {
		_, err := a.Register(ctx, f.member(i))
		require.NoError(t, err)
	}
	for i := 1; i <= 3; i++ {
		_, err := a.Elect(ctx, f.member(i))
		require.NoError(t, err)
	}
	assigned := f.assign(1, requests(2))
	before := f.group()

	// A restarted runner resumes: same role, its Task kept.
	res, err = a.Register(ctx, f.member(1))
	require.NoError(t, err)
	assert.Equal(t, cluster.RegisterResult{Role: roles.RoleRunner, Resumed: true}, res)
	assert.Equal(t, before, f.group())
	assert.Equal(t, assigned, f.task(1), "a resumed member keeps its Task")
	assert.Equal(t, roles.RoleRunner, f.node(1).Role)
	res, err = a.Register(ctx, f.member(3))
	require.NoError(t, err)
	assert.Equal(t, cluster.RegisterResult{Role: roles.RoleBackup, Resumed: true}, res)
	assert.Equal(t, before, f.group())
}

func TestRegisterRejectsBadName(t *testing.T) {
	f := newClusterFixture(t, 1, 1)
	m := f.member(1)
	m.Name = "crawler"
	_, err := f.acts(nil).Register(context.Background(), m)
	require.Error(t, err)
	assert.Equal(t, cluster.ErrTypeBadMember, errType(err))
	assert.True(t, nonRetryable(err), "a bad name is the configuration's: retrying cannot fix it")
	assert.Contains(t, err.Error(), `"crawler"`)
	_, _, err = f.c().GetGroup(context.Background())
	require.ErrorIs(t, err, metadata.ErrNotFound, "nothing written")
}

func TestRegisterRejectsANameOfAnotherGroup(t *testing.T) {
	f := newClusterFixture(t, 1, 1)
	ctx := context.Background()
	path := f.c().NodePath(name(1))
	_, err := f.c().Put(ctx, path, roles.NodeState{Group: "another-group", Role: roles.RoleRunner}, metadata.AnyVersion)
	require.NoError(t, err)
	_, err = f.acts(nil).Register(ctx, f.member(1))
	require.Error(t, err)
	assert.Equal(t, cluster.ErrTypeBadMember, errType(err))
	assert.True(t, nonRetryable(err), "crawler names are unique under a ZooKeeper root: retrying cannot fix it")
	assert.Contains(t, err.Error(), path)
	assert.Contains(t, err.Error(), `"another-group"`)
}

func TestWaitMembersIsWokenByTheWatch(t *testing.T) {
	f := newClusterFixture(t, 2, 1)
	f.timers.CheckTask = time.Hour // only the watch can wake it
	ctx := context.Background()
	a := f.acts(nil)
	for i := 1; i <= 2; i++ {
		_, err := a.Register(ctx, f.member(i))
		require.NoError(t, err)
	}
	done := goRun(func() (roles.GroupState, error) { return a.WaitMembers(ctx, f.member(1)) })
	f.spy.waitCount(t, f.spy.watch, f.c().RegisteredPath(), 1, "WaitMembers watches the registered marker")
	f.spy.waitCount(t, f.spy.gets, f.c().GroupPath(), 4, "WaitMembers reads GroupState after watching the marker")
	notReturned(t, done, "WaitMembers with 2 of 3 members")
	_, err := a.Register(ctx, f.member(3))
	require.NoError(t, err)
	g, err := await(t, done, "WaitMembers")
	require.NoError(t, err)
	assert.Equal(t, names(1, 2, 3), g.CurrentCrawler)
}

// A forming group wakes each waiting member once, when the last one
// registers, not at every registration: with N members forming at once
// the reads of GroupState grow as N, not N².
func TestWaitMembersWakesOnceAsTheGroupForms(t *testing.T) {
	const n = 8
	f := newClusterFixture(t, 2, n-2)
	f.timers.CheckTask = time.Hour // only the watch can wake it
	ctx := context.Background()
	a := f.acts(nil)
	ws := newSpy(f.mem) // the waiters' reads only
	w := newActs(&cluster.Deps{Store: ws, Clock: f.clock.Now, Log: quiet()}, nil)
	var waiting []<-chan result[roles.GroupState]
	for i := 1; i < n; i++ {
		_, err := a.Register(ctx, f.member(i))
		require.NoError(t, err)
		waiting = append(waiting, goRun(func() (roles.GroupState, error) { return w.WaitMembers(ctx, f.member(i)) }))
		ws.waitCount(t, ws.gets, f.c().GroupPath(), 2*i, "the waiting members read GroupState")
	}
	_, err := a.Register(ctx, f.member(n))
	require.NoError(t, err)
	for _, w := range waiting {
		g, err := await(t, w, "WaitMembers")
		require.NoError(t, err)
		assert.Len(t, g.CurrentCrawler, n)
	}
	reads := ws.count(ws.gets, f.c().GroupPath()) + ws.count(ws.watch, f.c().GroupPath())
	assert.LessOrEqual(t, reads, 3*(n-1), "GroupState reads of %d waiting members: each reads it twice when it starts and once when woken", n-1)
}

// A marker left from an earlier formation wakes nobody: the waiting
// member watches GroupState itself and returns when the group is complete.
func TestWaitMembersWithAStaleMarker(t *testing.T) {
	f := newClusterFixture(t, 2, 1)
	f.timers.CheckTask = time.Hour // only a watch can wake it
	ctx := context.Background()
	_, err := f.mem.Create(ctx, f.c().RegisteredPath(), nil, metadata.Persistent)
	require.NoError(t, err)
	a := f.acts(nil)
	for i := 1; i <= 2; i++ {
		_, err := a.Register(ctx, f.member(i))
		require.NoError(t, err)
	}
	done := goRun(func() (roles.GroupState, error) { return a.WaitMembers(ctx, f.member(1)) })
	f.spy.waitCount(t, f.spy.watch, f.c().GroupPath(), 1, "WaitMembers watches GroupState")
	notReturned(t, done, "WaitMembers with 2 of 3 members and a stale marker")
	_, err = a.Register(ctx, f.member(3))
	require.NoError(t, err)
	g, err := await(t, done, "WaitMembers")
	require.NoError(t, err)
	assert.Equal(t, names(1, 2, 3), g.CurrentCrawler)
}

func TestWaitMembersHonoursContext(t *testing.T) {
	f := newClusterFixture(t, 2, 1)
	a := f.acts(nil)
	_, err := a.Register(context.Background(), f.member(1))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err = a.WaitMembers(ctx, f.member(1))
	require.ErrorIs(t, err, context.DeadlineExceeded)
}
