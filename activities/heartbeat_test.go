package activities_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/metadata"
	"github.com/batoncrawl/baton/roles"
)

func (f *clusterFixture) waitHeartbeat(i int, what string, cond func(roles.Heartbeat) bool) roles.Heartbeat {
	f.t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		h, _, err := f.c().GetHeartbeat(context.Background(), name(i))
		if err == nil && cond(h) {
			return h
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("heartbeat of %s: %s not reached within %v (last %+v, %v)", name(i), what, waitLimit, h, err)
		}
		time.Sleep(2 * time.Millisecond) // polling interval, not synchronisation
	}
}

func TestBeatHeart(t *testing.T) {
	f := newClusterFixture(t, 1, 1)
	f.start()
	f.assign(1, requests(1))
	tk := f.task(1)
	tk.RunningStatus = roles.TaskProcessing
	_, err := f.c().Put(context.Background(), f.c().TaskPath(name(1)), tk, -1)
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	done := goRun(func() (struct{}, error) { return struct{}{}, f.acts(nil).BeatHeart(ctx, f.member(1)) })

	t1 := t0.Add(1500 * time.Millisecond)
	f.clock.Set(t1)
	h := f.waitHeartbeat(1, "healthy at t1", func(h roles.Heartbeat) bool {
		return h.HeartRhythmTime == t1.Format(roles.TimeFormat)
	})
	assert.Equal(t, roles.HeartHealthy, h.HealthyState)
	assert.Equal(t, roles.TaskProcessing, h.TaskState, "task_state follows the Task's running_status")
	assert.Equal(t, "2024-05-01T12:00:01.500000Z", h.HeartRhythmTime, "UTC with sub-second precision")
	assert.Equal(t, roles.TimeFormat, h.TimeFormat)
	assert.Equal(t, "0.005s", h.UpdateTime)
	assert.Equal(t, "0.5s", h.UpdateTimeout)
	assert.Equal(t, "2", h.HeartRhythmTimeout)

	// The clock moves, the heartbeat follows.
	t2 := t1.Add(time.Second)
	f.clock.Set(t2)
	f.waitHeartbeat(1, "t2", func(h roles.Heartbeat) bool { return h.HeartRhythmTime == t2.Format(roles.TimeFormat) })

	// A corrupted heartbeat is overwritten with a valid one.
	f.corrupt(f.c().HeartbeatPath(name(1)), `{"healthy_state":"??"`)
	f.waitHeartbeat(1, "repaired", func(h roles.Heartbeat) bool { return h.HealthyState == roles.HeartHealthy })

	cancel()
	_, err = await(t, done, "BeatHeart")
	require.ErrorIs(t, err, context.Canceled)
	h = f.heartbeat(1)
	assert.Equal(t, roles.HeartApparentDeath, h.HealthyState, "stopping writes Apparent Death once")
	assert.Equal(t, "Apparent Death", string(h.HealthyState))
}

func TestBeatHeartWritesNothingWhileMarkedDead(t *testing.T) {
	f := newClusterFixture(t, 1, 1)
	f.start()
	bg := context.Background()
	_, err := f.acts(nil).Discover(bg, peer(f.member(2), 1, roles.RoleRunner))
	require.NoError(t, err)
	require.Equal(t, roles.HeartAsystole, f.heartbeat(1).HealthyState)
	before := f.heartbeat(1)
	f.clock.Set(t0.Add(time.Hour))

	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	nodePath := f.c().NodePath(name(1))
	watches := f.spy.count(f.spy.watch, nodePath)
	done := goRun(func() (struct{}, error) { return struct{}{}, f.acts(nil).BeatHeart(ctx, f.member(1)) })
	// Several rounds of BeatHeart read the NodeState (it reads it again when
	// it changes: the test rewrites it, still dead); none writes.
	for k := 1; k <= 3; k++ {
		f.spy.waitCount(t, f.spy.watch, nodePath, watches+k, "BeatHeart rounds")
		_, err := f.c().Put(bg, nodePath, f.node(1), metadata.AnyVersion)
		require.NoError(t, err)
	}
	f.spy.waitCount(t, f.spy.watch, nodePath, watches+4, "BeatHeart rounds")
	assert.Equal(t, before, f.heartbeat(1), "the Asystole mark stays")
	cancel()
	_, err = await(t, done, "BeatHeart")
	require.ErrorIs(t, err, context.Canceled)
}

// A worker leaving its group (SIGTERM) ends its heartbeat without the
// Apparent Death mark: a watcher takes that mark for a death at once, and
// the member is still in GroupState until it has left.
func TestBeatHeartOfALeavingWorkerEndsWithoutApparentDeath(t *testing.T) {
	f := newClusterFixture(t, 1, 1)
	f.start()
	a := f.acts(nil)
	leaving := &atomic.Bool{}
	a.heartbeatActs.Leaving = leaving
	ctx, cancel := context.WithCancel(context.Background())
	done := goRun(func() (struct{}, error) { return struct{}{}, a.BeatHeart(ctx, f.member(1)) })
	t1 := t0.Add(time.Second)
	f.clock.Set(t1)
	f.waitHeartbeat(1, "healthy at t1", func(h roles.Heartbeat) bool { return h.HeartRhythmTime == t1.Format(roles.TimeFormat) })

	leaving.Store(true)
	cancel()
	_, err := await(t, done, "BeatHeart")
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, roles.HeartHealthy, f.heartbeat(1).HealthyState, "no Apparent Death while leaving")
}
