package activities_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/cluster"
	"github.com/batoncrawl/baton/roles"
)

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
	assert.Equal(t, cluster.HandOverResult{Owner: name(2), Pending: true, Status: roles.TaskNothing}, h)
	dead := f.task(2)
	assert.Equal(t, name(3), dead.Holder)
	assert.Len(t, f.task(3).RunningContent, 2, "the own Task is untouched")
	again, err := a.HandOver(ctx, in, false)
	require.NoError(t, err)
	assert.Equal(t, name(2), again.Owner, "idempotent")
}
