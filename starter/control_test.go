package main

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"

	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/workflows"
)

// A job's state as `baton jobs` and `baton status` show it, from its
// workflow's Temporal status and the state its memo records.
func TestStatusState(t *testing.T) {
	for _, tc := range []struct {
		status enumspb.WorkflowExecutionStatus
		memo   string
		want   string
	}{
		{enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED, "cancelled", "cancelled"},
		{enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED, "", "cancelled"},
		{enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, "completed", "completed"},
		{enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, "", "completed"},
		// A run cancelled by the signal before control-v1 completed.
		{enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, "cancelled", "cancelled"},
		{enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, "", "running"},
		{enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, "running", "running"},
		{enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, "paused", "paused"},
		{enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, "cancelling", "cancelling"},
		{enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, "completed", "running"},
		{enumspb.WORKFLOW_EXECUTION_STATUS_FAILED, "running", "failed"},
		{enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED, "paused", "terminated"},
	} {
		assert.Equal(t, tc.want, statusState(tc.status, tc.memo), "%v with memo state %q", tc.status, tc.memo)
	}
}

func TestControlApplied(t *testing.T) {
	p := func(state, control string) workflows.JobProgress {
		return workflows.JobProgress{JobState: workflows.JobState{State: state, Control: control}}
	}
	assert.True(t, controlApplied(p(workflows.JobPaused, jobs.ControlPaused), controlPause))
	assert.False(t, controlApplied(p(workflows.JobPaused, jobs.ControlRunning), controlPause), "the Runners not told yet")
	assert.True(t, controlApplied(p(workflows.JobPaused, ""), controlPause), "a run before control-v1: its state only")
	assert.False(t, controlApplied(p(workflows.JobRunning, jobs.ControlRunning), controlPause))
	assert.True(t, controlApplied(p(workflows.JobRunning, jobs.ControlRunning), controlResume))
	assert.False(t, controlApplied(p(workflows.JobRunning, jobs.ControlPaused), controlResume))
	assert.True(t, controlApplied(p(workflows.JobCanceling, jobs.ControlCancelled), controlCancel))
	assert.True(t, controlApplied(p(workflows.JobCanceled, jobs.ControlCancelled), controlCancel))
	assert.False(t, controlApplied(p(workflows.JobCanceling, jobs.ControlRunning), controlCancel))
}

// A cancelled job's workflow ends with a canceled error whose details are
// its progress.
func TestJobOutcome(t *testing.T) {
	var p workflows.JobProgress
	require.NoError(t, jobOutcome(nil, &p))

	want := workflows.JobProgress{ID: "j", JobState: workflows.JobState{State: workflows.JobCanceled, Batches: 3,
		Stats: jobs.Stats{Recorded: 7}}}
	p = workflows.JobProgress{}
	require.NoError(t, jobOutcome(temporal.NewCanceledError(want), &p))
	assert.Equal(t, want, p)

	p = workflows.JobProgress{}
	require.NoError(t, jobOutcome(temporal.NewCanceledError(), &p))
	assert.Equal(t, workflows.JobCanceled, p.State, "cancelled without counters")

	other := errors.New("workflow failed")
	assert.Equal(t, other, jobOutcome(other, &p))
}
