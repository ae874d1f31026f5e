package workflows

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/batoncrawl/baton/activities"
	"github.com/batoncrawl/baton/activities/jobs"
)

// Job states reported by the progress query.
const (
	JobRunning   = "running"
	JobPaused    = "paused"
	JobCanceling = "cancelling"
	JobCanceled  = "cancelled"
	JobCompleted = "completed"
)

// Signal and query names of a CrawlJob.
const (
	SignalPause    = "pause"
	SignalResume   = "resume"
	SignalCancel   = "cancel"
	QueryProgress  = "progress"
	jobLoopsPerRun = 500
)

// AttrJob is the search attribute carrying a job's ID.
var AttrJob = temporal.NewSearchAttributeKeyKeyword("BatonJob")

// JobQueue is the task queue shared by a group's workers for job workflows
// and their activities.
func JobQueue(group string) string { return fmt.Sprintf("baton.%s.jobs", group) }

// JobWorkflowID is the readable workflow ID of a crawl job.
func JobWorkflowID(group, id string) string { return fmt.Sprintf("baton-job/%s/%s", group, id) }

// JobState is the part of a job that survives continue-as-new: counters
// and the batches in flight (at most one per Runner), never URLs.
type JobState struct {
	Started  bool            `json:"started"`
	State    string          `json:"state"`
	Seq      int             `json:"seq"`
	InFlight []jobs.BatchRef `json:"in_flight"`
	Stats    jobs.Stats      `json:"stats"`
	Batches  int             `json:"batches"`  // batches finished
	Requeued int             `json:"requeued"` // batches re-queued after a Runner died with no backup
	// FailedBatches counts batches that could not run; LastError says why
	// the last one failed.
	FailedBatches int       `json:"failed_batches,omitempty"`
	LastError     string    `json:"last_error,omitempty"`
	StartedAt     time.Time `json:"started_at"`
	FinishedAt    time.Time `json:"finished_at,omitempty"`
	Runs          int       `json:"runs"` // continue-as-new count
}

// JobInput is a CrawlJob's input.
type JobInput struct {
	Spec  jobs.Spec `json:"spec"`
	State JobState  `json:"state"`
}

// JobProgress is what the progress query and the result return.
type JobProgress struct {
	ID string `json:"id"`
	JobState
}

// CrawlJob runs one crawl over the cluster: it splits the frontier into
// batches and gives each to an idle Runner (JobAssign), waits for batches
// to finish (JobAwait, woken by ZooKeeper watches), and repeats until the
// frontier is empty and nothing is in flight. Links found by the Runners
// are fed into the frontier by the Runners themselves; deduplication and
// the frontier live in the job store, so the history stays bounded however
// large the crawl (and the workflow continues as new regularly). A batch
// whose Runner died is finished by the backup that takes over; if there is
// none, its unfinished URLs are re-queued. Signals pause, resume and cancel
// it; the "progress" query reads its counters at any time.
func CrawlJob(ctx workflow.Context, in JobInput) (JobProgress, error) {
	spec, st := in.Spec, in.State
	m := activities.Member{Group: spec.Group, Timers: spec.Timers}
	sctx := withShort(ctx, m)
	lctx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		// JobAwait heartbeats at least every 2 × check_crawler_state; when
		// the worker running it is killed, another takes over after this.
		StartToCloseTimeout: time.Hour, HeartbeatTimeout: max(3*time.Second, 6*spec.Timers.CheckCrawlerState),
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: 100 * time.Millisecond, MaximumInterval: 2 * time.Second,
			NonRetryableErrorTypes: []string{jobs.ErrTypeBadJob}},
	})
	progress := func() JobProgress { return JobProgress{ID: spec.ID, JobState: st} }
	if err := workflow.SetQueryHandler(ctx, QueryProgress, func() (JobProgress, error) { return progress(), nil }); err != nil {
		return progress(), err
	}
	pause := workflow.GetSignalChannel(ctx, SignalPause)
	resume := workflow.GetSignalChannel(ctx, SignalResume)
	cancel := workflow.GetSignalChannel(ctx, SignalCancel)
	drain := func() {
		for pause.ReceiveAsync(nil) {
			if st.State == JobRunning {
				st.State = JobPaused
			}
		}
		for resume.ReceiveAsync(nil) {
			if st.State == JobPaused {
				st.State = JobRunning
			}
		}
		for cancel.ReceiveAsync(nil) {
			st.State = JobCanceling
		}
	}
	finish := func(state string) (JobProgress, error) {
		st.State, st.FinishedAt = state, workflow.Now(ctx)
		upsertProgressMemo(ctx, st)
		return progress(), nil
	}
	start := false // the first JobAssign stores the job (one activity less before the first page)
	if !st.Started {
		st.State, st.StartedAt = JobRunning, workflow.Now(ctx)
		if workflow.GetVersion(ctx, pickupVersion, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
			if err := workflow.ExecuteActivity(sctx, ja.JobStart, spec).Get(ctx, &st.Stats); err != nil {
				return progress(), err
			}
		} else {
			start = true
		}
		st.Started = true
	}
	for loops := 0; ; loops++ {
		drain()
		if st.State == JobRunning {
			var ar jobs.AssignResult
			in := jobs.AssignInput{Spec: spec, InFlight: st.InFlight, Seq: st.Seq, Start: start}
			if err := workflow.ExecuteActivity(sctx, ja.JobAssign, in).Get(ctx, &ar); err != nil {
				return progress(), err
			}
			start = false
			st.InFlight = append(st.InFlight, ar.Assigned...)
			st.Seq += len(ar.Assigned)
			st.Stats = ar.Stats
			st.InFlight = removeBatches(st.InFlight, ar.Done)
			st.Batches += len(ar.Done)
		}
		if len(st.InFlight) == 0 {
			switch {
			case st.State == JobCanceling:
				return finish(JobCanceled)
			case st.State == JobRunning && st.Stats.Queued == 0:
				return finish(JobCompleted)
			}
		}
		if st.State == JobPaused && len(st.InFlight) == 0 {
			// Nothing to wait for but a signal.
			sel := workflow.NewSelector(ctx)
			sel.AddReceive(resume, func(workflow.ReceiveChannel, bool) {})
			sel.AddReceive(cancel, func(workflow.ReceiveChannel, bool) {})
			sel.Select(ctx)
			continue
		}
		// Wait for batches, or for a signal.
		actx, stop := workflow.WithCancel(lctx)
		var aw jobs.AwaitResult
		var awErr error
		awaited := false
		sel := workflow.NewSelector(ctx)
		fut := workflow.ExecuteActivity(actx, ja.JobAwait, spec, st.InFlight)
		sel.AddFuture(fut, func(f workflow.Future) {
			awErr, awaited = f.Get(ctx, &aw), true
		})
		// A signal wakes the wait; drain() consumes it on the next loop.
		sel.AddReceive(pause, func(workflow.ReceiveChannel, bool) {})
		sel.AddReceive(cancel, func(workflow.ReceiveChannel, bool) {})
		sel.Select(ctx)
		if !awaited {
			stop()
			if awErr = fut.Get(ctx, &aw); awErr == nil {
				awaited = true
			}
		}
		var ce *temporal.CanceledError
		if awErr != nil && !errors.As(awErr, &ce) {
			return progress(), awErr
		}
		if awaited && awErr == nil {
			st.Stats = aw.Stats
			st.InFlight = removeBatches(st.InFlight, append(append(aw.Done, aw.Requeued...), aw.Failed...))
			st.Batches += len(aw.Done)
			st.Requeued += len(aw.Requeued)
			if len(aw.Failed) > 0 {
				st.FailedBatches += len(aw.Failed)
				st.LastError = aw.Error
			}
			if len(st.InFlight) == 0 && st.Stats.Queued == 0 && st.State == JobRunning &&
				workflow.GetVersion(ctx, pickupVersion, workflow.DefaultVersion, 1) == 1 {
				drain()
				if st.State == JobRunning {
					// Nothing in flight and nothing queued: nothing can add
					// URLs any more, so no JobAssign round before completing.
					return finish(JobCompleted)
				}
			}
		}
		if loops >= jobLoopsPerRun || workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			drain()
			st.Runs++
			upsertProgressMemo(ctx, st) // the next run starts with this memo
			return progress(), workflow.NewContinueAsNewError(ctx, CrawlJob, JobInput{Spec: spec, State: st})
		}
	}
}

// removeBatches returns inflight without the batches in ended.
func removeBatches(inflight, ended []jobs.BatchRef) []jobs.BatchRef {
	out := inflight[:0:0]
	for _, f := range inflight {
		if !slices.ContainsFunc(ended, func(b jobs.BatchRef) bool { return b.Batch == f.Batch }) {
			out = append(out, f)
		}
	}
	return out
}

// pickupVersion guards the shorter path of a job: the first JobAssign
// stores the job (no JobStart round trip) and waits a moment for its first
// batches, and a job with nothing in flight and nothing queued after
// JobAwait completes at once.
const pickupVersion = "pickup-v2"

// progressMemoVersion guards the memo upsert added to CrawlJob: a job
// started before it replays without it.
const progressMemoVersion = "progress-memo"

// JobProgressMemo is the part of a job's memo that counts its progress
// (the rest, set at submission, describes the job: seeds, follow, depth,
// max_pages, selectors).
func JobProgressMemo(st JobState) map[string]any {
	return map[string]any{
		"state": st.State, "pages_done": st.Stats.Recorded, "pages_failed": st.Stats.Failed,
		"pages_seen": st.Stats.Seen, "queued": st.Stats.Queued, "batches": st.Batches, "requeued": st.Requeued,
		"failed_batches": st.FailedBatches,
	}
}

// upsertProgressMemo writes the job's counters into its memo, so the Web
// UI shows them in the workflow's Memo tab.
func upsertProgressMemo(ctx workflow.Context, st JobState) {
	if workflow.GetVersion(ctx, progressMemoVersion, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return
	}
	if err := workflow.UpsertMemo(ctx, JobProgressMemo(st)); err != nil {
		workflow.GetLogger(ctx).Warn("could not update the job's memo", "error", err)
	}
}
