package workflows

import (
	"fmt"
	"maps"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/batoncrawl/baton/activities/cluster"
	"github.com/batoncrawl/baton/activities/jobs"
)

// Triggers of a schedule's run, recorded in its job's memo ("trigger").
const (
	TriggerScheduled = "scheduled"
	TriggerBackfill  = "backfill"
)

// ScheduleJobTimeFormat is the UTC time in the name of a schedule's job:
// NAME-20261128T030000Z.
const ScheduleJobTimeFormat = "20060102T150405Z"

// ScheduleID is the Temporal schedule of Baton schedule name in group;
// BackfillScheduleID is its twin that runs its backfills (always paused:
// it never fires on its own, and its runs say they are backfills).
func ScheduleID(group, name string) string { return fmt.Sprintf("baton-schedule/%s/%s", group, name) }

// BackfillScheduleID: see ScheduleID.
func BackfillScheduleID(group, name string) string { return ScheduleID(group, name) + "/backfill" }

// ScheduleJobID names the job of a schedule's firing at its scheduled time.
func ScheduleJobID(name string, at time.Time) string {
	return name + "-" + at.UTC().Format(ScheduleJobTimeFormat)
}

// ScheduleInput is a ScheduledCrawl's input: the schedule's action
// arguments, stored in the Temporal schedule (no secrets: the CLI refuses
// them).
type ScheduleInput struct {
	Schedule string `json:"schedule"`
	// Trigger is TriggerBackfill on the backfill schedule's runs, else
	// empty (a run of the schedule's times, or `schedule trigger`).
	Trigger string `json:"trigger,omitempty"`
	// Template is the job each firing submits; its ID is set per firing.
	Template jobs.Spec `json:"template"`
	// Memo is the memo `baton crawl` gives its job's workflow.
	Memo map[string]any `json:"memo,omitempty"`
}

// scheduledStartTime is the key of the time a schedule's run was due.
var scheduledStartTime = temporal.NewSearchAttributeKeyTime("TemporalScheduledStartTime")

// ScheduledCrawl is one firing of a schedule: it names the job from the
// time the firing was due (NAME-<UTC time>), finds the schedule's last
// completed run (the new job's baseline), starts the crawl job as `baton
// crawl` does (a CrawlJob on the group's job queue) and waits for it, so
// that the schedule's overlap policy sees a crawl that is still running
// (skip: a firing is skipped while the previous crawl runs). It completes
// when the job completed; a cancelled or failed job fails it, and it is not
// a baseline. Cancelling it cancels the job (cancel-other).
func ScheduledCrawl(ctx workflow.Context, in ScheduleInput) (JobProgress, error) {
	at, ok := scheduledAt(ctx)
	if !ok {
		at = workflow.Now(ctx)
	}
	spec := in.Template
	spec.ID = ScheduleJobID(in.Schedule, at)
	if err := workflow.UpsertTypedSearchAttributes(ctx, AttrJob.ValueSet(spec.ID)); err != nil {
		return JobProgress{ID: spec.ID}, err
	}
	trigger := in.Trigger
	if trigger == "" {
		trigger = TriggerScheduled
	}
	sctx := withShort(ctx, cluster.Member{Group: spec.Group, Timers: spec.Timers})
	err := workflow.ExecuteActivity(sctx, schedActs.ScheduleBaseline, jobs.BaselineInput{
		ScheduleIDs: []string{ScheduleID(spec.Group, in.Schedule), BackfillScheduleID(spec.Group, in.Schedule)},
		Before:      at,
	}).Get(ctx, &spec.Baseline)
	if err != nil {
		return JobProgress{ID: spec.ID}, err
	}
	memo := maps.Clone(in.Memo) // a copy: its result does not depend on the order of the map
	if memo == nil {
		memo = map[string]any{}
	}
	memo["schedule"], memo["trigger"], memo["scheduled_time"] = in.Schedule, trigger, at.UTC()
	if spec.Baseline != "" {
		memo["baseline"] = spec.Baseline
	}
	if err := workflow.UpsertMemo(ctx, map[string]any{"job": spec.ID, "trigger": trigger, "baseline": spec.Baseline}); err != nil {
		return JobProgress{ID: spec.ID}, err
	}
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:            JobWorkflowID(spec.Group, spec.ID),
		TaskQueue:             JobQueue(spec.Group),
		WorkflowTaskTimeout:   JobTaskTimeout,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_REQUEST_CANCEL,
		TypedSearchAttributes: temporal.NewSearchAttributes(AttrCluster.ValueSet(spec.Group),
			AttrJob.ValueSet(spec.ID), AttrRole.ValueSet("job")),
		Memo: memo,
	})
	var p JobProgress
	err = workflow.ExecuteChildWorkflow(cctx, CrawlJob, JobInput{Spec: spec}).Get(ctx, &p)
	return p, err
}

// scheduledAt is the time the schedule's firing was due, as Temporal's
// scheduler recorded it on the run (false when not started by a schedule).
func scheduledAt(ctx workflow.Context) (time.Time, bool) {
	return workflow.GetTypedSearchAttributes(ctx).GetTime(scheduledStartTime)
}

// schedActs are the schedule activities (method expressions only).
var schedActs *jobs.ScheduleActivities
