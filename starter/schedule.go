package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/batoncrawl/baton/activities/cmdline/exitcode"
	"github.com/batoncrawl/baton/workflows"
)

// scheduleCmd is `baton schedule`: crawls that run again on a timetable,
// each firing a new job NAME-<UTC time> whose baseline is the schedule's
// last completed run. A schedule is a Temporal Schedule (the Web UI shows
// it); Temporal keeps it across restarts of every process.
func scheduleCmd(g *globals, tf *temporalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "schedule",
		Short: "Crawl again on a timetable: create, list, show, pause, resume, trigger, backfill or delete schedules",
		Long: `A schedule submits a crawl job at each of its times, named NAME-<UTC time>
(NAME-20261128T030000Z), with the crawl flags it was created with, as baton
crawl would; each job's baseline is the schedule's last completed run. The
schedule is a Temporal Schedule: it survives restarts, and the Web UI shows
it (ID baton-schedule/GROUP/NAME). A firing waits for its crawl, so --overlap
decides what a firing does while the previous crawl still runs.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(scheduleCreateCmd(g, tf), scheduleListCmd(g, tf), scheduleShowCmd(g, tf))
	cmd.AddCommand(scheduleControlCmds(g, tf)...)
	return cmd
}

func scheduleCreateCmd(g *globals, tf *temporalFlags) *cobra.Command {
	var tpl crawlTemplate
	var st scheduleTiming
	var paused bool
	var out *output
	cmd := &cobra.Command{
		Use:   "create NAME (--every DURATION | --cron EXPR) [--overlap POLICY] [--catchup-window D] [crawl flags] SEED_URL...",
		Short: "Create a schedule: a crawl job at each of its times, with the crawl flags given",
		Example: `  baton schedule create shop --every 24h http://127.0.0.1:8000/ --follow --depth 3 --select price=.price
  baton schedule create docs --cron '0 3 * * *' --overlap buffer-one --sitemap https://example.com/sitemap.xml`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if err := checkScheduleName(name); err != nil {
				return err
			}
			st.everySet = cmd.Flags().Changed("every")
			tspec, policy, err := st.check()
			if err != nil {
				return err
			}
			spec, err := tpl.spec(cmd, g, name, args[1:])
			if err != nil {
				return err
			}
			if l, ok, note, bad := groupLimits(cmd.Context(), g); bad != nil {
				return bad
			} else if ok {
				if err := checkGroupLimits(cmd, l, &spec); err != nil {
					return err
				}
			} else if note != "" {
				fmt.Fprintln(cmd.ErrOrStderr(), note)
			}
			c, err := tf.dial(cmd.Context())
			if err != nil {
				return err
			}
			defer c.Close()
			in := workflows.ScheduleInput{Schedule: name, Template: spec, Memo: scheduleMemo(spec)}
			if err := createSchedule(cmd.Context(), c, g.group, in, tspec, policy, st, paused); err != nil {
				return err
			}
			info := scheduleRow{Name: name, ID: workflows.ScheduleID(g.group, name), Spec: st.describe(), Overlap: st.overlap,
				CatchupWindow: st.catchup.String(), Paused: paused}
			if out.JSON() {
				return writeJSON(cmd.OutOrStdout(), info)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "schedule %s created: %s, overlap %s, catch-up window %v%s\n", name, info.Spec, st.overlap, st.catchup,
				map[bool]string{true: " (paused)"}[paused])
			fmt.Fprintf(cmd.ErrOrStderr(), "Web UI: %s/namespaces/%s/schedules/%s\n", strings.TrimRight(tf.uiURL, "/"), tf.conn.Namespace, url.PathEscape(info.ID))
			return nil
		},
	}
	f := cmd.Flags()
	f.DurationVar(&st.every, "every", 0, "fire every DURATION (24h, 30m), from the Unix epoch (24h fires at 00:00 UTC)")
	f.StringVar(&st.cron, "cron", "", "fire at the times of a cron expression, in UTC: 'MIN HOUR DOM MONTH DOW' ('0 3 * * *') or @daily, @hourly…")
	f.StringVar(&st.overlap, "overlap", "skip", "a firing while the previous crawl still runs: "+strings.Join(overlapNames, ", "))
	f.DurationVar(&st.catchup, "catchup-window", defaultCatchupWindow, "a firing missed while Temporal was unavailable still runs if Temporal is back within this long")
	f.BoolVar(&paused, "paused", false, "create it paused (baton schedule resume starts it)")
	tpl.add(f)
	out = addOutputFlag(cmd)
	return cmd
}

// describe is the timing as the user gave it.
func (st scheduleTiming) describe() string {
	if st.cron != "" {
		return "cron " + st.cron
	}
	return "every " + st.every.String()
}

// createSchedule creates the Temporal schedule of in and its backfill twin
// (paused, the same timetable: a backfill runs on it, so that its runs say
// they are backfills). If the twin cannot be created, the schedule is
// deleted again.
func createSchedule(ctx context.Context, c client.Client, group string, in workflows.ScheduleInput, tspec client.ScheduleSpec,
	policy enumspb.ScheduleOverlapPolicy, st scheduleTiming, paused bool) error {
	sc := c.ScheduleClient()
	opts := func(id string, in workflows.ScheduleInput, paused bool, note string) client.ScheduleOptions {
		return client.ScheduleOptions{
			ID: id, Spec: tspec, Overlap: policy, CatchupWindow: st.catchup, Paused: paused, Note: note,
			Action: &client.ScheduleWorkflowAction{
				ID: id, Workflow: workflows.ScheduledCrawl, Args: []any{in}, TaskQueue: workflows.JobQueue(group),
				WorkflowTaskTimeout:   workflows.JobTaskTimeout,
				TypedSearchAttributes: temporal.NewSearchAttributes(workflows.AttrCluster.ValueSet(group), workflows.AttrRole.ValueSet("schedule")),
				Memo:                  map[string]any{"schedule": in.Schedule},
			},
			TypedSearchAttributes: temporal.NewSearchAttributes(workflows.AttrCluster.ValueSet(group), workflows.AttrRole.ValueSet("schedule")),
			Memo:                  map[string]any{"schedule": in.Schedule, "spec": st.describe(), "overlap": st.overlap, "catchup_window": st.catchup.String()},
		}
	}
	sid := workflows.ScheduleID(group, in.Schedule)
	if _, err := sc.Create(ctx, opts(sid, in, paused, "")); err != nil {
		if errors.Is(err, temporal.ErrScheduleAlreadyRunning) {
			return usage("schedule %q exists already in group %s: delete it first, or choose another name", in.Schedule, group)
		}
		return fmt.Errorf("create schedule %s: %w", in.Schedule, err)
	}
	twin := in
	twin.Trigger = workflows.TriggerBackfill
	if _, err := sc.Create(ctx, opts(workflows.BackfillScheduleID(group, in.Schedule), twin, true,
		"runs the backfills of schedule "+in.Schedule+": never fires on its own")); err != nil {
		_ = sc.GetHandle(ctx, sid).Delete(ctx)
		return fmt.Errorf("create the backfill schedule of %s: %w", in.Schedule, err)
	}
	return nil
}

// scheduleHandle is the handle of an existing schedule (an error with exit
// code 3 when there is none).
func scheduleHandle(ctx context.Context, c client.Client, group, name string) (client.ScheduleHandle, *client.ScheduleDescription, error) {
	h := c.ScheduleClient().GetHandle(ctx, workflows.ScheduleID(group, name))
	d, err := h.Describe(ctx)
	if err != nil {
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return nil, nil, exitcode.With(exitcode.NotFound, fmt.Errorf("no schedule %q in group %s (baton schedule list lists them)", name, group))
		}
		return nil, nil, fmt.Errorf("describe schedule %s: %w", name, err)
	}
	return h, d, nil
}

// scheduleRow is a schedule as list and show print it.
type scheduleRow struct {
	Name          string      `json:"name"`
	ID            string      `json:"id"`
	Spec          string      `json:"spec"`
	Overlap       string      `json:"overlap"`
	CatchupWindow string      `json:"catchup_window"`
	Paused        bool        `json:"paused"`
	Note          string      `json:"note,omitempty"`
	NextRuns      []time.Time `json:"next_runs"`
}
