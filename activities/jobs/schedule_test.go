package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"

	"github.com/batoncrawl/baton/activities/jobs"
)

// fakeVisibility answers ListWorkflow with pages of executions and keeps
// the queries asked.
type fakeVisibility struct {
	pages   [][]*workflowpb.WorkflowExecutionInfo
	queries []string
}

func (f *fakeVisibility) ListWorkflow(_ context.Context, req *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error) {
	f.queries = append(f.queries, req.GetQuery())
	i := 0
	if len(req.GetNextPageToken()) > 0 {
		i = int(req.GetNextPageToken()[0])
	}
	resp := &workflowservice.ListWorkflowExecutionsResponse{Executions: f.pages[i]}
	if i+1 < len(f.pages) {
		resp.NextPageToken = []byte{byte(i + 1)}
	}
	return resp, nil
}

func firing(t *testing.T, job string, at time.Time) *workflowpb.WorkflowExecutionInfo {
	t.Helper()
	fields := map[string]*commonpb.Payload{}
	dc := converter.GetDefaultDataConverter()
	var err error
	if job != "" {
		fields["BatonJob"], err = dc.ToPayload(job)
		require.NoError(t, err)
	}
	fields["TemporalScheduledStartTime"], err = dc.ToPayload(at)
	require.NoError(t, err)
	return &workflowpb.WorkflowExecutionInfo{SearchAttributes: &commonpb.SearchAttributes{IndexedFields: fields}}
}

// The baseline is the latest completed firing due before the new one,
// over every page of the listing, whatever order visibility returns; a
// firing without a job (it failed before naming one) is no baseline.
func TestScheduleBaselineIsTheLatestCompletedRunBefore(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 3, 0, 0, 0, time.UTC)
	fv := &fakeVisibility{pages: [][]*workflowpb.WorkflowExecutionInfo{
		{firing(t, "s-1", t0), firing(t, "s-4", t0.Add(4*time.Hour))},
		{firing(t, "s-3", t0.Add(3*time.Hour)), firing(t, "", t0.Add(210*time.Minute)), firing(t, "s-2", t0.Add(2*time.Hour))},
	}}
	a := &jobs.ScheduleActivities{Temporal: fv}
	ids := []string{"baton-schedule/g/s", "baton-schedule/g/s/backfill"}
	got, err := a.ScheduleBaseline(context.Background(), jobs.BaselineInput{ScheduleIDs: ids, Before: t0.Add(4 * time.Hour)})
	require.NoError(t, err)
	assert.Equal(t, "s-3", got)
	assert.Equal(t, []string{"TemporalScheduledById IN ('baton-schedule/g/s', 'baton-schedule/g/s/backfill') AND ExecutionStatus = 'Completed'"}, fv.queries[:1])

	got, err = a.ScheduleBaseline(context.Background(), jobs.BaselineInput{ScheduleIDs: ids, Before: t0})
	require.NoError(t, err)
	assert.Empty(t, got, "no run before the first")
}
