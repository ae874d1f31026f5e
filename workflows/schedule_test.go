package workflows

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/batoncrawl/baton/activities/jobs"
)

// A firing names its job from the time it was due (Temporal's
// TemporalScheduledStartTime, not the clock), asks for the schedule's last
// completed run before that time (its own schedule's and its backfills'),
// and starts the job as `baton crawl` would, with that run as its
// baseline and the trigger in its memo; it returns the job's outcome.
func TestScheduledCrawlNamesTheJobAndCarriesTheBaseline(t *testing.T) {
	for _, trigger := range []string{"", TriggerBackfill} {
		var s testsuite.WorkflowTestSuite
		env := s.NewTestWorkflowEnvironment()
		env.RegisterWorkflow(ScheduledCrawl)
		env.RegisterWorkflow(CrawlJob)
		env.RegisterActivity(schedActs.ScheduleBaseline)
		due := time.Date(2026, 11, 28, 3, 0, 0, 0, time.UTC)
		require.NoError(t, env.SetTypedSearchAttributesOnStart(temporal.NewSearchAttributes(scheduledStartTime.ValueSet(due))))
		env.SetStartTime(due.Add(42 * time.Minute)) // started late: the name keeps the time it was due
		var asked jobs.BaselineInput
		env.OnActivity(schedActs.ScheduleBaseline, mock.Anything, mock.Anything).Return(
			func(_ context.Context, in jobs.BaselineInput) (string, error) {
				asked = in
				return "nightly-20261127T030000Z", nil
			})
		var got jobs.Spec
		env.OnWorkflow(CrawlJob, mock.Anything, mock.Anything).Return(func(_ workflow.Context, in JobInput) (JobProgress, error) {
			got = in.Spec
			return JobProgress{ID: in.Spec.ID, JobState: JobState{State: JobCompleted}}, nil
		})
		tpl := jobSpec()
		tpl.ID = "nightly-00000000T000000Z"
		env.ExecuteWorkflow(ScheduledCrawl, ScheduleInput{Schedule: "nightly", Trigger: trigger, Template: tpl})
		require.True(t, env.IsWorkflowCompleted())
		require.NoError(t, env.GetWorkflowError())
		var p JobProgress
		require.NoError(t, env.GetWorkflowResult(&p))
		assert.Equal(t, "nightly-20261128T030000Z", p.ID)
		assert.Equal(t, JobCompleted, p.State)
		assert.Equal(t, "nightly-20261128T030000Z", got.ID)
		assert.Equal(t, "nightly-20261127T030000Z", got.Baseline)
		assert.Equal(t, tpl.Seeds, got.Seeds)
		assert.Equal(t, due, asked.Before)
		assert.Equal(t, []string{ScheduleID(testGroup, "nightly"), BackfillScheduleID(testGroup, "nightly")}, asked.ScheduleIDs)
	}
}

// A firing whose job fails or is cancelled fails too: it is no baseline.
func TestScheduledCrawlFailsWithItsJob(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(ScheduledCrawl)
	env.RegisterWorkflow(CrawlJob)
	env.RegisterActivity(schedActs.ScheduleBaseline)
	env.OnActivity(schedActs.ScheduleBaseline, mock.Anything, mock.Anything).Return("", nil)
	env.OnWorkflow(CrawlJob, mock.Anything, mock.Anything).Return(JobProgress{}, temporal.NewCanceledError())
	tpl := jobSpec()
	env.ExecuteWorkflow(ScheduledCrawl, ScheduleInput{Schedule: "nightly", Template: tpl})
	require.True(t, env.IsWorkflowCompleted())
	assert.Error(t, env.GetWorkflowError())
}
