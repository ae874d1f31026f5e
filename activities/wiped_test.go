package activities_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/cluster"
	"github.com/batoncrawl/baton/activities/metadata"
	"github.com/batoncrawl/baton/roles"
)

// When ZooKeeper's data is wiped while Temporal keeps the workflows, the
// waits end and cluster.Position says Missing, so the life cycle registers again.
func TestWipedMetadataMakesInstancesRegisterAgain(t *testing.T) {
	f := newClusterFixture(t, 2, 1)
	f.start()
	ctx := context.Background()
	a := f.acts(nil)
	c := f.c()
	for i := 1; i <= 3; i++ {
		for _, p := range []string{c.NodePath(name(i)), c.TaskPath(name(i)), c.HeartbeatPath(name(i))} {
			require.NoError(t, f.mem.Delete(ctx, p, metadata.AnyVersion))
		}
	}
	pos, err := a.Position(ctx, f.member(1))
	require.NoError(t, err)
	assert.True(t, pos.Missing)
	w, err := a.WaitTask(ctx, f.member(1))
	require.NoError(t, err)
	assert.True(t, w.Fenced, "a runner without NodeState stops waiting")
	ws, err := a.WatchRunners(ctx, cluster.WatchInput{Member: f.member(3), Free: 1})
	require.NoError(t, err)
	assert.True(t, ws.Changed && ws.Position.Missing)
	_, err = a.RunTask(ctx, cluster.RunTaskInput{Member: f.member(1)})
	assert.True(t, cluster.IsFenced(err), "%v", err)

	reg, err := a.Register(ctx, f.member(1))
	require.NoError(t, err)
	assert.Equal(t, roles.RoleInitial, reg.Role, "registered afresh")
	pos, err = a.Position(ctx, f.member(1))
	require.NoError(t, err)
	assert.False(t, pos.Missing)
}
