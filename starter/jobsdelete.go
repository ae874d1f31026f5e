package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"

	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/workflows"
)

// deleteStore is the job store as `baton jobs delete` holds it.
type deleteStore interface {
	Spec(ctx context.Context, job string) (jobs.Spec, error)
	DeleteJob(ctx context.Context, job string) (int64, error)
	io.Closer
}

func (s *storeFlags) openDeleter(ctx context.Context, g *globals) (deleteStore, error) {
	js, err := s.openWith(ctx, g, true)
	if err != nil {
		return nil, err
	}
	return js, nil
}

// jobsDeleteCmd deletes a finished job's rows from the job store.
func jobsDeleteCmd(g *globals, tf *temporalFlags) *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "delete JOB",
		Short: "Delete a job's rows from the job store: its spec, frontier, results, items, counters and sealed secrets",
		Long: `Delete a job's rows from the job store in one transaction: its spec, frontier,
results, bodies, items, sink cursors, counters, robots.txt files and sealed
secrets. A job whose workflow still runs is refused (cancel it first with
baton cancel JOB), as is one whose status Temporal cannot tell, unless --force.
Files outside the store (--bodies-dir, --warc) and the workflow's history
(kept for the namespace's retention) stay.`,
		Example: `  baton jobs delete crawl-20261128T101500Z
  baton jobs -q | xargs -n1 baton jobs delete`,
		Args: oneArg("JOB", "the ID of the job (baton jobs lists them)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			job := args[0]
			if err := jobs.ValidID(job); err != nil {
				return usage("%v", err)
			}
			if err := refuseRunning(cmd.Context(), g, tf, job); err != nil && !force {
				return err
			}
			js, err := tf.st.openDeleter(cmd.Context(), g)
			if err != nil {
				return err
			}
			defer js.Close()
			spec, err := js.Spec(cmd.Context(), job)
			if errors.Is(err, jobs.ErrNoJob) {
				return usage("job %s is not in the job store (baton jobs lists them)", job)
			}
			if err != nil {
				return err
			}
			if spec.Group != g.group {
				return usage("job %s belongs to group %s, not %s: give its --group", job, spec.Group, g.group)
			}
			n, err := js.DeleteJob(cmd.Context(), job)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "deleted job %s: %d rows\n", job, n)
			return nil
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "delete the job's rows even if its workflow runs (its Runners then fail its batches) or Temporal does not answer")
	return cmd
}

// refuseRunning is a usage error when job's workflow runs, or when
// Temporal cannot say whether it does.
func refuseRunning(ctx context.Context, g *globals, tf *temporalFlags, job string) error {
	c, err := tf.dial(ctx)
	if err != nil {
		return usage("cannot tell whether job %s still runs (%v): --force deletes it all the same", job, err)
	}
	defer c.Close()
	d, err := c.DescribeWorkflowExecution(ctx, workflows.JobWorkflowID(g.group, job), "")
	var notFound *serviceerror.NotFound
	if errors.As(err, &notFound) {
		return nil // its history is gone already, or it never started
	}
	if err != nil {
		return usage("cannot tell whether job %s still runs (%v): --force deletes it all the same", job, err)
	}
	if d.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return usage("job %s is running: cancel it first (baton cancel %s), or --force", job, job)
	}
	return nil
}
