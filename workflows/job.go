package workflows

import (
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

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
// mid-task, Temporal gives the task to another worker after this timeout
// (Temporal's default, 10 s, would stall the job and the re-queue of the
// dead Runner's batch as long). Local activities longer than this are
// kept alive by the SDK, which completes the task with a heartbeat first.
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
	// StatsAt is when Stats were read from the store (the workflow's
	// clock); zero for a job of a Baton that did not say.
	StatsAt  time.Time `json:"stats_at,omitempty"`
	Batches  int       `json:"batches"`  // batches finished
	Requeued int       `json:"requeued"` // batches re-queued after a Runner died with no backup
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
	// MaxPages is the job's cap on pages (--max-pages; 0: none), and
	// MaxPagesReached says whether the job took as many URLs as it allows:
	// links beyond it were not crawled.
	MaxPages        int  `json:"max_pages,omitempty"`
	MaxPagesReached bool `json:"max_pages_reached,omitempty"`
	JobState
}

// NewJobProgress is the progress of the job of spec in state st.
func NewJobProgress(spec jobs.Spec, st JobState) JobProgress {
	return JobProgress{ID: spec.ID, MaxPages: spec.MaxPages, MaxPagesReached: jobs.MaxPagesReached(spec, st.Stats), JobState: st}
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
	f, err := newJobFlow(ctx, in, false)
	if err != nil {
		return f.progress(), err
	}
	start, err := f.begin()
	if err != nil {
		return f.progress(), err
	}
	for loops := 0; ; loops++ {
		f.readSignals()
		if f.st.State == JobCanceling {
			return f.canceled()
		}
		want := jobs.ControlRunning
		if f.st.State == JobPaused {
			want = jobs.ControlPaused
		}
		if err := f.setControl(want); err != nil {
			return f.progress(), err
		}
		if f.st.State == JobRunning {
			if err := f.assign(start); err != nil {
				return f.progress(), err
			}
			start = false
			if f.nothingLeft() {
				if f.readSignals(); f.st.State == JobRunning {
					return f.finish(JobCompleted)
				}
				continue
			}
		}
		if f.st.State == JobPaused && len(f.st.InFlight) == 0 {
			f.waitForSignal() // nothing to wait for but a signal or the cancellation
			continue
		}
		// Wait for batches (for an idle Runner too, while running), or for
		// a signal or the cancellation.
		wait, wake := ja.JobAwait, f.pause
		if f.st.State != JobRunning {
			wait, wake = ja.JobDrain, f.resume
		}
		aw, ok, err := f.awaitBatches(wait, wake)
		if err != nil {
			return f.progress(), err
		}
		if ok {
			f.applyAwait(aw)
			if f.nothingLeft() && f.st.State == JobRunning {
				if f.readSignals(); f.st.State == JobRunning {
					// Nothing in flight and nothing queued: nothing can add
					// URLs any more, so no JobAssign round before completing.
					return f.finish(JobCompleted)
				}
			}
		}
		if f.runsTooLong(loops) {
			if f.readSignals(); f.st.State == JobCanceling {
				return f.canceled()
			}
			return f.continueAsNew()
		}
	}
}

// begin starts the job's run: a new run of a job that ended has its
// control state set back to running (and its failed URLs queued again)
// before any batch; a new job is stored by its first JobAssign (start:
// one activity less before the first page).
func (f *jobFlow) begin() (start bool, err error) {
	switch {
	case f.reopen != nil:
		f.st.State, f.st.StartedAt, f.st.FinishedAt, f.st.Control = JobRunning, workflow.Now(f.ctx), time.Time{}, ""
		f.st.Reruns++
		f.memo(f.ctx)
		var rr jobs.ReopenResult
		dctx, _ := workflow.NewDisconnectedContext(f.sctx)
		if err := workflow.ExecuteActivity(dctx, ja.JobReopen, jobs.ReopenInput{Spec: f.spec, Failed: f.reopen.Failed}).Get(dctx, &rr); err != nil {
			return false, err
		}
		f.st.Started, f.st.Stats, f.st.Control = true, rr.Stats, jobs.ControlRunning
	case !f.st.Started:
		f.st.State, f.st.StartedAt, f.st.Control = JobRunning, workflow.Now(f.ctx), jobs.ControlRunning
		f.st.Started, start = true, true
	}
	return start, nil
}

// setControl writes the control state for the job's Runners, unless the
// store has it already; never interrupted by a cancellation.
func (f *jobFlow) setControl(state string) error {
	if f.st.Control == state || f.st.Control == "" && state == jobs.ControlRunning && f.reopen == nil {
		return nil
	}
	dctx, _ := workflow.NewDisconnectedContext(f.sctx)
	if err := workflow.ExecuteActivity(dctx, ja.JobControl, f.spec.ID, state).Get(dctx, nil); err != nil {
		return err
	}
	f.st.Control = state
	return nil
}

// assign hands out batches to idle Runners (JobAssign). It is not cut
// short by a cancellation: the batches it hands out must be known, to
// wait for them.
func (f *jobFlow) assign(start bool) error {
	var ar jobs.AssignResult
	in := jobs.AssignInput{Spec: f.spec, InFlight: f.st.InFlight, Seq: f.st.Seq, Start: start}
	dctx, _ := workflow.NewDisconnectedContext(f.sctx)
	var fut workflow.Future
	if start && workflow.GetVersion(f.ctx, localStartVersion, workflow.DefaultVersion, 1) == 1 {
		// The job's first step runs in the worker that started the
		// workflow, at once: no round trip to the server before the job
		// is stored and robots.txt asked.
		fut = workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(dctx, localStartOptions(f.m)), ja.JobAssign, in)
	} else {
		fut = workflow.ExecuteActivity(dctx, ja.JobAssign, in)
	}
	if err := fut.Get(dctx, &ar); err != nil {
		return err
	}
	f.applyAssign(ar)
	return nil
}

// canceled ends the job: its Runners are told, its batches in flight end
// (they give back what they did not fetch), and it returns a canceled
// error, so that Temporal shows it Canceled. The context is disconnected:
// Temporal's cancellation does not cut the drain short.
func (f *jobFlow) canceled() (JobProgress, error) {
	dctx, _ := workflow.NewDisconnectedContext(f.ctx)
	f.st.State = JobCanceling
	f.memo(dctx)
	if err := f.setControl(jobs.ControlCancelled); err != nil {
		return f.progress(), err
	}
	wctx := withJobWait(dctx, f.spec)
	for len(f.st.InFlight) > 0 {
		var aw jobs.AwaitResult
		if err := workflow.ExecuteActivity(wctx, ja.JobDrain, f.spec, f.st.InFlight).Get(dctx, &aw); err != nil {
			return f.progress(), err
		}
		f.applyAwait(aw)
	}
	f.st.State, f.st.FinishedAt = JobCanceled, workflow.Now(dctx)
	f.memo(dctx)
	return f.progress(), temporal.NewCanceledError(f.progress())
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
	f, err := newJobFlow(ctx, in, true)
	if err != nil {
		return f.progress(), err
	}
	start := false // the first JobAssign stores the job (one activity less before the first page)
	if !f.st.Started {
		f.st.State, f.st.StartedAt = JobRunning, workflow.Now(ctx)
		if workflow.GetVersion(ctx, pickupVersion, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
			if err := workflow.ExecuteActivity(f.sctx, ja.JobStart, f.spec).Get(ctx, &f.st.Stats); err != nil {
				return f.progress(), err
			}
		} else {
			start = true
		}
		f.st.Started = true
	}
	for loops := 0; ; loops++ {
		f.readSignals()
		if f.st.State == JobRunning {
			var ar jobs.AssignResult
			in := jobs.AssignInput{Spec: f.spec, InFlight: f.st.InFlight, Seq: f.st.Seq, Start: start}
			if err := workflow.ExecuteActivity(f.sctx, ja.JobAssign, in).Get(ctx, &ar); err != nil {
				return f.progress(), err
			}
			start = false
			f.applyAssign(ar)
		}
		if len(f.st.InFlight) == 0 {
			switch {
			case f.st.State == JobCanceling:
				return f.finish(JobCanceled)
			case f.st.State == JobRunning && f.st.Stats.Queued == 0:
				return f.finish(JobCompleted)
			}
		}
		if f.st.State == JobPaused && len(f.st.InFlight) == 0 {
			f.waitForSignal() // nothing to wait for but a signal
			continue
		}
		aw, ok, err := f.awaitBatches(ja.JobAwait, f.pause) // or for a signal
		if err != nil {
			return f.progress(), err
		}
		if ok {
			f.applyAwait(aw)
			if f.nothingLeft() && f.st.State == JobRunning &&
				workflow.GetVersion(ctx, pickupVersion, workflow.DefaultVersion, 1) == 1 {
				if f.readSignals(); f.st.State == JobRunning {
					// Nothing in flight and nothing queued: nothing can add
					// URLs any more, so no JobAssign round before completing.
					return f.finish(JobCompleted)
				}
			}
		}
		if f.runsTooLong(loops) {
			f.readSignals()
			return f.continueAsNew()
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
