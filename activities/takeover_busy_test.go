package activities

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/roles"
)

// Between Activate and HandOver the new runner is not idle: a crawl job
// must not give it a batch then, or the dead runner's Task could not be
// handed over.
func TestRunnerTakingOverIsNotIdle(t *testing.T) {
	f := newClusterFixture(t, 2, 1)
	f.start()
	ctx := context.Background()
	a := f.acts(nil)
	a.Now = nil // real clock: heartbeats are fresh
	for i := 1; i <= 3; i++ {
		f.beat(i, a.now(), roles.HeartHealthy)
	}
	f.assign(2, requests(3))
	in := peer(f.member(3), 2, roles.RoleRunner)
	_, err := a.Discover(ctx, in)
	require.NoError(t, err)
	_, err = a.Activate(ctx, in)
	require.NoError(t, err)
	idle := a.idleRunners(ctx, f.c(), f.group(), nil, nil, 0)
	assert.Equal(t, []string{name(1)}, idle, "3 is a runner now, but busy taking over 2's Task")
	_, err = a.HandOver(ctx, in, false)
	require.NoError(t, err)
	idle = a.idleRunners(ctx, f.c(), f.group(), nil, nil, 0)
	assert.Equal(t, []string{name(1)}, idle, "3 runs the handed-over Task")
}

// If work reached the new runner's own Task before the hand-over, the dead
// runner's Task is taken over in place rather than lost or blocked.
func TestHandOverInPlaceWhenOwnTaskBusy(t *testing.T) {
	f := newClusterFixture(t, 2, 1)
	f.start()
	ctx := context.Background()
	a := f.acts(nil)
	f.assign(2, requests(3))
	in := peer(f.member(3), 2, roles.RoleRunner)
	_, err := a.Discover(ctx, in)
	require.NoError(t, err)
	_, err = a.Activate(ctx, in)
	require.NoError(t, err)
	f.assign(3, requests(2)) // a user or a job got there first
	h, err := a.HandOver(ctx, in, false)
	require.NoError(t, err)
	assert.Equal(t, HandOverResult{Owner: name(2), Pending: true, Status: roles.TaskNothing}, h)
	dead := f.task(2)
	assert.Equal(t, name(3), dead.Holder)
	assert.Len(t, f.task(3).RunningContent, 2, "the own Task is untouched")
	again, err := a.HandOver(ctx, in, false)
	require.NoError(t, err)
	assert.Equal(t, name(2), again.Owner, "idempotent")
}
