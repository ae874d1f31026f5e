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

// beforeMulti is a Store that runs do once, just before the first Multi.
type beforeMulti struct {
	metadata.Store
	do   func()
	done bool
}

func (b *beforeMulti) Multi(ctx context.Context, ops ...metadata.Op) error {
	if !b.done {
		b.done = true
		b.do()
	}
	return b.Store.Multi(ctx, ops...)
}

// declareDead marks instance i dead as its watcher's Discover does.
func (f *clusterFixture) declareDead(i int, role roles.Role, by int) {
	f.t.Helper()
	c := f.c()
	_, v, err := c.GetNode(context.Background(), name(i))
	require.NoError(f.t, err)
	_, err = c.SetNode(context.Background(), name(i), roles.NodeState{Group: group, Role: role, TakenOverBy: name(by)}, v)
	require.NoError(f.t, err)
}

// The sequence a ZooKeeper leader loss produced in CI (every heartbeat late
// at once): the standby claims a runner, and before it takes the runner's
// place its own watcher declares the standby dead. The standby's next
// fail-over steps must not undo that verdict nor take the Task, and its
// claim must not strand the runner's Task: it settles the claim when it
// registers again.
func TestAClaimerDeclaredDeadMidFailOver(t *testing.T) {
	f, a3, fb, in := claimingStandby(t)
	ctx := context.Background()
	var (
		d   cluster.DiscoverResult
		err error
	)

	// Runner 1 finds the standby's heartbeat late too and claims it.
	f.declareDead(3, roles.RoleDeadBackupRunner, 1)

	_, err = a3.Activate(ctx, in)
	require.Error(t, err)
	assert.True(t, cluster.IsLost(err), "%v", err)
	assert.Equal(t, roles.RoleDeadBackupRunner, f.node(3).Role, "the verdict on the claimer stays")
	assert.Contains(t, f.group().CurrentRunner, name(2), "the group is unchanged")
	assert.NotContains(t, f.group().CurrentRunner, name(3))

	_, err = a3.HandOver(ctx, in, false)
	require.Error(t, err)
	assert.True(t, cluster.IsLost(err), "%v", err)
	assert.Equal(t, name(2), f.task(2).Holder, "the Task did not move")
	assert.True(t, f.task(2).Pending())
	assert.Empty(t, fb.claims, "the job store was not claimed")

	d, err = a3.Discover(ctx, peer(f.member(3), 1, roles.RoleRunner))
	require.NoError(t, err)
	assert.False(t, d.Claimed, "a claimer declared dead claims nothing")
	assert.Equal(t, roles.RoleRunner, f.node(1).Role)

	// Runner 1 removes the dead backup; the dead runner 2 waits for the
	// standby's hand-over, which will not come from its role workflow.
	_, err = f.acts(nil).Activate(ctx, peer(f.member(1), 3, roles.RoleBackup))
	require.NoError(t, err)
	_, err = f.acts(nil).Register(ctx, f.member(2))
	require.Error(t, err)
	assert.Equal(t, cluster.ErrTypeNotReady, errType(err))

	// The standby registers again. The group is short of a runner (2 is
	// dead but still listed: the standby's Activate never ran), so it joins
	// as a backup and releases its claim: runner 2 can be claimed again.
	res, err := a3.Register(ctx, f.member(3))
	require.NoError(t, err)
	assert.True(t, res.Rejoined)
	assert.Equal(t, roles.RoleBackup, res.Role)
	assert.Equal(t, roles.NodeState{Group: group, Role: roles.RoleDeadRunner}, f.node(2), "claim released")
	d, err = a3.Discover(ctx, in)
	require.NoError(t, err)
	assert.True(t, d.Claimed, "claimed again, by the standby this time alive")
	_, err = a3.Activate(ctx, in)
	require.NoError(t, err)
	h, err := a3.HandOver(ctx, in, false)
	require.NoError(t, err)
	assert.Equal(t, name(3), h.Owner)
	assert.True(t, h.Pending)
	assert.Equal(t, []string{"j/j-b000001 " + name(3) + "@" + itoa64(f.task(3).Epoch)}, fb.claims,
		"the store is claimed once ZooKeeper has the hand-over")
}

// activatedStandby is a 2+1 group whose runner 2 holds job batch
// j-b000001 and was claimed by the standby 3, which took its place
// (Discover, Activate) but has not handed its Task over yet.
func activatedStandby(t *testing.T) (*clusterFixture, *acts, *fakeBatches, cluster.PeerInput) {
	t.Helper()
	f, a3, fb, in := claimingStandby(t)
	_, err := a3.Activate(context.Background(), in)
	require.NoError(t, err)
	return f, a3, fb, in
}

// claimingStandby is activatedStandby before Activate: the claim only.
func claimingStandby(t *testing.T) (*clusterFixture, *acts, *fakeBatches, cluster.PeerInput) {
	t.Helper()
	f := newClusterFixture(t, 2, 1)
	f.start()
	a3 := f.acts(nil)
	fb := &fakeBatches{}
	a3.Batches = fb
	f.assignBatch(2, "j", "j-b000001", 5)
	in := peer(f.member(3), 2, roles.RoleRunner)
	d, err := a3.Discover(context.Background(), in)
	require.NoError(t, err)
	require.True(t, d.Claimed)
	return f, a3, fb, in
}

// A claimer whose role workflow ended between Activate and HandOver, and
// that registers again as a runner with nothing to do, finishes the
// hand-over itself.
func TestRegisterFinishesAnUnfinishedHandOver(t *testing.T) {
	f, a3, fb, _ := activatedStandby(t)
	ctx := context.Background()
	require.Equal(t, roles.RoleRunner, f.node(3).Role)

	// Its worker restarts here: the new Lifecycle registers.
	res, err := a3.Register(ctx, f.member(3))
	require.NoError(t, err)
	assert.Equal(t, cluster.RegisterResult{Role: roles.RoleRunner, Resumed: true}, res)
	own := f.task(3)
	assert.True(t, own.Pending(), "the dead runner's Task is now the standby's")
	assert.Equal(t, name(3), own.Holder)
	assert.Equal(t, name(2), own.HandedOverFrom)
	assert.Equal(t, []string{"j/j-b000001 " + name(3) + "@" + itoa64(own.Epoch)}, fb.claims)
	assert.False(t, f.task(2).Pending(), "the copy left behind is fenced")

	// And runner 2 can rejoin now.
	r2, err := f.acts(nil).Register(ctx, f.member(2))
	require.NoError(t, err)
	assert.True(t, r2.Rejoined)
}

// A hand-over that ZooKeeper refuses (the dead runner's Task was written
// meanwhile) leaves the job store as it was: the store never names a
// holder that ZooKeeper does not.
func TestARefusedHandOverDoesNotClaimTheStore(t *testing.T) {
	f, a3, fb, in := activatedStandby(t)
	ctx := context.Background()
	var err error
	// cluster.Member 3's own Task is written between HandOver's read and its
	// write (a store that does it just before the first Multi).
	bump := &beforeMulti{Store: a3.Store, do: func() {
		_, err := f.c().Put(ctx, f.c().TaskPath(name(3)), f.task(3), -1)
		require.NoError(t, err)
	}}
	a3.Store = bump
	_, err = a3.HandOver(ctx, in, false)
	require.Error(t, err)
	assert.Empty(t, fb.claims, "nothing claimed in the store")
	assert.Equal(t, name(2), f.task(2).Holder)
	// The retry goes through and claims.
	_, err = a3.HandOver(ctx, in, false)
	require.NoError(t, err)
	assert.Len(t, fb.claims, 1)
}

// A verdict acted on late (in CI: a Temporal restart delayed a watcher's
// Discover by 7 s) no longer holds when the peer changed roles or beat
// since: Discover claims nothing then, and the watcher looks again.
func TestDiscoverRefusesAStaleVerdict(t *testing.T) {
	f, a3, fb, in := activatedStandby(t)
	ctx := context.Background()
	_, err := a3.HandOver(ctx, in, false)
	require.NoError(t, err)
	require.True(t, f.task(3).Pending(), "the standby runs the dead runner's batch now")
	require.Len(t, fb.claims, 1)

	// Runner 1 had seen the standby late while it was still a backup.
	seen := f.heartbeat(3).HeartRhythmTime
	asBackup := cluster.PeerInput{Member: f.member(1), Dead: name(3), DeadRole: roles.RoleBackup, Beat: seen}
	d, err := f.acts(nil).Discover(ctx, asBackup)
	require.NoError(t, err)
	assert.False(t, d.Claimed, "claimed as a backup, its Task would not be handed over")
	assert.Equal(t, roles.RoleRunner, f.node(3).Role)

	// Seen late as what it is, but it has beaten since.
	asRunner := cluster.PeerInput{Member: f.member(1), Dead: name(3), DeadRole: roles.RoleRunner, Beat: seen}
	f.beat(3, t0.Add(time.Second), roles.HeartHealthy)
	d, err = f.acts(nil).Discover(ctx, asRunner)
	require.NoError(t, err)
	assert.False(t, d.Claimed, "it beat since it was seen late")

	// Seen late and silent since: claimed.
	asRunner.Beat = f.heartbeat(3).HeartRhythmTime
	d, err = f.acts(nil).Discover(ctx, asRunner)
	require.NoError(t, err)
	assert.True(t, d.Claimed)
	assert.Equal(t, roles.NodeState{Group: group, Role: roles.RoleDeadRunner, TakenOverBy: name(1)}, f.node(3))
}
