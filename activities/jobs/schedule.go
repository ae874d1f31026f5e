package jobs

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"
)

// WorkflowLister is what ScheduleActivities need of a Temporal client:
// its visibility listing (client.Client implements it).
type WorkflowLister interface {
	ListWorkflow(ctx context.Context, req *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error)
}

// ScheduleActivities serve a schedule's firings: they read Temporal's
// visibility store, so they need a Temporal client, not the job store.
type ScheduleActivities struct {
	Temporal WorkflowLister
}

// BaselineInput asks for the last completed run of a schedule that was
// scheduled before Before.
type BaselineInput struct {
	// ScheduleIDs are the Temporal schedules whose firings are the
	// schedule's runs (its own and the one its backfills run on).
	ScheduleIDs []string  `json:"schedule_ids"`
	Before      time.Time `json:"before"`
}

// Search attributes a schedule's firing is found by.
const (
	attrScheduledBy   = "TemporalScheduledById"
	attrScheduledTime = "TemporalScheduledStartTime"
	attrJob           = "BatonJob"
)

// ScheduleBaseline returns the job of the schedule's latest completed
// firing scheduled before in.Before ("" when there is none). A firing
// completes when its crawl job completed (ScheduledCrawl waits for it).
func (a *ScheduleActivities) ScheduleBaseline(ctx context.Context, in BaselineInput) (string, error) {
	if len(in.ScheduleIDs) == 0 {
		return "", nil
	}
	quoted := make([]string, len(in.ScheduleIDs))
	for i, id := range in.ScheduleIDs {
		quoted[i] = "'" + strings.ReplaceAll(id, "'", `\'`) + "'"
	}
	query := fmt.Sprintf("%s IN (%s) AND ExecutionStatus = 'Completed'", attrScheduledBy, strings.Join(quoted, ", "))
	var (
		best   string
		bestAt time.Time
		token  []byte
	)
	dc := converter.GetDefaultDataConverter()
	for {
		resp, err := a.Temporal.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query, PageSize: 1000, NextPageToken: token})
		if err != nil {
			return "", fmt.Errorf("list the schedule's completed runs: %w", err)
		}
		for _, e := range resp.GetExecutions() {
			f := e.GetSearchAttributes().GetIndexedFields()
			var job string
			var at time.Time
			if f[attrJob] == nil || dc.FromPayload(f[attrJob], &job) != nil || job == "" {
				continue
			}
			if f[attrScheduledTime] == nil || dc.FromPayload(f[attrScheduledTime], &at) != nil {
				continue
			}
			if at.Before(in.Before) && (best == "" || at.After(bestAt)) {
				best, bestAt = job, at
			}
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return best, nil
		}
	}
}
