package activities

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/roles"
)

// quietWindow bounds a check that nothing is reported: the watch runs
// many check_crawler_state rounds (1 ms) in it.
const quietWindow = 150 * time.Millisecond

func (f *clusterFixture) watch(ctx context.Context, i, free int) (WatchResult, error) {
	return f.acts(nil).WatchRunners(ctx, WatchInput{Member: f.member(i), Free: free})
}

// watchQuietly runs WatchRunners for quietWindow and requires that it
// reports nothing.
func (f *clusterFixture) watchQuietly(i, free int) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), quietWindow)
	defer cancel()
	w, err := f.watch(ctx, i, free)
	require.ErrorIs(f.t, err, context.DeadlineExceeded, "reported %+v", w)
}

func (f *clusterFixture) watchFor(i, free int) WatchResult {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	w, err := f.watch(ctx, i, free)
	require.NoError(f.t, err)
	return w
}

func TestWatchRunnersDeclaresAnOldHeartbeatDead(t *testing.T) {
	f := newClusterFixture(t, 2, 1)
	f.start()
	now := t0.Add(time.Minute)
	f.clock.Set(now)
	f.beat(1, now, roles.HeartHealthy)
	f.beat(3, now, roles.HeartHealthy)
	f.beat(2, now.Add(-10*time.Second), roles.HeartHealthy)
	w := f.watchFor(3, 1)
	assert.Equal(t, WatchResult{Dead: name(2), DeadRole: roles.RoleRunner,
		Position: Position{Role: roles.RoleBackup, Standby: true}, DetectedAfter: 10 * time.Second}, w)
	assert.Equal(t, roles.RoleRunner, f.node(2).Role, "watching only reports; Discover marks")
}

func TestWatchRunnersQuietWhileHeartbeatsAreFresh(t *testing.T) {
	f := newClusterFixture(t, 2, 1)
	f.start()
	now := t0.Add(time.Minute)
	f.clock.Set(now)
	f.beat(1, now.Add(-400*time.Millisecond), roles.HeartHealthy) // under update_timeout (500 ms)
	f.beat(2, now, roles.HeartHealthy)
	f.watchQuietly(3, 1)
	f.beat(1, now.Add(-500*time.Millisecond), roles.HeartHealthy) // exactly update_timeout: late
	assert.Equal(t, name(1), f.watchFor(3, 1).Dead)
}

func TestWatchRunnersTreatsDeadHeartStatesAsTimedOut(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(f *clusterFixture)
	}{
		{"Apparent Death", func(f *clusterFixture) { f.beat(2, t0, roles.HeartApparentDeath) }},
		{"Asystole", func(f *clusterFixture) { f.beat(2, t0, roles.HeartAsystole) }},
		{"corrupted heartbeat", func(f *clusterFixture) { f.corrupt(f.c().HeartbeatPath(name(2)), `{"healthy_state":`) }},
		{"missing heartbeat", func(f *clusterFixture) {
			require.NoError(t, f.mem.Delete(context.Background(), f.c().HeartbeatPath(name(2)), -1))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newClusterFixture(t, 2, 1)
			f.start() // every heartbeat at t0, and the clock stays at t0: all fresh
			tc.setup(f)
			var w WatchResult
			require.NotPanics(t, func() { w = f.watchFor(3, 1) })
			assert.Equal(t, name(2), w.Dead)
			assert.Equal(t, roles.RoleRunner, w.DeadRole)
		})
	}
}

func TestWatchRunnersWatchesBackupsToo(t *testing.T) {
	f := newClusterFixture(t, 1, 2)
	f.start()
	f.beat(3, t0.Add(-time.Minute), roles.HeartHealthy)
	w := f.watchFor(2, 1)
	assert.Equal(t, name(3), w.Dead)
	assert.Equal(t, roles.RoleBackup, w.DeadRole)
}

func TestWatchRunnersReturnsWhenNoLongerStandby(t *testing.T) {
	f := newClusterFixture(t, 2, 1)
	f.start()
	w := f.watchFor(1, 1) // a runner in a group with backups
	assert.Equal(t, WatchResult{Changed: true, Position: Position{Role: roles.RoleRunner}}, w)

	// The standby marked dead stops watching.
	ctx := context.Background()
	_, err := f.acts(nil).Discover(ctx, peer(f.member(1), 3, roles.RoleBackup))
	require.NoError(t, err)
	w = f.watchFor(3, 1)
	assert.True(t, w.Changed)
	assert.Equal(t, roles.RoleDeadBackupRunner, w.Position.Role)
}

func TestWatchRunnersFreeCapacity(t *testing.T) {
	t.Run("all-are-runner: no capacity, no report", func(t *testing.T) {
		f := newClusterFixture(t, 3, 0)
		f.start()
		f.beat(2, t0.Add(-time.Minute), roles.HeartHealthy)
		f.watchQuietly(1, 0)
		w := f.watchFor(1, 1)
		assert.Equal(t, WatchResult{Dead: name(2), DeadRole: roles.RoleRunner,
			Position: Position{Role: roles.RoleRunner, AllRunner: true}, DetectedAfter: time.Minute}, w)
	})
	t.Run("with backups: Free is irrelevant", func(t *testing.T) {
		f := newClusterFixture(t, 2, 1)
		f.start()
		f.beat(2, t0.Add(-time.Minute), roles.HeartHealthy)
		assert.Equal(t, name(2), f.watchFor(3, 0).Dead)
	})
	t.Run("all-are-runner: a runner marked dead stops watching", func(t *testing.T) {
		f := newClusterFixture(t, 3, 0)
		f.start()
		_, err := f.acts(nil).Discover(context.Background(), peer(f.member(2), 1, roles.RoleRunner))
		require.NoError(t, err)
		w := f.watchFor(1, 1)
		assert.True(t, w.Changed)
		assert.Equal(t, roles.RoleDeadRunner, w.Position.Role)
	})
}

func TestWatchRunnersSkipsPeersClaimedByOthers(t *testing.T) {
	f := newClusterFixture(t, 3, 0)
	f.start()
	ctx := context.Background()
	f.beat(3, t0.Add(-time.Minute), roles.HeartHealthy)
	// Runner 2 claimed dead runner 3 but has not activated yet.
	d, err := f.acts(nil).Discover(ctx, peer(f.member(2), 3, roles.RoleRunner))
	require.NoError(t, err)
	require.True(t, d.Claimed)
	f.watchQuietly(1, 1)
	// The claimer dies too: its claim can be taken over. (Its heartbeat
	// stays fresh, so only runner 3 is reported.)
	_, err = f.c().Put(ctx, f.c().NodePath(name(2)), roles.NodeState{Group: group, Role: roles.RoleDeadRunner}, -1)
	require.NoError(t, err)
	assert.Equal(t, name(3), f.watchFor(1, 1).Dead)
	// A peer claimed by the watcher itself is reported again (a retry).
	f2 := newClusterFixture(t, 3, 0)
	f2.start()
	f2.beat(3, t0.Add(-time.Minute), roles.HeartHealthy)
	_, err = f2.acts(nil).Discover(ctx, peer(f2.member(1), 3, roles.RoleRunner))
	require.NoError(t, err)
	assert.Equal(t, name(3), f2.watchFor(1, 1).Dead)
}

func TestWatchRunnersNeedsThresholdChecks(t *testing.T) {
	// With a long check interval the first late check is not enough: the
	// runner is declared dead only after heart_rhythm_timeout checks.
	f := newClusterFixture(t, 2, 1)
	f.timers.CheckCrawlerState = time.Hour
	f.start()
	f.beat(2, t0.Add(-time.Minute), roles.HeartHealthy)
	f.timers.HeartRhythmTimeout = 1
	assert.Equal(t, name(2), f.watchFor(3, 1).Dead, "threshold 1: the first check")
	f.timers.HeartRhythmTimeout = 2
	ctx, cancel := context.WithTimeout(context.Background(), quietWindow)
	defer cancel()
	_, err := f.watch(ctx, 3, 1)
	require.ErrorIs(t, err, context.DeadlineExceeded, "threshold 2: one check is not enough")
}

func TestWaitStandbyWokenWhenItBecomesStandby(t *testing.T) {
	f := newClusterFixture(t, 1, 3)
	f.timers.CheckStandbyID = time.Hour // only the watch can wake it
	f.start()
	ctx := context.Background()
	done := goRun(func() (WatchResult, error) { return f.acts(nil).WaitStandby(ctx, f.member(4)) })
	f.spy.waitCount(t, f.spy.watch, f.c().GroupPath(), 1, "WaitStandby watches GroupState")
	notReturned(t, done, "WaitStandby of the third backup")

	// Backup 2 (the standby) takes over runner 1; backup 3 becomes standby.
	in := peer(f.member(2), 1, roles.RoleRunner)
	_, err := f.acts(nil).Discover(ctx, in)
	require.NoError(t, err)
	_, err = f.acts(nil).Activate(ctx, in)
	require.NoError(t, err)
	assert.Equal(t, "3", f.group().StandbyID)
	notReturned(t, done, "WaitStandby of backup 4 while 3 is standby")

	// Backup 3 takes over runner 2 (say it died too); backup 4 becomes standby.
	in = peer(f.member(3), 2, roles.RoleRunner)
	_, err = f.acts(nil).Discover(ctx, in)
	require.NoError(t, err)
	_, err = f.acts(nil).Activate(ctx, in)
	require.NoError(t, err)
	w, err := await(t, done, "WaitStandby")
	require.NoError(t, err)
	assert.Equal(t, WatchResult{Changed: true, Position: Position{Role: roles.RoleBackup, Standby: true}}, w)
}

func TestWaitStandbyNextInLineWatchesThePrimary(t *testing.T) {
	f := newClusterFixture(t, 1, 3)
	f.start()
	ctx := context.Background()
	f.beat(2, t0.Add(-time.Minute), roles.HeartHealthy) // the primary backup stops beating
	// Backup 4 is not next in line: it does not judge the primary.
	cctx, cancel := context.WithTimeout(ctx, quietWindow)
	defer cancel()
	_, err := f.acts(nil).WaitStandby(cctx, f.member(4))
	require.ErrorIs(t, err, context.DeadlineExceeded)

	wctx, wcancel := context.WithTimeout(ctx, waitLimit)
	defer wcancel()
	w, err := f.acts(nil).WaitStandby(wctx, f.member(3))
	require.NoError(t, err)
	assert.Equal(t, WatchResult{Dead: name(2), DeadRole: roles.RoleBackup,
		Position: Position{Role: roles.RoleBackup}, DetectedAfter: time.Minute}, w)

	in := peer(f.member(3), 2, roles.RoleBackup)
	_, err = f.acts(nil).Discover(ctx, in)
	require.NoError(t, err)
	pos, err := f.acts(nil).Activate(ctx, in)
	require.NoError(t, err)
	assert.Equal(t, Position{Role: roles.RoleBackup, Standby: true}, pos)
	assert.Equal(t, gs(4, 1, 2, "3", names(1, 3, 4), names(1), names(3, 4), names(2), nil, names(2)), f.group())
	w, err = f.acts(nil).WaitStandby(wctx, f.member(3))
	require.NoError(t, err)
	assert.True(t, w.Changed)
	assert.True(t, w.Position.Standby)
}

func TestWaitStandbyRepairsAMissingStandby(t *testing.T) {
	f := newClusterFixture(t, 1, 2)
	f.start()
	ctx := context.Background()
	_, err := f.c().UpdateGroup(ctx, func(g *roles.GroupState) error { g.StandbyID = ""; return nil })
	require.NoError(t, err)
	wctx, cancel := context.WithTimeout(ctx, waitLimit)
	defer cancel()
	w, err := f.acts(nil).WaitStandby(wctx, f.member(2))
	require.NoError(t, err)
	assert.Equal(t, WatchResult{Changed: true, Position: Position{Role: roles.RoleBackup, Standby: true}}, w)
	assert.Equal(t, "2", f.group().StandbyID)
}
