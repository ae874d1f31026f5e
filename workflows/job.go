package workflows

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/batoncrawl/baton/activities/cluster"
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
// and their cluster.
func JobQueue(group string) string { return fmt.Sprintf("baton.%s.jobs", group) }

// JobTaskTimeout is the workflow task timeout a crawl job is started with
// (client.StartWorkflowOptions.WorkflowTaskTimeout; a continue-as-new keeps
// it). A job's workflow tasks run on any worker of the group, and its first
// step runs inside one (a local activity: JobAssign, which lingers up to a
// quarter of a second for the first batches): when that worker dies
// mid-task, Temporal gives the task to another worker after this timeout,
// where its default of 10 s stalled the job (and the re-queue of the dead
// Runner's batch) for 10 s. Local activities longer than this are kept
// alive by the SDK, which completes the task with a heartbeat first.
const JobTaskTimeout = 2 * time.Second

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
	// Control is the control state the job's Runners read in the job
	// store (jobs.ControlRunning, ControlPaused, ControlCancelled) as the
	// workflow last wrote it; "running" for a new job, which has no row
	// yet. Empty for a job started before control-v1, whose Runners are
	// not told of a pause.
	Control string `json:"control,omitempty"`
	// Reruns counts the runs started by `baton resume` of a cancelled
	// job or `baton rerun`.
	Reruns int `json:"reruns,omitempty"`
}

// JobInput is a CrawlJob's input.
type JobInput struct {
	Spec  jobs.Spec `json:"spec"`
	State JobState  `json:"state"`
	// Reopen starts a new run of a job that ended (cancelled or
	// completed), from State (its last run's): `baton resume` of a
	// cancelled job, `baton rerun` (Failed: its failed URLs queued again).
	Reopen *Reopen `json:"reopen,omitempty"`
}

// Reopen is how a new run of an ended job starts.
type Reopen struct {
	Failed bool `json:"failed,omitempty"`
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
// none, its unfinished URLs are re-queued. The "progress" query reads its
// counters at any time.
//
// Pause and resume are signals; cancel is Temporal's cancellation (the
// "cancel" signal does the same, for older clients). Each writes the job's
// control state to the job store (JobControl) before anything else, and
// the Runners holding its batches read it there within a fraction of a
// second: paused or cancelled, they stop fetching, give back what they did
// not fetch and end their batches. A paused job waits for resume (or
// cancel) once its batches ended; a cancelled one waits for its batches to
// end, with a context that the cancellation does not reach, then ends
// canceled (Temporal's status Canceled; the error's details and the memo
// carry its progress).
func CrawlJob(ctx workflow.Context, in JobInput) (JobProgress, error) {
	if workflow.GetVersion(ctx, controlVersion, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return crawlJobV1(ctx, in)
	}
	spec, st := in.Spec, in.State
	m := cluster.Member{Group: spec.Group, Timers: spec.Timers}
	sctx := withShort(ctx, m)
	lctx := withJobWait(ctx, spec)
	progress := func() JobProgress { return JobProgress{ID: spec.ID, JobState: st} }
	if err := workflow.SetQueryHandler(ctx, QueryProgress, func() (JobProgress, error) { return progress(), nil }); err != nil {
		return progress(), err
	}
	memo := func(ctx workflow.Context) {
		if err := workflow.UpsertMemo(ctx, JobProgressMemo(st)); err != nil {
			workflow.GetLogger(ctx).Warn("could not update the job's memo", "error", err)
		}
	}
	pause := workflow.GetSignalChannel(ctx, SignalPause)
	resume := workflow.GetSignalChannel(ctx, SignalResume)
	cancelSig := workflow.GetSignalChannel(ctx, SignalCancel)
	// drain reads the signals received; a change of state is written to
	// the memo at once (the store's control state follows in the loop).
	drain := func() {
		was := st.State
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
		for cancelSig.ReceiveAsync(nil) {
			st.State = JobCanceling
		}
		if ctx.Err() != nil {
			st.State = JobCanceling // Temporal's cancellation
		}
		if st.State != was {
			memo(ctx)
		}
	}
	// setControl writes the control state for the job's Runners, unless
	// the store has it already; never interrupted by a cancellation.
	setControl := func(state string) error {
		if st.Control == state || st.Control == "" && state == jobs.ControlRunning && in.Reopen == nil {
			return nil
		}
		dctx, _ := workflow.NewDisconnectedContext(sctx)
		if err := workflow.ExecuteActivity(dctx, ja.JobControl, spec.ID, state).Get(dctx, nil); err != nil {
			return err
		}
		st.Control = state
		return nil
	}
	applyAwait := func(aw jobs.AwaitResult) {
		st.Stats = aw.Stats
		st.InFlight = removeBatches(st.InFlight, append(append(aw.Done, aw.Requeued...), aw.Failed...))
		st.Batches += len(aw.Done)
		st.Requeued += len(aw.Requeued)
		if len(aw.Failed) > 0 {
			st.FailedBatches += len(aw.Failed)
			st.LastError = aw.Error
		}
	}
	// canceled ends the job: its Runners are told, its batches in flight
	// end (they give back what they did not fetch), and it returns a
	// canceled error, so that Temporal shows it Canceled. The context is
	// disconnected: Temporal's cancellation does not cut the drain short.
	canceled := func() (JobProgress, error) {
		dctx, _ := workflow.NewDisconnectedContext(ctx)
		st.State = JobCanceling
		memo(dctx)
		if err := setControl(jobs.ControlCancelled); err != nil {
			return progress(), err
		}
		wctx := withJobWait(dctx, spec)
		for len(st.InFlight) > 0 {
			var aw jobs.AwaitResult
			if err := workflow.ExecuteActivity(wctx, ja.JobDrain, spec, st.InFlight).Get(dctx, &aw); err != nil {
				return progress(), err
			}
			applyAwait(aw)
		}
		st.State, st.FinishedAt = JobCanceled, workflow.Now(dctx)
		memo(dctx)
		return progress(), temporal.NewCanceledError(progress())
	}
	finish := func(state string) (JobProgress, error) {
		st.State, st.FinishedAt = state, workflow.Now(ctx)
		memo(ctx)
		return progress(), nil
	}
	start := false // the first JobAssign stores the job (one activity less before the first page)
	switch {
	case in.Reopen != nil:
		// A new run of a job that ended: its control state back to
		// running (and its failed URLs queued again), before any batch.
		st.State, st.StartedAt, st.FinishedAt, st.Control = JobRunning, workflow.Now(ctx), time.Time{}, ""
		st.Reruns++
		memo(ctx)
		var rr jobs.ReopenResult
		dctx, _ := workflow.NewDisconnectedContext(sctx)
		if err := workflow.ExecuteActivity(dctx, ja.JobReopen, jobs.ReopenInput{Spec: spec, Failed: in.Reopen.Failed}).Get(dctx, &rr); err != nil {
			return progress(), err
		}
		st.Started, st.Stats, st.Control = true, rr.Stats, jobs.ControlRunning
	case !st.Started:
		st.State, st.StartedAt, st.Control = JobRunning, workflow.Now(ctx), jobs.ControlRunning
		st.Started, start = true, true
	}
	for loops := 0; ; loops++ {
		drain()
		if st.State == JobCanceling {
			return canceled()
		}
		want := jobs.ControlRunning
		if st.State == JobPaused {
			want = jobs.ControlPaused
		}
		if err := setControl(want); err != nil {
			return progress(), err
		}
		if st.State == JobRunning {
			var ar jobs.AssignResult
			in := jobs.AssignInput{Spec: spec, InFlight: st.InFlight, Seq: st.Seq, Start: start}
			// Not cut short by a cancellation: the batches it hands out
			// must be known, to wait for them.
			dctx, _ := workflow.NewDisconnectedContext(sctx)
			var f workflow.Future
			if start && workflow.GetVersion(ctx, localStartVersion, workflow.DefaultVersion, 1) == 1 {
				// The job's first step runs in the worker that started
				// the workflow, at once: no round trip to the server
				// before the job is stored and robots.txt asked.
				f = workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(dctx, localStartOptions(m)), ja.JobAssign, in)
			} else {
				f = workflow.ExecuteActivity(dctx, ja.JobAssign, in)
			}
			if err := f.Get(dctx, &ar); err != nil {
				return progress(), err
			}
			start = false
			st.InFlight = append(st.InFlight, ar.Assigned...)
			st.Seq += len(ar.Assigned)
			st.Stats = ar.Stats
			st.InFlight = removeBatches(st.InFlight, ar.Done)
			st.Batches += len(ar.Done)
			if len(st.InFlight) == 0 && st.Stats.Queued == 0 {
				if drain(); st.State == JobRunning {
					return finish(JobCompleted)
				}
				continue
			}
		}
		if st.State == JobPaused && len(st.InFlight) == 0 {
			// Nothing to wait for but a signal or the cancellation.
			sel := workflow.NewSelector(ctx)
			sel.AddReceive(resume, func(workflow.ReceiveChannel, bool) {})
			sel.AddReceive(cancelSig, func(workflow.ReceiveChannel, bool) {})
			sel.AddReceive(ctx.Done(), func(workflow.ReceiveChannel, bool) {})
			sel.Select(ctx)
			continue
		}
		// Wait for batches (for an idle Runner too, while running), or for
		// a signal or the cancellation (which ends the wait: its future
		// resolves canceled).
		actx, stop := workflow.WithCancel(lctx)
		wait := ja.JobAwait
		if st.State != JobRunning {
			wait = ja.JobDrain
		}
		var aw jobs.AwaitResult
		var awErr error
		awaited := false
		sel := workflow.NewSelector(ctx)
		fut := workflow.ExecuteActivity(actx, wait, spec, st.InFlight)
		sel.AddFuture(fut, func(f workflow.Future) {
			awErr, awaited = f.Get(ctx, &aw), true
		})
		// A signal wakes the wait; drain() consumes it on the next loop.
		if st.State == JobRunning {
			sel.AddReceive(pause, func(workflow.ReceiveChannel, bool) {})
		} else {
			sel.AddReceive(resume, func(workflow.ReceiveChannel, bool) {})
		}
		sel.AddReceive(cancelSig, func(workflow.ReceiveChannel, bool) {})
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
			applyAwait(aw)
			if len(st.InFlight) == 0 && st.Stats.Queued == 0 && st.State == JobRunning {
				if drain(); st.State == JobRunning {
					// Nothing in flight and nothing queued: nothing can add
					// URLs any more, so no JobAssign round before completing.
					return finish(JobCompleted)
				}
			}
		}
		if loops >= jobLoopsPerRun || workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			if drain(); st.State == JobCanceling {
				return canceled()
			}
			st.Runs++
			memo(ctx) // the next run starts with this memo
			return progress(), workflow.NewContinueAsNewError(ctx, CrawlJob, JobInput{Spec: spec, State: st})
		}
	}
}

// withJobWait returns ctx with the options of JobAwait and JobDrain.
func withJobWait(ctx workflow.Context, spec jobs.Spec) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		// JobAwait heartbeats at least every 2 × check_crawler_state; when
		// the worker running it is killed, another takes over after this.
		StartToCloseTimeout: time.Hour, HeartbeatTimeout: max(3*time.Second, 6*spec.Timers.CheckCrawlerState),
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: 100 * time.Millisecond, MaximumInterval: 2 * time.Second,
			NonRetryableErrorTypes: []string{jobs.ErrTypeBadJob}},
	})
}

// controlVersion guards CrawlJob's pause, resume and cancel through the
// job store (JobControl, JobDrain, a canceled end): a job started before
// it replays on crawlJobV1, whose command sequence it recorded.
const controlVersion = "control-v1"

// ControlVersionAttr is the value of Temporal's TemporalChangeVersion
// search attribute of a CrawlJob run that has controlVersion: the CLI
// cancels such a run with Temporal's cancellation, an older one with the
// "cancel" signal.
const ControlVersionAttr = controlVersion + "-1"

// crawlJobV1 is CrawlJob as it was before controlVersion, kept unchanged
// for the runs started before it (their histories replay on it): pause
// and cancel only stop handing out batches, a cancelled job completes.
func crawlJobV1(ctx workflow.Context, in JobInput) (JobProgress, error) {
	spec, st := in.Spec, in.State
	m := cluster.Member{Group: spec.Group, Timers: spec.Timers}
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

// localStartVersion guards a new job's first JobAssign as a local
// activity (localStartOptions): a job started before it replays its first
// JobAssign as an activity.
const localStartVersion = "local-start"

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
