package workflows

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/batoncrawl/baton/activities/cluster"
	"github.com/batoncrawl/baton/roles"
)

// Wiped metadata: Position says Missing once, the life cycle registers
// again once, and the next Position (which omits the flag) is not taken
// for Missing again.
func TestLifecycleRegistersAgainWhenMetadataMissing(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	Register(env)
	newActivitySet(&cluster.Deps{}, nil).register(env)
	m := cluster.Member{Group: testGroup, Name: crawler(1), Runner: 1, Backup: 0, Timers: testTimers()}
	env.OnWorkflow(Heartbeat, mock.Anything, mock.Anything).Return(nil)
	registers, positions := 0, 0
	env.OnActivity(ma.Register, mock.Anything, mock.Anything).Return(
		func(context.Context, cluster.Member) (cluster.RegisterResult, error) {
			registers++
			return cluster.RegisterResult{Role: roles.RoleInitial}, nil
		})
	env.OnActivity(ma.Position, mock.Anything, mock.Anything).Return(
		func(context.Context, cluster.Member) (cluster.Position, error) {
			positions++
			switch positions {
			case 1:
				return cluster.Position{Missing: true}, nil
			case 2:
				return cluster.Position{Role: roles.RoleInitial}, nil
			}
			return cluster.Position{}, temporal.NewNonRetryableApplicationError("stop here", "test", nil)
		})
	env.OnActivity(ma.WaitMembers, mock.Anything, mock.Anything).Return(roles.GroupState{}, nil)
	env.OnActivity(ma.Elect, mock.Anything, mock.Anything).Return(roles.RoleRunner, nil)
	env.ExecuteWorkflow(Lifecycle, LifecycleInput{Member: m})
	require.Error(t, env.GetWorkflowError())
	assert.Equal(t, 3, positions)
	assert.Equal(t, 2, registers, "one registration at start, one after the metadata went missing")
}
