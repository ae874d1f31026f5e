package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/workflows"
)

func scheduleListCmd(g *globals, tf *temporalFlags) *cobra.Command {
	var out *output
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the group's schedules",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := tf.dial(cmd.Context())
			if err != nil {
				return err
			}
			defer c.Close()
			rows, err := listSchedules(cmd.Context(), c, g.group)
			if err != nil {
				return err
			}
			if out.JSON() {
				return writeJSON(cmd.OutOrStdout(), rows)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tSPEC\tOVERLAP\tPAUSED\tNEXT RUN")
			for _, r := range rows {
				next := "-"
				if len(r.NextRuns) > 0 {
					next = r.NextRuns[0].UTC().Format(time.RFC3339)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Name, r.Spec, r.Overlap, yesNo(r.Paused), next)
			}
			return tw.Flush()
		},
	}
	out = addOutputFlag(cmd)
	return cmd
}

// listSchedules lists the group's schedules (their backfill twins apart).
func listSchedules(ctx context.Context, c client.Client, group string) ([]scheduleRow, error) {
	it, err := c.ScheduleClient().List(ctx, client.ScheduleListOptions{PageSize: 1000})
	if err != nil {
		return nil, fmt.Errorf("list schedules: %w", err)
	}
	prefix := workflows.ScheduleID(group, "")
	rows := []scheduleRow{}
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return nil, fmt.Errorf("list schedules: %w", err)
		}
		name, ok := strings.CutPrefix(e.ID, prefix)
		if !ok || strings.Contains(name, "/") {
			continue
		}
		r := scheduleRow{Name: name, ID: e.ID, Paused: e.Paused, Note: e.Note, NextRuns: e.NextActionTimes}
		r.Spec, r.Overlap, r.CatchupWindow = memoString(e.Memo, "spec"), memoString(e.Memo, "overlap"), memoString(e.Memo, "catchup_window")
		rows = append(rows, r)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Name < rows[j].Name })
	return rows, nil
}

// scheduleShow is what `schedule show` reports.
type scheduleShow struct {
	scheduleRow
	Fired          int             `json:"fired"`
	SkippedOverlap int             `json:"skipped_overlap"`
	MissedCatchup  int             `json:"missed_catchup_window"`
	Backfilled     int             `json:"backfilled"`
	Running        []string        `json:"running"`
	RecentActions  []recentAction  `json:"recent_actions"`
	Runs           []scheduleRun   `json:"runs"`
	Template       json.RawMessage `json:"template,omitempty"`
}

type recentAction struct {
	ScheduledTime time.Time `json:"scheduled_time"`
	ActualTime    time.Time `json:"actual_time"`
	WorkflowID    string    `json:"workflow_id"`
}

func scheduleShowCmd(g *globals, tf *temporalFlags) *cobra.Command {
	var out *output
	cmd := &cobra.Command{
		Use:   "show NAME",
		Short: "Show a schedule: its next runs, recent firings, skipped and missed counts, and its runs' jobs",
		Args:  oneArg("NAME", "the schedule's name (baton schedule list lists them)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := tf.dial(cmd.Context())
			if err != nil {
				return err
			}
			defer c.Close()
			s, err := describeSchedule(cmd.Context(), c, g.group, args[0])
			if err != nil {
				return err
			}
			if out.JSON() {
				return writeJSON(cmd.OutOrStdout(), s)
			}
			return printSchedule(cmd.OutOrStdout(), s)
		},
	}
	out = addOutputFlag(cmd)
	return cmd
}

// describeSchedule gathers a schedule's description, its backfill twin's
// count and its runs.
func describeSchedule(ctx context.Context, c client.Client, group, name string) (scheduleShow, error) {
	_, d, err := scheduleHandle(ctx, c, group, name)
	if err != nil {
		return scheduleShow{}, err
	}
	s := scheduleShow{scheduleRow: scheduleRow{Name: name, ID: workflows.ScheduleID(group, name), Paused: d.Schedule.State.Paused,
		Note: d.Schedule.State.Note, NextRuns: d.Info.NextActionTimes,
		Spec: memoString(d.Memo, "spec"), Overlap: overlapName(d.Schedule.Policy.Overlap), CatchupWindow: d.Schedule.Policy.CatchupWindow.String()},
		Fired: d.Info.NumActions, SkippedOverlap: d.Info.NumActionsSkippedOverlap, MissedCatchup: d.Info.NumActionsMissedCatchupWindow,
		Running: []string{}, RecentActions: []recentAction{}}
	for _, r := range d.Info.RunningWorkflows {
		s.Running = append(s.Running, r.WorkflowID)
	}
	for _, a := range d.Info.RecentActions {
		ra := recentAction{ScheduledTime: a.ScheduleTime, ActualTime: a.ActualTime}
		if a.StartWorkflowResult != nil {
			ra.WorkflowID = a.StartWorkflowResult.WorkflowID
		}
		s.RecentActions = append(s.RecentActions, ra)
	}
	if a, ok := d.Schedule.Action.(*client.ScheduleWorkflowAction); ok && len(a.Args) == 1 {
		if p, ok := a.Args[0].(*commonpb.Payload); ok {
			var in workflows.ScheduleInput
			if converter.GetDefaultDataConverter().FromPayload(p, &in) == nil {
				s.Template, _ = json.Marshal(in.Template)
			}
		}
	}
	if td, err := c.ScheduleClient().GetHandle(ctx, workflows.BackfillScheduleID(group, name)).Describe(ctx); err == nil {
		s.Backfilled = td.Info.NumActions
	}
	if s.Runs, err = scheduleRuns(ctx, c, group, name); err != nil {
		return s, err
	}
	return s, nil
}

func printSchedule(w io.Writer, s scheduleShow) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "SCHEDULE\t%s\nSPEC\t%s\nOVERLAP\t%s\nCATCH-UP WINDOW\t%s\nPAUSED\t%s\n", s.Name, s.Spec, s.Overlap, s.CatchupWindow, yesNo(s.Paused))
	if s.Note != "" {
		fmt.Fprintf(tw, "NOTE\t%s\n", s.Note)
	}
	fmt.Fprintf(tw, "FIRED\t%d (skipped for overlap: %d, missed the catch-up window: %d; backfilled: %d)\n", s.Fired, s.SkippedOverlap, s.MissedCatchup, s.Backfilled)
	for i, t := range s.NextRuns[:min(len(s.NextRuns), 5)] { // --output json lists them all
		fmt.Fprintf(tw, "%s\t%s\n", map[bool]string{true: "NEXT RUNS"}[i == 0], t.UTC().Format(time.RFC3339))
	}
	for i, a := range s.RecentActions {
		fmt.Fprintf(tw, "%s\t%s (started %s)\n", map[bool]string{true: "RECENT FIRINGS"}[i == 0],
			a.ScheduledTime.UTC().Format(time.RFC3339), a.ActualTime.UTC().Format(time.RFC3339))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	return printRuns(w, s.Runs)
}

func printRuns(w io.Writer, runs []scheduleRun) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tSTATUS\tTRIGGER\tSCHEDULED\tBASELINE")
	for _, r := range runs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Job, r.Status, r.Trigger, r.ScheduledTime.UTC().Format(time.RFC3339), dash(r.Baseline))
	}
	return tw.Flush()
}

// scheduleRun is one firing of a schedule and its job.
type scheduleRun struct {
	Job           string    `json:"job"`
	Status        string    `json:"status"`
	Trigger       string    `json:"trigger"`
	ScheduledTime time.Time `json:"scheduled_time"`
	Baseline      string    `json:"baseline,omitempty"`
	WorkflowID    string    `json:"workflow_id"`
}

// scheduleRuns lists a schedule's firings (its backfills' included), the
// newest first, from Temporal's visibility store.
func scheduleRuns(ctx context.Context, c client.Client, group, name string) ([]scheduleRun, error) {
	q := fmt.Sprintf("TemporalScheduledById IN ('%s', '%s')", workflows.ScheduleID(group, name), workflows.BackfillScheduleID(group, name))
	runs := []scheduleRun{}
	var token []byte
	dc := converter.GetDefaultDataConverter()
	for {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: q, PageSize: 1000, NextPageToken: token})
		if err != nil {
			return nil, fmt.Errorf("list the runs of schedule %s: %w", name, err)
		}
		for _, e := range resp.GetExecutions() {
			f := e.GetSearchAttributes().GetIndexedFields()
			r := scheduleRun{WorkflowID: e.GetExecution().GetWorkflowId(), Trigger: memoString(e.GetMemo(), "trigger"),
				Baseline: memoString(e.GetMemo(), "baseline"), Status: runStatus(e.GetStatus())}
			if p := f["BatonJob"]; p != nil {
				_ = dc.FromPayload(p, &r.Job)
			}
			if p := f["TemporalScheduledStartTime"]; p != nil {
				_ = dc.FromPayload(p, &r.ScheduledTime)
			}
			runs = append(runs, r)
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			break
		}
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i].ScheduledTime.After(runs[j].ScheduledTime) })
	return runs, nil
}

// runStatus is a firing's status in the words of a job's.
func runStatus(s enumspb.WorkflowExecutionStatus) string {
	switch s {
	case enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		return workflows.JobRunning
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		return workflows.JobCompleted
	case enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED:
		return workflows.JobCanceled
	}
	return strings.ToLower(strings.TrimPrefix(s.String(), "WORKFLOW_EXECUTION_STATUS_"))
}

// memoString is a memo's string field ("" when absent).
func memoString(m *commonpb.Memo, key string) string {
	var s string
	if f, ok := m.GetFields()[key]; ok && json.Unmarshal(f.GetData(), &s) == nil {
		return s
	}
	return ""
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// scheduleJobsOnly keeps the jobs that are runs of schedule name (all of
// them when name is empty): `baton jobs --schedule NAME`. The runs of a
// deleted schedule are still listed.
func scheduleJobsOnly(cmd *cobra.Command, g *globals, tf *temporalFlags, name string, all []jobs.JobInfo) ([]jobs.JobInfo, error) {
	if name == "" {
		return all, nil
	}
	c, err := tf.dial(cmd.Context())
	if err != nil {
		return nil, err
	}
	defer c.Close()
	runs, err := scheduleRuns(cmd.Context(), c, g.group, name)
	if err != nil {
		return nil, err
	}
	if len(runs) == 0 { // a deleted schedule's runs are still listed
		if _, _, err := scheduleHandle(cmd.Context(), c, g.group, name); err != nil {
			return nil, err
		}
	}
	of := map[string]bool{}
	for _, r := range runs {
		of[r.Job] = true
	}
	return slices.DeleteFunc(all, func(j jobs.JobInfo) bool { return !of[j.ID] }), nil
}

// jobBaseline is the baseline in a job's spec ("" when it has none or the
// store cannot be read from here).
func jobBaseline(ctx context.Context, g *globals, tf *temporalFlags, job string) string {
	js, err := tf.st.openReader(ctx, g)
	if err != nil {
		return ""
	}
	defer js.Close()
	spec, err := js.Spec(ctx, job)
	if err != nil {
		return ""
	}
	return spec.Baseline
}
