package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/batoncrawl/baton/activities/cmdline/exitcode"
	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/workflows"
)

// The job controls: pause, resume, cancel and rerun. Pause and cancel
// return once the job's workflow has written the new state to the job
// store, where the Runners holding its batches read it (every 200 ms):
// from then on no new request of the job starts.

// defaultApplyTimeout is how long pause, resume and cancel wait for the
// job's workflow to apply them.
const defaultApplyTimeout = 10 * time.Second

// controlPoll is how often they ask the workflow meanwhile.
const controlPoll = 50 * time.Millisecond

func controlCmds(g *globals, tf *temporalFlags) []*cobra.Command {
	var pauseWait, resumeWait, cancelWait time.Duration
	pause := &cobra.Command{
		Use:   "pause JOB",
		Short: "Pause a job: its Runners stop fetching at once and give back what they did not fetch; nothing is lost",
		Long: `Pause a job. Its Runners stop fetching within a fraction of a second,
whatever the batch size: no new request starts, the requests in flight are
abandoned (their URLs are fetched again on resume), the pages fetched are
recorded, and the URLs not fetched go back to the job's frontier. The
command returns once the job's workflow has told the Runners (within
--wait, default 10s). 'baton resume JOB' continues the job.`,
		Example: `  baton pause my-job
  baton resume my-job`,
		Args: oneArg("JOB", "the ID of the job"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return controlJob(cmd, g, tf, args[0], controlPause, pauseWait)
		},
	}
	pause.Flags().DurationVar(&pauseWait, "wait", defaultApplyTimeout, "how long to wait for the job's workflow to apply the pause (0: do not wait)")
	resume := &cobra.Command{
		Use:   "resume JOB",
		Short: "Resume a paused job, or continue a cancelled one (as a new run of its workflow)",
		Long: `Resume a paused job: its workflow tells the Runners and hands out batches
again. A cancelled job continues as a new run of the same workflow (the
same job ID and results, its frontier as the cancel left it: every page
is recorded once). A completed job has nothing to resume: 'baton rerun
JOB --failed' queues its failed URLs again.`,
		Example: `  baton resume my-job`,
		Args:    oneArg("JOB", "the ID of the job"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return controlJob(cmd, g, tf, args[0], controlResume, resumeWait)
		},
	}
	resume.Flags().DurationVar(&resumeWait, "wait", defaultApplyTimeout, "how long to wait for the job's workflow to apply the resume (0: do not wait)")
	cancel := &cobra.Command{
		Use:   "cancel JOB",
		Short: "Cancel a job: its Runners stop fetching at once, it ends cancelled (resume continues it)",
		Long: `Cancel a job: its Runners stop fetching within a fraction of a second, as
for a pause; the job ends cancelled once their batches have ended, and
Temporal shows its workflow Canceled. The command returns once the
workflow has told the Runners (within --wait, default 10s). The pages
recorded stay; 'baton resume JOB' continues the job as a new run.`,
		Example: `  baton cancel my-job
  baton jobs            # STATUS cancelled, once its batches ended`,
		Args: oneArg("JOB", "the ID of the job"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return controlJob(cmd, g, tf, args[0], controlCancel, cancelWait)
		},
	}
	cancel.Flags().DurationVar(&cancelWait, "wait", defaultApplyTimeout, "how long to wait for the job's workflow to apply the cancel (0: do not wait)")
	var failed, wait bool
	var co *crawlOutput
	rerun := &cobra.Command{
		Use:   "rerun JOB --failed",
		Short: "Queue a finished job's failed URLs again, as a new run of the job (each URL stays recorded once)",
		Long: `Re-run the failed URLs of a job that ended (completed or cancelled): a new
run of the job's workflow, under the same job ID, queues the URLs whose page
was recorded with an error again and crawls them. Each failed page leaves
the results when the re-run starts and the re-run records it again, so
every URL is in the results once, with its latest outcome. A cancelled job
also goes on with the rest of its frontier.`,
		Example: `  baton rerun my-job --failed --wait
  baton results my-job --stats`,
		Args: oneArg("JOB", "the ID of the job"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !failed {
				return usage("rerun: give --failed (it re-runs a job's failed URLs); to continue a cancelled job: baton resume %s", args[0])
			}
			if err := co.check(cmd, wait); err != nil {
				return err
			}
			return rerunJob(cmd, g, tf, args[0], wait, co)
		},
	}
	rerun.Flags().BoolVar(&failed, "failed", false, "queue the job's failed URLs again (required)")
	rerun.Flags().BoolVar(&wait, "wait", false, "wait for the re-run, show its progress (on stderr), then its stats; exit code 4 if it ends cancelled or failed")
	co = addCrawlOutputFlags(rerun)
	return []*cobra.Command{pause, resume, cancel, rerun}
}

type control int

const (
	controlPause control = iota
	controlResume
	controlCancel
)

func (c control) String() string {
	return [...]string{"pause", "resume", "cancel"}[c]
}

// controlJob pauses, resumes or cancels a job and waits up to wait for
// its workflow to apply it.
func controlJob(cmd *cobra.Command, g *globals, tf *temporalFlags, job string, what control, wait time.Duration) error {
	if err := jobs.ValidID(job); err != nil {
		return usage("%v", err)
	}
	if wait < 0 {
		return usage("--wait: is %v, must be >= 0", wait)
	}
	ctx := cmd.Context()
	c, err := tf.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	wid := workflows.JobWorkflowID(g.group, job)
	desc, err := describeJob(ctx, c, g, job)
	if err != nil {
		return err
	}
	out, errw := cmd.OutOrStdout(), cmd.ErrOrStderr()
	info := desc.GetWorkflowExecutionInfo()
	if info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		final, _ := finalProgress(ctx, c, wid, info.GetExecution().GetRunId(), info.GetStatus())
		if what == controlResume {
			if final.State == workflows.JobCanceled {
				return reopenJob(cmd, g, tf, c, desc, final, false, false, nil, nil)
			}
			if final.State == workflows.JobCompleted {
				return usage("job %s completed: nothing to resume (to queue its failed URLs again: baton rerun %s --failed)", job, job)
			}
		}
		return exitcode.With(exitcode.NotFound, fmt.Errorf("no running job %q in group %s: it ended %s", job, g.group, final.State))
	}
	switch {
	case what == controlCancel && cancelsWithTemporal(desc):
		err = c.CancelWorkflow(ctx, wid, "")
	default:
		// A pause or resume; or the cancel of a run started before
		// Temporal's cancellation was the way (control-v1), or not
		// started by a worker yet: its code reads the signal either way.
		err = c.SignalWorkflow(ctx, wid, "", what.String(), nil)
	}
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return exitcode.With(exitcode.NotFound, fmt.Errorf("no running job %q in group %s", job, g.group))
	}
	if err != nil {
		return err
	}
	if wait == 0 {
		fmt.Fprintf(out, "%s sent to job %s\n", what, job)
		return nil
	}
	if !hasJobWorkers(ctx, c, g.group) {
		fmt.Fprintf(out, "%s sent to job %s\n", what, job)
		fmt.Fprintf(errw, "note: no worker of group %s polls its job queue: the job applies it when one runs it\n", g.group)
		return nil
	}
	p, applied, ended := awaitApplied(ctx, c, wid, what, wait)
	switch {
	case ended:
		fmt.Fprintf(out, "job %s ended %s\n", job, p.State)
	case !applied:
		fmt.Fprintf(out, "%s sent to job %s\n", what, job)
		fmt.Fprintf(errw, "note: its workflow did not apply it within %v (no worker answered?): it takes effect when a worker runs the job\n", wait)
	case what == controlPause:
		fmt.Fprintf(out, "job %s paused: its Runners stop fetching; the URLs they did not fetch stay queued (baton resume %s continues)\n", job, job)
	case what == controlResume:
		fmt.Fprintf(out, "job %s running\n", job)
	default:
		fmt.Fprintf(out, "job %s cancelling: its Runners stop fetching; it ends cancelled once its batches have ended (baton status %s)\n", job, job)
	}
	return nil
}

// describeJob describes a job's workflow (its latest run); exit code 3
// when there is none.
func describeJob(ctx context.Context, c client.Client, g *globals, job string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	dctx, cancel := context.WithTimeout(ctx, g.connectTimeout)
	defer cancel()
	desc, err := c.DescribeWorkflowExecution(dctx, workflows.JobWorkflowID(g.group, job), "")
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return nil, exitcode.With(exitcode.NotFound, fmt.Errorf("no running job %q in group %s (no workflow %s)", job, g.group,
			workflows.JobWorkflowID(g.group, job)))
	}
	return desc, err
}

// hasJobWorkers reports whether a worker polls the group's job task queue
// (Temporal lists the pollers of the last minutes); true when it cannot
// tell.
func hasJobWorkers(ctx context.Context, c client.Client, group string) bool {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	resp, err := c.DescribeTaskQueue(ctx, workflows.JobQueue(group), enumspb.TASK_QUEUE_TYPE_WORKFLOW)
	return err != nil || len(resp.GetPollers()) > 0
}

// cancelsWithTemporal reports whether the run reads Temporal's
// cancellation (CrawlJob control-v1: its TemporalChangeVersion search
// attribute says so).
func cancelsWithTemporal(desc *workflowservice.DescribeWorkflowExecutionResponse) bool {
	p := desc.GetWorkflowExecutionInfo().GetSearchAttributes().GetIndexedFields()["TemporalChangeVersion"]
	if p == nil {
		return false
	}
	var versions []string
	if err := converter.GetDefaultDataConverter().FromPayload(p, &versions); err != nil {
		return false
	}
	return slices.Contains(versions, workflows.ControlVersionAttr)
}

// awaitApplied asks the job's workflow for its progress until it applied
// what (its Runners were told: JobState.Control; a run started before
// control-v1 has none and shows only its state), or it ended, or wait
// passed.
func awaitApplied(ctx context.Context, c client.Client, wid string, what control, wait time.Duration) (p workflows.JobProgress, applied, ended bool) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for {
		qctx, qcancel := context.WithTimeout(ctx, 2*time.Second)
		q, err := queryProgress(qctx, c, wid)
		qcancel()
		if err == nil {
			p = q
			if controlApplied(p, what) {
				return p, true, false
			}
		} else if desc, derr := c.DescribeWorkflowExecution(ctx, wid, ""); derr == nil &&
			desc.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			info := desc.GetWorkflowExecutionInfo()
			p, _ = finalProgress(ctx, c, wid, info.GetExecution().GetRunId(), info.GetStatus())
			return p, true, true
		}
		select {
		case <-ctx.Done():
			return p, false, false
		case <-time.After(controlPoll):
		}
	}
}

func controlApplied(p workflows.JobProgress, what control) bool {
	switch what {
	case controlPause:
		return p.State == workflows.JobPaused && (p.Control == jobs.ControlPaused || p.Control == "")
	case controlResume:
		return p.State == workflows.JobRunning && (p.Control == jobs.ControlRunning || p.Control == "")
	default:
		cancelling := p.State == workflows.JobCanceling || p.State == workflows.JobCanceled
		return cancelling && (p.Control == jobs.ControlCancelled || p.Control == "")
	}
}

// jobOutcome reads a job workflow's result: a completed run's progress, or
// a canceled run's (the details of its canceled error). It returns err
// unchanged when it is neither.
func jobOutcome(err error, p *workflows.JobProgress) error {
	var ce *temporal.CanceledError
	if err == nil || !errors.As(err, &ce) {
		return err
	}
	if !ce.HasDetails() || ce.Details(p) != nil {
		// A run cancelled before control-v1 (or terminated mid-way):
		// cancelled all the same, without counters.
		p.State = workflows.JobCanceled
	}
	return nil
}

// finalProgress is an ended run's outcome: its progress when it completed
// or was cancelled, else its Temporal status as the state.
func finalProgress(ctx context.Context, c client.Client, wid, runID string, status enumspb.WorkflowExecutionStatus) (workflows.JobProgress, error) {
	p := workflows.JobProgress{ID: jobOf(wid)}
	gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := jobOutcome(c.GetWorkflow(gctx, wid, runID).Get(gctx, &p), &p)
	if err != nil || p.State == "" {
		p.State = statusState(status, "")
	}
	return p, err
}

// statusState is a job's state from its workflow's Temporal status and the
// state its memo records (a run writes it at every change): Canceled is
// "cancelled" (Baton's spelling), a running job may be paused or
// cancelling, and a run cancelled before control-v1 completed with the
// state cancelled.
func statusState(status enumspb.WorkflowExecutionStatus, memoState string) string {
	switch status {
	case enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED:
		return workflows.JobCanceled
	case enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		if memoState == workflows.JobPaused || memoState == workflows.JobCanceling {
			return memoState
		}
		return workflows.JobRunning
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		if memoState == workflows.JobCanceled {
			return memoState
		}
		return workflows.JobCompleted
	}
	return strings.ToLower(status.String())
}

// memoState is the state a workflow's memo records ("" when none).
func memoState(memo *commonpb.Memo) string {
	var s string
	if f, ok := memo.GetFields()["state"]; ok && json.Unmarshal(f.GetData(), &s) == nil {
		return s
	}
	return ""
}

// rerunJob starts a new run of an ended job that queues its failed URLs
// again.
func rerunJob(cmd *cobra.Command, g *globals, tf *temporalFlags, job string, wait bool, co *crawlOutput) error {
	if err := jobs.ValidID(job); err != nil {
		return usage("%v", err)
	}
	ctx := cmd.Context()
	var live *runnerCheck
	if wait {
		l, err := co.runners(ctx, g, job)
		if err != nil {
			return err
		}
		live = l
		defer live.Close()
	}
	c, err := tf.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	desc, err := describeJob(ctx, c, g, job)
	if err != nil {
		return err
	}
	info := desc.GetWorkflowExecutionInfo()
	if info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return usage("job %s is %s: re-run its failed URLs once it has ended (wait for it, or baton cancel %s)", job,
			statusState(info.GetStatus(), memoState(info.GetMemo())), job)
	}
	final, err := finalProgress(ctx, c, workflows.JobWorkflowID(g.group, job), info.GetExecution().GetRunId(), info.GetStatus())
	if err != nil || (final.State != workflows.JobCompleted && final.State != workflows.JobCanceled) {
		return usage("job %s ended %s, without a final state to go on from: it cannot be re-run (%v)", job, final.State, err)
	}
	return reopenJob(cmd, g, tf, c, desc, final, true, wait, co, live)
}

// progressMemoKeys are the memo fields a run writes (JobProgressMemo); a
// new run starts without them.
var progressMemoKeys = workflows.JobProgressMemo(workflows.JobState{})

// reopenJob starts a new run of an ended job's workflow (same workflow and
// job ID) from its last run's progress: JobInput.Reopen (failed: its
// failed URLs queued again). The spec is the last run's input, exactly.
func reopenJob(cmd *cobra.Command, g *globals, tf *temporalFlags, c client.Client, desc *workflowservice.DescribeWorkflowExecutionResponse,
	final workflows.JobProgress, failed, wait bool, co *crawlOutput, live *runnerCheck) error {
	ctx := cmd.Context()
	info := desc.GetWorkflowExecutionInfo()
	wid, runID := info.GetExecution().GetWorkflowId(), info.GetExecution().GetRunId()
	job := jobOf(wid)
	last, err := runInput(ctx, c, wid, runID)
	if err != nil {
		return fmt.Errorf("job %s: read the input of its last run %s: %w", job, runID, err)
	}
	st := final.JobState
	st.Started = true
	memo := map[string]any{"reopened_from": runID, "rerun": "resume"}
	if failed {
		memo["rerun"] = "failed"
	}
	for k, v := range info.GetMemo().GetFields() {
		if _, progress := progressMemoKeys[k]; !progress && k != "reopened_from" && k != "rerun" {
			memo[k] = converter.NewRawValue(v)
		}
	}
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: wid, TaskQueue: workflows.JobQueue(g.group), WorkflowTaskTimeout: workflows.JobTaskTimeout,
		WorkflowIDReusePolicy:                    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		TypedSearchAttributes: temporal.NewSearchAttributes(workflows.AttrCluster.ValueSet(g.group),
			workflows.AttrJob.ValueSet(job), workflows.AttrRole.ValueSet("job")),
		Memo: memo,
	}, workflows.CrawlJob, workflows.JobInput{Spec: last.Spec, State: st, Reopen: &workflows.Reopen{Failed: failed}})
	if err != nil {
		var started *serviceerror.WorkflowExecutionAlreadyStarted
		if errors.As(err, &started) {
			return usage("job %s is running again already (another resume or rerun started it)", job)
		}
		return fmt.Errorf("start a new run of job %s: %w", job, err)
	}
	out := cmd.OutOrStdout()
	if !failed {
		fmt.Fprintf(out, "job %s was cancelled: it goes on as a new run of its workflow (run %s)\n", job, run.GetRunID())
		fmt.Fprintf(cmd.ErrOrStderr(), "Web UI: %s\n", tf.link(wid))
		return nil
	}
	co.stats = func(w io.Writer) { printReport(ctx, w, g, tf, job) }
	co.growing, co.maxPages = jobGrows(last.Spec), last.Spec.MaxPages
	s := submitted{ID: job, WorkflowID: wid, RunID: run.GetRunID(), WebUI: tf.link(wid), what: "re-run: its failed URLs queued again"}
	return co.report(cmd, c, s, wait, live)
}

// runInput reads the input of a run of a job workflow (its first event).
func runInput(ctx context.Context, c client.Client, wid, runID string) (workflows.JobInput, error) {
	var in workflows.JobInput
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	it := c.GetWorkflowHistory(ctx, wid, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	if !it.HasNext() {
		return in, errors.New("empty history")
	}
	ev, err := it.Next()
	if err != nil {
		return in, err
	}
	attrs := ev.GetWorkflowExecutionStartedEventAttributes()
	if attrs == nil {
		return in, fmt.Errorf("its first event is %s", ev.GetEventType())
	}
	if err := converter.GetDefaultDataConverter().FromPayloads(attrs.GetInput(), &in); err != nil {
		return in, err
	}
	if in.Spec.ID == "" {
		return in, errors.New("no job spec in it")
	}
	return in, nil
}
