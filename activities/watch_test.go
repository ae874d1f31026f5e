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

// quietWindow bounds a check that nothing is reported: the watch runs
// many check_crawler_state rounds (1 ms) in it.
const quietWindow = 150 * time.Millisecond

func (f *clusterFixture) watch(ctx context.Context, i, free int) (cluster.WatchResult, error) {
	return f.acts(nil).WatchRunners(ctx, cluster.WatchInput{Member: f.member(i), Free: free})
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

func (f *clusterFixture) watchFor(i, free int) cluster.WatchResult {
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
	assert.Equal(t, cluster.WatchResult{Dead: name(2), DeadRole: roles.RoleRunner,
		Position: cluster.Position{Role: roles.RoleBackup, Standby: true}, DetectedAfter: 10 * time.Second,
		Beat: f.heartbeat(2).HeartRhythmTime}, w)
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
			var w cluster.WatchResult
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
	f := newClusterFixture(t, 1, 2)
	f.start()
	// A runner and the standby watch; a secondary is not the standby.
	f.watchQuietly(1, 0)
	f.watchQuietly(2, 1)
	assert.Equal(t, cluster.WatchResult{Changed: true, Position: cluster.Position{Role: roles.RoleBackup}}, f.watchFor(3, 1))

	// The standby's watch (As backup) ends once its instance is a runner,
	// e.g. after an Activate whose HandOver then lost the claim: the
	// Lifecycle must run it as a Runner.
	ctx := context.Background()
	n2 := f.node(2)
	n2.Role = roles.RoleRunner
	_, err := f.c().Put(ctx, f.c().NodePath(name(2)), n2, -1)
	require.NoError(t, err)
	wctx, wcancel := context.WithTimeout(ctx, waitLimit)
	defer wcancel()
	w, err := f.acts(nil).WatchRunners(wctx, cluster.WatchInput{Member: f.member(2), Free: 1, As: roles.RoleBackup})
	require.NoError(t, err)
	assert.Equal(t, cluster.WatchResult{Changed: true, Position: cluster.Position{Role: roles.RoleRunner}}, w)
	n2.Role = roles.RoleBackup
	_, err = f.c().Put(ctx, f.c().NodePath(name(2)), n2, -1)
	require.NoError(t, err)

	// The standby marked dead stops watching.
	_, err = f.acts(nil).Discover(ctx, peer(f.member(1), 2, roles.RoleBackup))
	require.NoError(t, err)
	w = f.watchFor(2, 1)
	assert.True(t, w.Changed)
	assert.Equal(t, roles.RoleDeadBackupRunner, w.Position.Role)
}

// TestRingSpreadsTheWatching: in a group of 4 runners and 1 backup every
// member watches its two ring successors: the standby (5) reads runners 1
// and 2 only, so no instance reads every heartbeat.
func TestRingSpreadsTheWatching(t *testing.T) {
	f := newClusterFixture(t, 4, 1)
	f.start()
	before := map[int]int{}
	for i := 1; i <= 5; i++ {
		before[i] = f.spy.count(f.spy.gets, f.c().HeartbeatPath(name(i)))
	}
	f.watchQuietly(5, 1)
	for i := 1; i <= 5; i++ {
		n := f.spy.count(f.spy.gets, f.c().HeartbeatPath(name(i))) - before[i]
		if i <= 2 {
			assert.Positive(t, n, "the standby reads its successor %d", i)
		} else {
			assert.Zero(t, n, "the standby does not read %d", i)
		}
	}
}

// TestRunnerReportsADeadRunnerToTheStandby: runner 3 dies; the standby (5)
// does not watch it, its ring predecessors (1 and 2) do. They report it
// (they cannot take it over); the report wakes the standby, whose watch
// returns runner 3 dead; Activate deletes the report.
func TestRunnerReportsADeadRunnerToTheStandby(t *testing.T) {
	f := newClusterFixture(t, 4, 1)
	f.start()
	ctx := context.Background()
	f.beat(3, t0.Add(-time.Minute), roles.HeartHealthy)
	standby := goRun(func() (cluster.WatchResult, error) {
		wctx, cancel := context.WithTimeout(ctx, waitLimit)
		defer cancel()
		return f.watch(wctx, 5, 1)
	})
	notReturned(t, standby, "the standby does not watch runner 3 itself")
	f.watchQuietly(1, 0) // runner 1 reports, and keeps watching
	data, _, err := f.mem.Get(ctx, f.c().ReportPath(name(3)))
	require.NoError(t, err, "runner 1 wrote a death report")
	assert.Contains(t, string(data), `"reported_by":"`+name(1)+`"`)
	w, err := await(t, standby, "the standby's watch")
	require.NoError(t, err)
	assert.Equal(t, cluster.WatchResult{Dead: name(3), DeadRole: roles.RoleRunner,
		Position: cluster.Position{Role: roles.RoleBackup, Standby: true}, DetectedAfter: time.Minute,
		Beat: f.heartbeat(3).HeartRhythmTime}, w)

	in := peer(f.member(5), 3, roles.RoleRunner)
	_, err = f.acts(nil).Discover(ctx, in)
	require.NoError(t, err)
	_, err = f.acts(nil).Activate(ctx, in)
	require.NoError(t, err)
	_, _, err = f.mem.Get(ctx, f.c().ReportPath(name(3)))
	require.ErrorIs(t, err, metadata.ErrNotFound, "the report is acted on")
}

// TestStandbyDropsWrongReports: a report of a runner whose heartbeat is
// fresh (the reporter was wrong), or of a name that is no current runner,
// is deleted, not acted on.
func TestStandbyDropsWrongReports(t *testing.T) {
	f := newClusterFixture(t, 4, 1)
	f.start()
	ctx := context.Background()
	for _, n := range []int{3, 9} {
		_, err := f.mem.Create(ctx, f.c().ReportPath(name(n)), []byte(`{}`), metadata.Persistent)
		require.NoError(t, err)
	}
	_, err := f.mem.Create(ctx, f.c().ReportPath("not a name"), []byte(`{}`), metadata.Persistent)
	require.NoError(t, err)
	f.watchQuietly(5, 1)
	kids, err := f.mem.Children(ctx, f.c().ReportsPath())
	require.NoError(t, err)
	assert.Equal(t, []string{"not a name"}, kids, "wrong reports dropped; a bad name is logged and left for a person")
}

// TestALoneBackupIsWatched: with one backup, its ring predecessors (the
// runners) watch it; the runner that sees it dead returns it, to remove it
// from the group.
func TestALoneBackupIsWatched(t *testing.T) {
	f := newClusterFixture(t, 2, 1)
	f.start()
	f.beat(3, t0.Add(-time.Minute), roles.HeartHealthy)
	w := f.watchFor(1, 0)
	assert.Equal(t, cluster.WatchResult{Dead: name(3), DeadRole: roles.RoleBackup,
		Position: cluster.Position{Role: roles.RoleRunner}, DetectedAfter: time.Minute,
		Beat: f.heartbeat(3).HeartRhythmTime}, w)
}

func TestWatchRunnersFreeCapacity(t *testing.T) {
	t.Run("all-are-runner: no capacity, a report for a survivor with room", func(t *testing.T) {
		f := newClusterFixture(t, 5, 0)
		f.start()
		f.beat(2, t0.Add(-time.Minute), roles.HeartHealthy)
		f.watchQuietly(4, 1) // successors 5 and 1: runner 2 is not its to judge
		f.watchQuietly(1, 0) // successors 2 and 3, but no room
		_, _, err := f.mem.Get(context.Background(), f.c().ReportPath(name(2)))
		require.NoError(t, err, "runner 1 reported runner 2")
		assert.Equal(t, name(2), f.watchFor(4, 1).Dead, "runner 4, with room, takes the report")
		w := f.watchFor(1, 1)
		assert.Equal(t, cluster.WatchResult{Dead: name(2), DeadRole: roles.RoleRunner,
			Position: cluster.Position{Role: roles.RoleRunner, AllRunner: true}, DetectedAfter: time.Minute,
			Beat: f.heartbeat(2).HeartRhythmTime}, w)
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
	done := goRun(func() (cluster.WatchResult, error) { return f.acts(nil).WaitStandby(ctx, f.member(4)) })
	f.spy.waitCount(t, f.spy.watch, f.c().MemberPath(name(4)), 1, "WaitStandby watches its membership entry")
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
	assert.Equal(t, cluster.WatchResult{Changed: true, Position: cluster.Position{Role: roles.RoleBackup, Standby: true}}, w)
}

func TestWaitStandbyWatchesItsRingSuccessors(t *testing.T) {
	f := newClusterFixture(t, 1, 3)
	f.start()
	ctx := context.Background()
	f.beat(2, t0.Add(-time.Minute), roles.HeartHealthy) // the primary backup stops beating
	// Backup 3's successors are 4 and 1: it does not judge the primary.
	cctx, cancel := context.WithTimeout(ctx, quietWindow)
	defer cancel()
	_, err := f.acts(nil).WaitStandby(cctx, f.member(3))
	require.ErrorIs(t, err, context.DeadlineExceeded)

	// Backup 4's are 1 and 2.
	wctx, wcancel := context.WithTimeout(ctx, waitLimit)
	defer wcancel()
	w, err := f.acts(nil).WaitStandby(wctx, f.member(4))
	require.NoError(t, err)
	assert.Equal(t, cluster.WatchResult{Dead: name(2), DeadRole: roles.RoleBackup,
		Position: cluster.Position{Role: roles.RoleBackup}, DetectedAfter: time.Minute,
		Beat: f.heartbeat(2).HeartRhythmTime}, w)

	in := peer(f.member(4), 2, roles.RoleBackup)
	_, err = f.acts(nil).Discover(ctx, in)
	require.NoError(t, err)
	pos, err := f.acts(nil).Activate(ctx, in)
	require.NoError(t, err)
	assert.Equal(t, cluster.Position{Role: roles.RoleBackup}, pos)
	assert.Equal(t, gs(4, 1, 2, "3", names(1, 3, 4), names(1), names(3, 4), names(2), nil, names(2)), f.group())
	w, err = f.acts(nil).WaitStandby(wctx, f.member(3))
	require.NoError(t, err)
	assert.True(t, w.Changed)
	assert.True(t, w.Position.Standby, "the next backup is the standby")
}

// TestWaitStandbyReportsADeadRunner: a secondary whose ring successor is a
// dead runner reports it to the standby and keeps waiting.
func TestWaitStandbyReportsADeadRunner(t *testing.T) {
	f := newClusterFixture(t, 1, 2)
	f.start()
	ctx := context.Background()
	f.beat(1, t0.Add(-time.Minute), roles.HeartHealthy)
	cctx, cancel := context.WithTimeout(ctx, quietWindow)
	defer cancel()
	_, err := f.acts(nil).WaitStandby(cctx, f.member(3)) // successors 1 and 2
	require.ErrorIs(t, err, context.DeadlineExceeded)
	_, _, err = f.mem.Get(ctx, f.c().ReportPath(name(1)))
	require.NoError(t, err, "backup 3 reported runner 1")
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
	assert.Equal(t, cluster.WatchResult{Changed: true, Position: cluster.Position{Role: roles.RoleBackup, Standby: true}}, w)
	assert.Equal(t, "2", f.group().StandbyID)
}

// TestReporterReportsARunnerThatDiesAgain: a runner reported dead that
// recovers (the standby drops the report) and dies again is reported
// again by the same watch.
func TestReporterReportsARunnerThatDiesAgain(t *testing.T) {
	f := newClusterFixture(t, 4, 1)
	f.start()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := f.c()
	f.beat(3, t0.Add(-time.Minute), roles.HeartHealthy)
	go func() { _, _ = f.watch(ctx, 1, 0) }() // successors 2 and 3
	reported := func(what string) {
		t.Helper()
		deadline := time.Now().Add(waitLimit)
		for {
			if _, _, err := f.mem.Get(ctx, c.ReportPath(name(3))); err == nil {
				return
			}
			require.True(t, time.Now().Before(deadline), what)
			time.Sleep(time.Millisecond)
		}
	}
	reported("runner 3 reported")
	require.NoError(t, f.mem.Delete(ctx, c.ReportPath(name(3)), -1)) // as a standby that found it fresh
	f.beat(3, t0, roles.HeartHealthy)
	reads := f.spy.count(f.spy.gets, c.HeartbeatPath(name(3)))
	f.spy.waitCount(t, f.spy.gets, c.HeartbeatPath(name(3)), reads+2*f.timers.ResetTimeout, "runner 1 sees runner 3 healthy for reset_timeout checks")
	f.beat(3, t0.Add(-time.Minute), roles.HeartHealthy)
	reported("runner 3 reported again after it died again")
}

func TestWatchRunnersChecksWhenAHeartbeatTimesOut(t *testing.T) {
	// A check interval of an hour: the first late check still comes when
	// the heartbeat reaches update_timeout, not at the next interval.
	f := newClusterFixture(t, 2, 1)
	f.timers.CheckCrawlerState = time.Hour
	f.timers.HeartRhythmTimeout = 1
	f.start()
	now := time.Now()
	f.beat(1, now.Add(time.Hour), roles.HeartHealthy)             // fresh for the whole test
	f.beat(2, now.Add(-300*time.Millisecond), roles.HeartHealthy) // times out in 200 ms
	a := newActs(&cluster.Deps{Store: f.spy, Clock: time.Now, Log: quiet()}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	w, err := a.WatchRunners(ctx, cluster.WatchInput{Member: f.member(3), Free: 1})
	require.NoError(t, err)
	assert.Equal(t, name(2), w.Dead)
	assert.GreaterOrEqual(t, w.DetectedAfter, f.timers.UpdateTimeout)
	assert.Less(t, time.Since(now), 2*time.Second, "declared dead %v after its heartbeat timed out", time.Since(now)-200*time.Millisecond)
}
