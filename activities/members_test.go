package activities_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/cluster"
	"github.com/batoncrawl/baton/roles"
)

// TestMembershipChangesWakeOnlyThoseConcerned: a group of 2 runners and 3
// backups (3 the standby). Runner 1 waits for its Task, runner 2 and
// secondary 5 watch their ring. A scale-up promotes the standby (3 becomes
// a runner, 4 the standby): none of the three reads GroupState for it.
// Then backup 4 dies and is removed: the membership listing changes, so
// secondary 5 looks (and finds itself the standby).
func TestMembershipChangesWakeOnlyThoseConcerned(t *testing.T) {
	f := newClusterFixture(t, 2, 3)
	f.start()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	spies := map[int]*spyStore{}
	for _, i := range []int{1, 2, 5} {
		spies[i] = newSpy(f.mem)
	}
	actsOf := func(i int) *acts {
		return newActs(&cluster.Deps{Store: spies[i], Clock: f.clock.Now, Log: quiet()}, nil)
	}
	go func() { _, _ = actsOf(1).WaitTask(ctx, f.member(1)) }()
	go func() { _, _ = actsOf(2).WatchRunners(ctx, cluster.WatchInput{Member: f.member(2)}) }()
	standby5 := goRun(func() (cluster.WatchResult, error) { return actsOf(5).WaitStandby(ctx, f.member(5)) })
	c := f.c()
	// Each has gone round its loop a few times (the test timers tick every
	// millisecond; WaitTask waits on its watches).
	spies[1].waitCount(t, spies[1].watch, c.MemberPath(name(1)), 1, "runner 1 reads its membership entry")
	spies[2].waitCount(t, spies[2].gets, c.HeartbeatPath(name(4)), 5, "runner 2 watches 3 and 4")
	spies[5].waitCount(t, spies[5].gets, c.HeartbeatPath(name(2)), 5, "secondary 5 watches 1 and 2")
	groupReads := func(i int) int {
		return spies[i].count(spies[i].gets, c.GroupPath()) + spies[i].count(spies[i].watch, c.GroupPath())
	}
	before := map[int]int{1: groupReads(1), 2: groupReads(2), 5: groupReads(5)}

	_, err := c.UpdateGroup(ctx, func(g *roles.GroupState) error { g.TotalRunner = 3; return nil })
	require.NoError(t, err)
	pos, err := f.acts(nil).Promote(ctx, f.member(3))
	require.NoError(t, err)
	require.Equal(t, roles.RoleRunner, pos.Role)
	m4, _, err := c.GetMember(ctx, name(4))
	require.NoError(t, err)
	require.True(t, m4.Standby, "4 is the standby now")
	// Let the watchers go round again.
	n2 := spies[2].count(spies[2].gets, c.HeartbeatPath(name(4)))
	n5 := spies[5].count(spies[5].gets, c.HeartbeatPath(name(2)))
	spies[2].waitCount(t, spies[2].gets, c.HeartbeatPath(name(4)), n2+5, "runner 2 goes on watching")
	spies[5].waitCount(t, spies[5].gets, c.HeartbeatPath(name(2)), n5+5, "secondary 5 goes on watching")
	for i, n := range before {
		assert.Equal(t, n, groupReads(i), "instance %d did not read GroupState for a change that is not its concern", i)
	}
	notReturned(t, standby5, "secondary 5 is not the standby")

	in := peer(f.member(2), 4, roles.RoleBackup)
	_, err = f.acts(nil).Discover(ctx, in)
	require.NoError(t, err)
	_, err = f.acts(nil).Activate(ctx, in)
	require.NoError(t, err)
	w, err := await(t, standby5, "secondary 5 becomes the standby")
	require.NoError(t, err)
	assert.True(t, w.Changed)
	assert.True(t, w.Position.Standby)
}
