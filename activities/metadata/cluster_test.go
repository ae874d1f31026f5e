package metadata

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/roles"
)

func TestClusterLayout(t *testing.T) {
	c := NewCluster(NewMemory(), "", roles.DefaultGroup)
	assert.Equal(t, "/smoothcrawler", c.Root)
	assert.Equal(t, "/smoothcrawler/group/sc-crawler-cluster/state", c.GroupPath())
	assert.Equal(t, "/smoothcrawler/group/sc-crawler-cluster/lock", c.LockPath())
	assert.Equal(t, "/smoothcrawler/node/sc-crawler_1/state", c.NodePath("sc-crawler_1"))
	assert.Equal(t, "/smoothcrawler/node/sc-crawler_1/task", c.TaskPath("sc-crawler_1"))
	assert.Equal(t, "/smoothcrawler/node/sc-crawler_1/heartbeat", c.HeartbeatPath("sc-crawler_1"))
	assert.Equal(t, "/smoothcrawler/node/sc-crawler_1/alive", c.AlivePath("sc-crawler_1"))
	c = NewCluster(NewMemory(), "/baton/test", "g")
	assert.Equal(t, "/baton/test/group/g/state", c.GroupPath())
	assert.Equal(t, "/baton/test/node/g_2/task", c.TaskPath("g_2"))
}

// requireCorrupt asserts err is a *CorruptError for path whose field error
// names obj.field, and that the message shows both.
func requireCorrupt(t *testing.T, err error, path, obj, field string) {
	t.Helper()
	require.Error(t, err)
	var ce *CorruptError
	require.True(t, errors.As(err, &ce), "%v (%T) is not a *CorruptError", err, err)
	assert.Equal(t, path, ce.Path)
	var fe *roles.FieldError
	require.True(t, errors.As(err, &fe), "%v does not wrap a *roles.FieldError", err)
	assert.Equal(t, obj, fe.Object)
	assert.Equal(t, field, fe.Field)
	assert.ErrorIs(t, err, roles.ErrInvalid)
	assert.NotErrorIs(t, err, ErrNotFound)
	assert.Contains(t, err.Error(), path)
	assert.Contains(t, err.Error(), obj+"."+field)
}

// testCluster checks typed access on any Store.
func testCluster(t *testing.T, s Store) {
	ctx := context.Background()
	newCluster := func(t *testing.T) *Cluster { return NewCluster(s, freshPath(t), "g") }

	t.Run("CorruptedZnodes", func(t *testing.T) {
		c := newCluster(t)
		const name = "g_1"
		type getter func() error
		getGroup := func() error { _, _, err := c.GetGroup(ctx); return err }
		getNode := func() error { _, _, err := c.GetNode(ctx, name); return err }
		getTask := func() error { _, _, err := c.GetTask(ctx, name); return err }
		getHeartbeat := func() error { _, _, err := c.GetHeartbeat(ctx, name); return err }
		tests := []struct {
			name, path, doc, obj, field string
			get                         getter
		}{
			{"group malformed", c.GroupPath(), `{"total_crawler":`, "GroupState", "(document)", getGroup},
			{"group empty", c.GroupPath(), ``, "GroupState", "(document)", getGroup},
			{"group wrong type", c.GroupPath(), `{"total_runner":"2"}`, "GroupState", "total_runner", getGroup},
			{"group duplicate", c.GroupPath(), `{"current_runner":["g_1","g_1"]}`, "GroupState", "current_runner", getGroup},
			{"group bad standby", c.GroupPath(), `{"standby_id":"g_3"}`, "GroupState", "standby_id", getGroup},
			{"node malformed", c.NodePath(name), `{`, "NodeState", "(document)", getNode},
			{"node unknown role", c.NodePath(name), `{"group":"g","role":"captain"}`, "NodeState", "role", getNode},
			{"node role number", c.NodePath(name), `{"group":"g","role":2}`, "NodeState", "role", getNode},
			{"node no group", c.NodePath(name), `{"role":"runner"}`, "NodeState", "group", getNode},
			{"task malformed", c.TaskPath(name), `[{]`, "Task", "(document)", getTask},
			{"task unknown status", c.TaskPath(name), `{"running_status":"busy"}`, "Task", "running_status", getTask},
			{"task request url type", c.TaskPath(name), `{"running_content":[{"task_id":1,"url":1}],"running_status":"nothing"}`, "Task", "running_content.url", getTask},
			{"task counters", c.TaskPath(name), `{"running_result":{"success_count":"x"},"running_status":"done"}`, "Task", "running_result.success_count", getTask},
			{"heartbeat malformed", c.HeartbeatPath(name), `{"healthy_state":"Healthy"`, "Heartbeat", "(document)", getHeartbeat},
			{"heartbeat time", c.HeartbeatPath(name), `{"heart_rhythm_time":"noon","update_timeout":"2s","update_time":"1s","heart_rhythm_timeout":"3","healthy_state":"Healthy"}`, "Heartbeat", "heart_rhythm_time", getHeartbeat},
			{"heartbeat state", c.HeartbeatPath(name), string(Encode(withState(roles.NewHeartbeat(time.Now(), roles.DefaultTimers()), "Zombie"))), "Heartbeat", "healthy_state", getHeartbeat},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				_, err := c.Put(ctx, tt.path, struct{}{}, AnyVersion) // make sure it exists
				require.NoError(t, err)
				_, err = s.Set(ctx, tt.path, []byte(tt.doc), AnyVersion)
				require.NoError(t, err)
				requireCorrupt(t, tt.get(), tt.path, tt.obj, tt.field)
			})
		}
	})

	t.Run("MissingIsNotCorrupt", func(t *testing.T) {
		c := newCluster(t)
		_, _, err := c.GetGroup(ctx)
		require.ErrorIs(t, err, ErrNotFound)
		var ce *CorruptError
		assert.False(t, errors.As(err, &ce))
		_, _, err = c.GetNode(ctx, "g_1")
		require.ErrorIs(t, err, ErrNotFound)
		_, _, err = c.GetTask(ctx, "g_1")
		require.ErrorIs(t, err, ErrNotFound)
		_, _, err = c.GetHeartbeat(ctx, "g_1")
		require.ErrorIs(t, err, ErrNotFound)
	})

	t.Run("PutAndGetRoundTrip", func(t *testing.T) {
		c := newCluster(t)
		v, err := c.Put(ctx, c.NodePath("g_1"), roles.NodeState{Group: "g", Role: roles.RoleRunner}, AnyVersion)
		require.NoError(t, err)
		assert.Equal(t, int32(0), v, "created")
		n, v, err := c.GetNode(ctx, "g_1")
		require.NoError(t, err)
		assert.Equal(t, roles.NodeState{Group: "g", Role: roles.RoleRunner}, n)
		assert.Equal(t, int32(0), v)
		_, err = c.Put(ctx, c.NodePath("g_1"), roles.NodeState{Group: "g", Role: roles.RoleBackup}, 5)
		require.ErrorIs(t, err, ErrBadVersion, "Put at a version is a compare-and-set")
		v, err = c.Put(ctx, c.NodePath("g_1"), roles.NodeState{Group: "g", Role: roles.RoleBackup}, 0)
		require.NoError(t, err)
		assert.Equal(t, int32(1), v)
		_, err = c.Put(ctx, c.NodePath("g_9"), roles.NodeState{Group: "g", Role: roles.RoleBackup}, 3)
		require.ErrorIs(t, err, ErrNotFound, "Put at a version does not create")

		tk := roles.EmptyTask()
		tk.RunningContent = []roles.Request{{TaskID: 1, URL: "http://x/", Method: "GET"}}
		tk.Epoch = 3
		_, err = c.Put(ctx, c.TaskPath("g_1"), tk, AnyVersion)
		require.NoError(t, err)
		got, _, err := c.GetTask(ctx, "g_1")
		require.NoError(t, err)
		assert.Equal(t, tk, got)

		hb := roles.NewHeartbeat(time.Date(2024, 1, 2, 3, 4, 5, 6000, time.UTC), roles.DefaultTimers())
		_, err = c.Put(ctx, c.HeartbeatPath("g_1"), hb, AnyVersion)
		require.NoError(t, err)
		gotHB, _, err := c.GetHeartbeat(ctx, "g_1")
		require.NoError(t, err)
		assert.Equal(t, hb, gotHB)
	})

	t.Run("TypedWrites", func(t *testing.T) {
		c := newCluster(t)
		node := roles.NodeState{Group: "g", Role: roles.RoleBackup}
		tk := roles.EmptyTask()
		tk.Epoch = 2
		hb := roles.NewHeartbeat(time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC), roles.DefaultTimers())
		writes := []struct {
			name string
			set  func(version int32) (int32, error)
			path string
			want any
		}{
			{"node", func(v int32) (int32, error) { return c.SetNode(ctx, "g_1", node, v) }, c.NodePath("g_1"), node},
			{"task", func(v int32) (int32, error) { return c.SetTask(ctx, "g_1", tk, v) }, c.TaskPath("g_1"), tk},
			{"heartbeat", func(v int32) (int32, error) { return c.SetHeartbeat(ctx, "g_1", hb, v) }, c.HeartbeatPath("g_1"), hb},
		}
		for _, w := range writes {
			t.Run(w.name, func(t *testing.T) {
				_, err := w.set(0)
				require.ErrorIs(t, err, ErrNotFound, "a write at a version does not create")
				_, err = w.set(AnyVersion)
				require.NoError(t, err, "AnyVersion creates")
				data, _, err := s.Get(ctx, w.path)
				require.NoError(t, err)
				assert.JSONEq(t, string(Encode(w.want)), string(data))
				_, err = w.set(7)
				require.ErrorIs(t, err, ErrBadVersion)
				v, err := w.set(0)
				require.NoError(t, err)
				assert.Equal(t, int32(1), v)
			})
		}
	})

	t.Run("FenceTask", func(t *testing.T) {
		c := newCluster(t)
		old := roles.EmptyTask()
		old.RunningContent = []roles.Request{{TaskID: 1, URL: "http://x/", Method: "GET"}}
		old.Holder, old.Epoch = "g_1", 4
		_, err := c.SetTask(ctx, "g_1", old, AnyVersion)
		require.NoError(t, err)
		_, v, err := c.GetTask(ctx, "g_1")
		require.NoError(t, err)

		next, op := c.FenceTask("g_1", v, old, "g_2", 5)
		assert.Equal(t, "g_1", old.Holder, "the caller's Task is not changed")
		assert.Equal(t, int64(4), old.Epoch)
		assert.Equal(t, "g_2", next.Holder)
		assert.Equal(t, int64(5), next.Epoch)
		assert.Equal(t, SetOp(c.TaskPath("g_1"), Encode(next), v), op)

		// Two instances fence from the same read: exactly one wins.
		_, other := c.FenceTask("g_1", v, old, "g_3", 5)
		require.NoError(t, s.Multi(ctx, op))
		require.ErrorIs(t, s.Multi(ctx, other), ErrBadVersion)
		got, _, err := c.GetTask(ctx, "g_1")
		require.NoError(t, err)
		assert.Equal(t, next, got)

		// Two znodes fenced in one transaction: all or nothing.
		_, v2, err := c.GetTask(ctx, "g_1")
		require.NoError(t, err)
		_, a := c.FenceTask("g_1", v2, got, "g_3", 6)
		_, b := c.FenceTask("g_9", 0, got, "g_3", 6)
		require.ErrorIs(t, s.Multi(ctx, a, b), ErrNotFound)
		got, _, err = c.GetTask(ctx, "g_1")
		require.NoError(t, err)
		assert.Equal(t, next, got, "nothing written")
	})

	t.Run("UpdateGroup", func(t *testing.T) {
		c := newCluster(t)
		g, err := c.UpdateGroup(ctx, func(g *roles.GroupState) error {
			assert.Equal(t, roles.NewGroupState(0, 0), *g, "a missing GroupState starts empty")
			g.TotalCrawler, g.TotalRunner, g.TotalBackup = 3, 2, 1
			g.CurrentCrawler = roles.Add(g.CurrentCrawler, "g_1")
			return nil
		})
		require.NoError(t, err)
		assert.Equal(t, []string{"g_1"}, g.CurrentCrawler)
		stored, v, err := c.GetGroup(ctx)
		require.NoError(t, err)
		assert.Equal(t, g, stored)
		assert.Equal(t, int32(0), v)

		// ErrNoChange skips the write.
		_, err = c.UpdateGroup(ctx, func(g *roles.GroupState) error { return ErrNoChange })
		require.NoError(t, err)
		_, v, err = c.GetGroup(ctx)
		require.NoError(t, err)
		assert.Equal(t, int32(0), v, "nothing written")

		// An error from fn is returned and nothing is written.
		boom := errors.New("boom")
		_, err = c.UpdateGroup(ctx, func(g *roles.GroupState) error { g.TotalCrawler = 99; return boom })
		require.ErrorIs(t, err, boom)

		// An invalid result is refused with the field named.
		_, err = c.UpdateGroup(ctx, func(g *roles.GroupState) error {
			g.CurrentRunner = append(g.CurrentRunner, "g_1", "g_1")
			return nil
		})
		var fe *roles.FieldError
		require.True(t, errors.As(err, &fe), "%v", err)
		assert.Equal(t, "current_runner", fe.Field)
		assert.Contains(t, err.Error(), c.GroupPath())
		stored, v, err = c.GetGroup(ctx)
		require.NoError(t, err)
		assert.Equal(t, 3, stored.TotalCrawler)
		assert.Empty(t, stored.CurrentRunner)
		assert.Equal(t, int32(0), v)

		// A concurrent writer that does not take the lock is not overwritten:
		// UpdateGroup re-reads and applies fn again.
		calls := 0
		g, err = c.UpdateGroup(ctx, func(g *roles.GroupState) error {
			calls++
			if calls == 1 {
				other := g.Clone()
				other.FailCrawler = []string{"g_7"}
				_, err := s.Set(ctx, c.GroupPath(), Encode(other), AnyVersion)
				require.NoError(t, err)
			}
			g.CurrentCrawler = roles.Add(g.CurrentCrawler, "g_2")
			return nil
		})
		require.NoError(t, err)
		assert.Equal(t, 2, calls, "retried after losing the compare-and-set")
		assert.Equal(t, []string{"g_7"}, g.FailCrawler, "the other write survived")
		assert.Equal(t, []string{"g_1", "g_2"}, g.CurrentCrawler)
		assert.Empty(t, lockKids(t, s, c.LockPath()), "the lock was released")
	})

	t.Run("UpdateGroupOnCorruptGroup", func(t *testing.T) {
		c := newCluster(t)
		_, err := s.Create(ctx, c.GroupPath(), []byte(`{"total_crawler":"many"}`), Persistent)
		require.NoError(t, err)
		called := false
		_, err = c.UpdateGroup(ctx, func(g *roles.GroupState) error { called = true; return nil })
		requireCorrupt(t, err, c.GroupPath(), "GroupState", "total_crawler")
		assert.False(t, called, "fn does not run on a corrupted GroupState")
		data, _, err := s.Get(ctx, c.GroupPath())
		require.NoError(t, err)
		assert.Equal(t, `{"total_crawler":"many"}`, string(data), "the corrupted znode is left for an operator")
	})
}

func withState(h roles.Heartbeat, s roles.HeartState) roles.Heartbeat {
	h.HealthyState = s
	return h
}

func TestMemoryCluster(t *testing.T) { testCluster(t, NewMemory()) }

func TestEncodeIsJSON(t *testing.T) {
	assert.JSONEq(t, `{"group":"g","role":"runner"}`, string(Encode(roles.NodeState{Group: "g", Role: roles.RoleRunner})))
	assert.Panics(t, func() { Encode(make(chan int)) })
}

// TestMembershipDirectoryFollowsGroupState: every GroupState change keeps
// <group>/members in step, in the same write, and touches only the
// entries it concerns.
func TestMembershipDirectoryFollowsGroupState(t *testing.T) {
	ctx := context.Background()
	s := NewMemory()
	c := NewCluster(s, "", roles.DefaultGroup)
	member := func(i int) (roles.MemberState, int32) {
		t.Helper()
		m, v, err := c.GetMember(ctx, nm(i))
		require.NoError(t, err)
		return m, v
	}
	kids := func() []string {
		t.Helper()
		k, err := s.Children(ctx, c.MembersPath())
		require.NoError(t, err)
		roles.SortNames(k)
		return k
	}
	// A formed group of runners 1, 2 and backups 3, 4 (standby 3).
	_, err := c.UpdateGroup(ctx, func(g *roles.GroupState) error {
		*g = roles.NewGroupState(2, 2)
		g.CurrentCrawler = []string{nm(1), nm(2), nm(3), nm(4)}
		g.CurrentRunner, g.CurrentBackup, g.StandbyID = []string{nm(1), nm(2)}, []string{nm(3), nm(4)}, "3"
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, []string{nm(1), nm(2), nm(3), nm(4)}, kids())
	m3, v3 := member(3)
	assert.Equal(t, roles.MemberState{Role: roles.RoleBackup, Standby: true}, m3)
	m4, v4 := member(4)
	assert.Equal(t, roles.MemberState{Role: roles.RoleBackup}, m4)
	_, v1 := member(1)

	// Runner 2 dies and backup 3 takes its place: 2's entry goes, 3 is a
	// runner, 4 the standby; runner 1's entry is not written.
	_, err = c.UpdateGroup(ctx, func(g *roles.GroupState) error {
		g.CurrentRunner = []string{nm(1), nm(3)}
		g.CurrentBackup = []string{nm(4)}
		g.CurrentCrawler = []string{nm(1), nm(3), nm(4)}
		g.FailCrawler, g.FailRunner, g.StandbyID = []string{nm(2)}, []string{nm(2)}, "4"
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, []string{nm(1), nm(3), nm(4)}, kids())
	m3, nv3 := member(3)
	assert.Equal(t, roles.MemberState{Role: roles.RoleRunner}, m3)
	assert.Greater(t, nv3, v3)
	m4, nv4 := member(4)
	assert.Equal(t, roles.MemberState{Role: roles.RoleBackup, Standby: true}, m4)
	assert.Greater(t, nv4, v4)
	_, nv1 := member(1)
	assert.Equal(t, v1, nv1, "an entry the change does not concern is not written")

	// A scale-down to one runner marks the surplus runner (the largest index).
	_, err = c.UpdateGroup(ctx, func(g *roles.GroupState) error { g.TotalRunner = 1; return nil })
	require.NoError(t, err)
	m3, _ = member(3)
	assert.Equal(t, roles.MemberState{Role: roles.RoleRunner, Surplus: true}, m3)
	m1, _ := member(1)
	assert.Equal(t, roles.MemberState{Role: roles.RoleRunner}, m1)
}

// TestMembershipDirectoryForAnOlderGroup: a group formed before the
// membership directory existed gets every entry at its next change.
func TestMembershipDirectoryForAnOlderGroup(t *testing.T) {
	ctx := context.Background()
	s := NewMemory()
	c := NewCluster(s, "", roles.DefaultGroup)
	g := roles.NewGroupState(1, 1)
	g.CurrentCrawler, g.CurrentRunner, g.CurrentBackup, g.StandbyID = []string{nm(1), nm(2)}, []string{nm(1)}, []string{nm(2)}, "2"
	_, err := s.Create(ctx, c.GroupPath(), Encode(g), Persistent)
	require.NoError(t, err)
	_, err = c.UpdateGroup(ctx, func(g *roles.GroupState) error { g.MinBackup = 1; return nil })
	require.NoError(t, err)
	m, _, err := c.GetMember(ctx, nm(2))
	require.NoError(t, err)
	assert.Equal(t, roles.MemberState{Role: roles.RoleBackup, Standby: true}, m)
	_, _, err = c.GetMember(ctx, nm(1))
	require.NoError(t, err)
}

// TestFailHistoryIsBounded: the fail lists keep the most recent
// roles.MaxFailHistory names.
func TestFailHistoryIsBounded(t *testing.T) {
	ctx := context.Background()
	c := NewCluster(NewMemory(), "", roles.DefaultGroup)
	for i := 1; i <= roles.MaxFailHistory+10; i++ {
		_, err := c.UpdateGroup(ctx, func(g *roles.GroupState) error {
			g.FailCrawler = append(g.FailCrawler, nm(i))
			g.FailRunner = append(g.FailRunner, nm(i))
			return nil
		})
		require.NoError(t, err)
	}
	g, _, err := c.GetGroup(ctx)
	require.NoError(t, err)
	require.Len(t, g.FailCrawler, roles.MaxFailHistory)
	assert.Equal(t, nm(11), g.FailCrawler[0], "the oldest go")
	assert.Equal(t, nm(roles.MaxFailHistory+10), g.FailCrawler[roles.MaxFailHistory-1])
	assert.Len(t, g.FailRunner, roles.MaxFailHistory)
}

func nm(i int) string { return fmt.Sprintf("sc-crawler_%d", i) }
