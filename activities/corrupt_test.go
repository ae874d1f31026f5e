package activities_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/cluster"
	"github.com/batoncrawl/baton/roles"
)

// Corrupted metadata yields a clear error naming the znode and the field,
// and no activity panics on it. The error is retryable: an operator can
// repair the znode while the workflow waits.

// corrupt logs the znode and the field, and returns the error unchanged
// (retryable).
func TestCorruptLogsTheZnodeAndTheField(t *testing.T) {
	f := newClusterFixture(t, 1, 1)
	f.start()
	path := f.c().TaskPath(name(1))
	f.corrupt(path, `{"running_content":[],"running_status":"sleeping"}`)
	_, _, err := f.c().GetTask(context.Background(), name(1))
	requireCorrupt(t, err, path, "Task.running_status")

	var buf bytes.Buffer
	a := f.acts(nil)
	a.Log = slog.New(slog.NewTextHandler(&buf, nil))
	got := a.Corrupt(context.Background(), err)
	assert.Same(t, err, got, "returned unchanged")
	assert.False(t, nonRetryable(got))
	line := buf.String()
	assert.Contains(t, line, "corrupted metadata")
	assert.Contains(t, line, "znode="+path)
	assert.Contains(t, line, "field=Task.running_status")

	buf.Reset()
	other := errors.New("connection lost")
	assert.Same(t, other, a.Corrupt(context.Background(), other))
	assert.Empty(t, buf.String(), "only corrupted znodes are logged")
}

func TestCorruptedNodeState(t *testing.T) {
	f := newClusterFixture(t, 2, 1)
	f.start()
	f.assign(1, requests(1))
	path := f.c().NodePath(name(1))
	f.corrupt(path, `{"group":"sc-crawler-cluster","role":"king"}`)
	ctx := context.Background()
	a := f.acts(&recordingFetcher{})
	cctx, cancel := context.WithTimeout(ctx, waitLimit)
	defer cancel()

	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"cluster.Position", func() error { _, err := a.Position(ctx, f.member(1)); return err }},
		{"Elect", func() error { _, err := a.Elect(ctx, f.member(1)); return err }},
		{"WaitTask", func() error { _, err := a.WaitTask(cctx, f.member(1)); return err }},
		{"RunTask", func() error { _, err := a.RunTask(ctx, cluster.RunTaskInput{Member: f.member(1)}); return err }},
		{"WatchRunners", func() error {
			_, err := a.WatchRunners(cctx, cluster.WatchInput{Member: f.member(1), Free: 1})
			return err
		}},
		{"WaitStandby", func() error { _, err := a.WaitStandby(cctx, f.member(1)); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			require.NotPanics(t, func() { err = tc.call() })
			requireCorrupt(t, err, path, "NodeState.role")
		})
	}
	assert.Equal(t, roles.TaskNothing, f.task(1).RunningStatus, "RunTask did not start")

	t.Run("Discover overwrites a corrupted dead NodeState with its claim", func(t *testing.T) {
		d, err := a.Discover(ctx, peer(f.member(3), 1, roles.RoleRunner))
		require.NoError(t, err)
		assert.True(t, d.Claimed)
		assert.Equal(t, roles.NodeState{Group: group, Role: roles.RoleDeadRunner, TakenOverBy: name(3)}, f.node(1))
	})
	t.Run("Register repairs a corrupted NodeState", func(t *testing.T) {
		f2 := newClusterFixture(t, 2, 1)
		f2.start()
		f2.corrupt(f2.c().NodePath(name(3)), `{"group":1}`)
		res, err := f2.acts(nil).Register(ctx, f2.member(3))
		require.NoError(t, err)
		assert.Equal(t, roles.RoleInitial, res.Role)
		assert.Equal(t, roles.RoleInitial, f2.node(3).Role)
		role, err := f2.acts(nil).Elect(ctx, f2.member(3))
		require.NoError(t, err)
		assert.Equal(t, roles.RoleBackup, role, "the election gives it its role back")
		assert.Equal(t, names(3), f2.group().CurrentBackup, "no duplicate")
	})
}

func TestCorruptedGroupState(t *testing.T) {
	f := newClusterFixture(t, 2, 2) // 3 is the standby, 4 a secondary
	f.start()
	path := f.c().GroupPath()
	f.corrupt(path, `{"total_crawler":"three","current_crawler":[]}`)
	ctx := context.Background()
	cctx, cancel := context.WithTimeout(ctx, waitLimit)
	defer cancel()
	a := f.acts(nil)
	in := peer(f.member(3), 2, roles.RoleRunner)
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"Register", func() error { _, err := a.Register(ctx, f.member(1)); return err }},
		{"WaitMembers", func() error { _, err := a.WaitMembers(cctx, f.member(1)); return err }},
		{"Elect", func() error {
			_, err := f.c().Put(ctx, f.c().NodePath(name(1)), roles.NodeState{Group: group, Role: roles.RoleInitial}, -1)
			require.NoError(t, err)
			_, err = a.Elect(ctx, f.member(1))
			return err
		}},
		{"cluster.Position", func() error { _, err := a.Position(ctx, f.member(3)); return err }},
		{"WatchRunners", func() error {
			_, err := a.WatchRunners(cctx, cluster.WatchInput{Member: f.member(3), Free: 1})
			return err
		}},
		{"WaitStandby", func() error { _, err := a.WaitStandby(cctx, f.member(4)); return err }},
		{"Activate", func() error {
			_, err := a.Discover(ctx, in)
			require.NoError(t, err)
			_, err = a.Activate(ctx, in)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			require.NotPanics(t, func() { err = tc.call() })
			requireCorrupt(t, err, path, "GroupState.total_crawler")
		})
	}
	data, _, err := f.mem.Get(ctx, path)
	require.NoError(t, err)
	assert.Equal(t, `{"total_crawler":"three","current_crawler":[]}`, string(data), "left for an operator to fix")
}

func TestCorruptedTask(t *testing.T) {
	f := newClusterFixture(t, 2, 1)
	f.start()
	path := f.c().TaskPath(name(1))
	f.corrupt(path, `{"running_content":[],"running_status":"sleeping"}`)
	ctx := context.Background()

	var err error
	require.NotPanics(t, func() {
		_, err = f.acts(&recordingFetcher{}).RunTask(ctx, cluster.RunTaskInput{Member: f.member(1)})
	})
	requireCorrupt(t, err, path, "Task.running_status")

	// WaitTask reports it and waits; a valid Task wakes it.
	done := goRun(func() (cluster.WaitTaskResult, error) { return f.acts(nil).WaitTask(ctx, f.member(1)) })
	f.spy.waitCount(t, f.spy.watch, path, 1, "WaitTask waits on the corrupted Task")
	notReturned(t, done, "WaitTask on a corrupted Task")
	good := roles.EmptyTask()
	good.RunningContent = requests(1)
	_, err = f.c().Put(ctx, path, good, -1)
	require.NoError(t, err)
	w, err := await(t, done, "WaitTask")
	require.NoError(t, err)
	assert.True(t, w.Pending)
}

func TestCorruptedDeadTaskIsNotHandedOver(t *testing.T) {
	f := newClusterFixture(t, 2, 1)
	f.start()
	ctx := context.Background()
	f.corrupt(f.c().TaskPath(name(2)), `{"running_status":"processing","next_index":"x"}`)
	a3 := f.acts(nil)
	in := peer(f.member(3), 2, roles.RoleRunner)
	var d cluster.DiscoverResult
	var err error
	require.NotPanics(t, func() { d, err = a3.Discover(ctx, in) })
	require.NoError(t, err, "the fail-over goes on")
	assert.True(t, d.Claimed)
	_, err = a3.Activate(ctx, in)
	require.NoError(t, err)
	h, err := a3.HandOver(ctx, in, false)
	require.NoError(t, err)
	assert.Equal(t, cluster.HandOverResult{Owner: name(3)}, h)
	assert.False(t, f.task(3).Pending())
	assert.Equal(t, gs(3, 2, 0, "", names(1, 3), names(1, 3), nil, names(2), names(2), nil), f.group())
}

func TestCorruptedOwnTaskIsReplacedOnHandOver(t *testing.T) {
	f := newClusterFixture(t, 2, 1)
	f.start()
	ctx := context.Background()
	f.assign(2, requests(2))
	f.corrupt(f.c().TaskPath(name(3)), `[]`)
	a3 := f.acts(nil)
	in := peer(f.member(3), 2, roles.RoleRunner)
	_, err := a3.Discover(ctx, in)
	require.NoError(t, err)
	_, err = a3.Activate(ctx, in)
	require.NoError(t, err)
	h, err := a3.HandOver(ctx, in, false)
	require.NoError(t, err)
	assert.True(t, h.Pending)
	own := f.task(3)
	assert.Len(t, own.RunningContent, 2)
	assert.Equal(t, name(3), own.Holder)
}

func TestCorruptedTaskIsReplacedOnRegister(t *testing.T) {
	f := newClusterFixture(t, 2, 1)
	ctx := context.Background()
	_, err := f.c().Put(ctx, f.c().TaskPath(name(1)), map[string]any{"running_status": 5}, -1)
	require.NoError(t, err)
	_, err = f.acts(nil).Register(ctx, f.member(1))
	require.NoError(t, err)
	tk := f.task(1)
	assert.False(t, tk.Pending())
	assert.Equal(t, roles.TaskNothing, tk.RunningStatus)
}

func TestCorruptedHeartbeatIsReported(t *testing.T) {
	f := newClusterFixture(t, 2, 1)
	f.start()
	path := f.c().HeartbeatPath(name(2))
	f.corrupt(path, `{"heart_rhythm_time":"later","update_timeout":"2s","update_time":"1s","heart_rhythm_timeout":"3","healthy_state":"Healthy"}`)
	_, _, err := f.c().GetHeartbeat(context.Background(), name(2))
	requireCorrupt(t, err, path, "Heartbeat.heart_rhythm_time")
	// The watch does not panic and counts it as a missed heartbeat.
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	w, err := f.acts(nil).WatchRunners(ctx, cluster.WatchInput{Member: f.member(3), Free: 1})
	require.NoError(t, err)
	assert.Equal(t, name(2), w.Dead)
	// Discover leaves a corrupted heartbeat alone rather than failing.
	_, err = f.acts(nil).Discover(context.Background(), peer(f.member(3), 2, roles.RoleRunner))
	require.NoError(t, err)
}
