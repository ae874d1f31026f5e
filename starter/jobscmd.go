package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/workflows"
)

// jobsCmd lists the group's jobs.
func jobsCmd(g *globals, tf *temporalFlags) *cobra.Command {
	var listOut *output
	var listQuiet bool
	var listSchedule string
	list := &cobra.Command{
		Use:   "jobs",
		Short: "List the group's crawl jobs (from the job store; their workflow status when Temporal answers)",
		Example: `  baton jobs
  baton jobs -q                                   # only the IDs, one a line
  baton jobs --output json | jq -r '.[] | select(.status == "running") | .id'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if listQuiet && listOut.JSON() {
				return usage("-q/--quiet and --output json exclude each other: -q prints only the job IDs")
			}
			js, err := tf.st.openReader(cmd.Context(), g)
			if err != nil {
				return err
			}
			defer js.Close()
			all, err := js.Jobs(cmd.Context())
			if err != nil {
				return err
			}
			if all, err = scheduleJobsOnly(cmd, g, tf, listSchedule, all); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if listQuiet {
				for _, j := range all {
					if j.Group == g.group {
						fmt.Fprintln(out, j.ID)
					}
				}
				return nil
			}
			status, err := workflowStatuses(cmd.Context(), tf, g.group)
			if err != nil {
				return err
			}
			rows := []jobRow{}
			for _, j := range all {
				if j.Group != g.group {
					continue
				}
				st, ok := status[j.ID]
				if !ok {
					st = "-"
				}
				rows = append(rows, jobRow{JobInfo: j, Status: st})
			}
			if listOut.JSON() {
				return writeJSON(out, rows)
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "JOB\tSTATUS\tCREATED\tRECORDED\tFAILED\tQUEUED\tSEEN")
			for _, j := range rows {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\n", j.ID, j.Status, j.Created.Format(time.RFC3339),
					j.Stats.Recorded, j.Stats.Failed, j.Stats.Queued, j.Stats.Seen)
			}
			return tw.Flush()
		},
	}
	listOut = addOutputFlag(list)
	list.Flags().BoolVarP(&listQuiet, "quiet", "q", false, "print only the job IDs, one a line")
	list.Flags().StringVar(&listSchedule, "schedule", "", "list only the runs of this schedule (baton schedule list)")
	list.AddCommand(jobsDeleteCmd(g, tf))
	return list
}

// statusCmd shows a job's progress.
func statusCmd(g *globals, tf *temporalFlags) *cobra.Command {
	var statusOut *output
	status := &cobra.Command{
		Use:   "status JOB",
		Short: "Show a job's progress; a finished job answers without any worker running",
		Example: `  baton status JOB
  baton status JOB --output json | jq .stats.recorded`,
		Args: oneArg("JOB", "the ID of the job (baton jobs lists them)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := jobs.ValidID(args[0]); err != nil {
				return usage("%v", err)
			}
			p, err := jobStatus(cmd.Context(), g, tf, args[0])
			if err != nil {
				return err
			}
			sinks := jobSinks(cmd.Context(), g, tf, args[0])
			baseline := jobBaseline(cmd.Context(), g, tf, args[0])
			changes := jobChanges(cmd.Context(), g, tf, args[0], baseline)
			if statusOut.JSON() {
				err = writeJSON(cmd.OutOrStdout(), struct {
					workflows.JobProgress
					Baseline string            `json:"baseline,omitempty"`
					Changes  *jobs.ChangeStats `json:"changes,omitempty"`
					Sinks    []jobs.SinkState  `json:"sinks,omitempty"`
				}{p, baseline, changes, sinks})
			} else {
				err = printProgress(cmd.OutOrStdout(), p)
				if err == nil && baseline != "" {
					_, err = fmt.Fprintf(cmd.OutOrStdout(), "BASELINE  %s\n", baseline)
				}
				if err == nil && changes != nil {
					_, err = fmt.Fprintf(cmd.OutOrStdout(), "CHANGES   %s\n", changes.Line(baseline))
				}
				if err == nil {
					err = printSinks(cmd.OutOrStdout(), sinks)
				}
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "Web UI: %s\n", tf.link(workflows.JobWorkflowID(g.group, args[0])))
			return nil
		},
	}
	statusOut = addOutputFlag(status)
	return status
}
