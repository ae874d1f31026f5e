package workflows

import (
	"errors"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/batoncrawl/baton/activities/cluster"
	"github.com/batoncrawl/baton/activities/jobs"
)

// jobFlow is one run of a CrawlJob workflow: the job's spec, the state
// that survives continue-as-new, the signals it reads and the steps its
// loop is made of. CrawlJob and crawlJobV1 (the runs started before
// controlVersion) share it; v1 keeps crawlJobV1's command sequence.
type jobFlow struct {
	ctx  workflow.Context
	sctx workflow.Context // the short activities' options
	lctx workflow.Context // JobAwait's and JobDrain's options
	m    cluster.Member
	spec jobs.Spec
	st   JobState
	// reopen starts a new run of an ended job (JobInput.Reopen).
	reopen *Reopen

	pause, resume, cancelSig workflow.ReceiveChannel
	// v1: the run replays on crawlJobV1 (no control state, no memo when a
	// signal changes the state, no Temporal cancellation).
	v1 bool
}

// newJobFlow reads the job's input and answers the progress query.
func newJobFlow(ctx workflow.Context, in JobInput, v1 bool) (*jobFlow, error) {
	f := &jobFlow{ctx: ctx, spec: in.Spec, st: in.State, reopen: in.Reopen, v1: v1,
		m: cluster.Member{Group: in.Spec.Group, Timers: in.Spec.Timers}}
	f.sctx = withShort(ctx, f.m)
	f.lctx = withJobWait(ctx, f.spec)
	if err := workflow.SetQueryHandler(ctx, QueryProgress, func() (JobProgress, error) { return f.progress(), nil }); err != nil {
		return f, err
	}
	f.pause = workflow.GetSignalChannel(ctx, SignalPause)
	f.resume = workflow.GetSignalChannel(ctx, SignalResume)
	f.cancelSig = workflow.GetSignalChannel(ctx, SignalCancel)
	return f, nil
}

func (f *jobFlow) progress() JobProgress { return NewJobProgress(f.spec, f.st) }

// memo writes the job's counters into its memo.
func (f *jobFlow) memo(ctx workflow.Context) {
	if err := workflow.UpsertMemo(ctx, JobProgressMemo(f.st)); err != nil {
		workflow.GetLogger(ctx).Warn("could not update the job's memo", "error", err)
	}
}

// readSignals reads the signals received (and Temporal's cancellation);
// a change of state is written to the memo at once (the store's control
// state follows in the loop).
func (f *jobFlow) readSignals() {
	was := f.st.State
	for f.pause.ReceiveAsync(nil) {
		if f.st.State == JobRunning {
			f.st.State = JobPaused
		}
	}
	for f.resume.ReceiveAsync(nil) {
		if f.st.State == JobPaused {
			f.st.State = JobRunning
		}
	}
	for f.cancelSig.ReceiveAsync(nil) {
		f.st.State = JobCanceling
	}
	if f.v1 {
		return
	}
	if f.ctx.Err() != nil {
		f.st.State = JobCanceling // Temporal's cancellation
	}
	if f.st.State != was {
		f.memo(f.ctx)
	}
}

// finish ends the job in state.
func (f *jobFlow) finish(state string) (JobProgress, error) {
	f.st.State, f.st.FinishedAt = state, workflow.Now(f.ctx)
	if f.v1 {
		upsertProgressMemo(f.ctx, f.st)
	} else {
		f.memo(f.ctx)
	}
	return f.progress(), nil
}

// applyAssign counts what JobAssign handed out and saw finished.
func (f *jobFlow) applyAssign(ar jobs.AssignResult) {
	f.st.InFlight = append(f.st.InFlight, ar.Assigned...)
	f.st.Seq += len(ar.Assigned)
	f.st.Stats, f.st.StatsAt = ar.Stats, workflow.Now(f.ctx)
	f.st.InFlight = removeBatches(f.st.InFlight, ar.Done)
	f.st.Batches += len(ar.Done)
}

// applyAwait counts the batches JobAwait or JobDrain saw end.
func (f *jobFlow) applyAwait(aw jobs.AwaitResult) {
	f.st.Stats, f.st.StatsAt = aw.Stats, workflow.Now(f.ctx)
	f.st.InFlight = removeBatches(f.st.InFlight, append(append(aw.Done, aw.Requeued...), aw.Failed...))
	f.st.Batches += len(aw.Done)
	f.st.Requeued += len(aw.Requeued)
	if len(aw.Failed) > 0 {
		f.st.FailedBatches += len(aw.Failed)
		f.st.LastError = aw.Error
	}
}

// nothingLeft says whether the job has nothing in flight and nothing
// queued: nothing can add URLs any more.
func (f *jobFlow) nothingLeft() bool { return len(f.st.InFlight) == 0 && f.st.Stats.Queued == 0 }

// waitForSignal waits, with nothing in flight, for resume or cancel (and,
// after controlVersion, Temporal's cancellation).
func (f *jobFlow) waitForSignal() {
	sel := workflow.NewSelector(f.ctx)
	sel.AddReceive(f.resume, func(workflow.ReceiveChannel, bool) {})
	sel.AddReceive(f.cancelSig, func(workflow.ReceiveChannel, bool) {})
	if !f.v1 {
		sel.AddReceive(f.ctx.Done(), func(workflow.ReceiveChannel, bool) {})
	}
	sel.Select(f.ctx)
}

// awaitBatches runs wait (JobAwait or JobDrain) for the batches in
// flight until one ends, or until a signal on wake or cancel (or
// Temporal's cancellation) ends the wait: its future then resolves
// canceled. ok says whether the wait answered; readSignals consumes the
// signal on the next loop.
func (f *jobFlow) awaitBatches(wait any, wake workflow.ReceiveChannel) (aw jobs.AwaitResult, ok bool, err error) {
	actx, stop := workflow.WithCancel(f.lctx)
	var awErr error
	awaited := false
	sel := workflow.NewSelector(f.ctx)
	fut := workflow.ExecuteActivity(actx, wait, f.spec, f.st.InFlight)
	sel.AddFuture(fut, func(wf workflow.Future) {
		awErr, awaited = wf.Get(f.ctx, &aw), true
	})
	sel.AddReceive(wake, func(workflow.ReceiveChannel, bool) {})
	sel.AddReceive(f.cancelSig, func(workflow.ReceiveChannel, bool) {})
	sel.Select(f.ctx)
	if !awaited {
		stop()
		if awErr = fut.Get(f.ctx, &aw); awErr == nil {
			awaited = true
		}
	}
	var ce *temporal.CanceledError
	if awErr != nil && !errors.As(awErr, &ce) {
		return aw, false, awErr
	}
	return aw, awaited && awErr == nil, nil
}

// continueAsNew ends this run and starts the next with the job's state.
func (f *jobFlow) continueAsNew() (JobProgress, error) {
	f.st.Runs++
	if f.v1 {
		upsertProgressMemo(f.ctx, f.st)
	} else {
		f.memo(f.ctx) // the next run starts with this memo
	}
	return f.progress(), workflow.NewContinueAsNewError(f.ctx, CrawlJob, JobInput{Spec: f.spec, State: f.st})
}

// runsTooLong says whether the run should continue as new.
func (f *jobFlow) runsTooLong(loops int) bool {
	return loops >= jobLoopsPerRun || workflow.GetInfo(f.ctx).GetContinueAsNewSuggested()
}
