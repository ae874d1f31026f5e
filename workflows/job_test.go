package workflows

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/jobs"
)

func jobSpec() jobs.Spec {
	return jobs.Spec{ID: "j1", Group: testGroup, Seeds: []string{"http://127.0.0.1:1/"},
		Options: crawl.DefaultOptions(), BatchSize: 10, Timers: testTimers()}
}

// fakeJob is a frontier the mocked job activities share: queued URLs,
// batches in flight, and the order things happened in.
// newCrawlJobEnv is a test environment with CrawlJob and its activities
// registered (to be mocked).
func newCrawlJobEnv() *testsuite.TestWorkflowEnvironment {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(CrawlJob)
	env.RegisterActivity(ja.JobStart)
	env.RegisterActivity(ja.JobAssign)
	env.RegisterActivity(ja.JobAwait)
	env.RegisterActivity(ja.JobDrain)
	env.RegisterActivity(ja.JobControl)
	env.RegisterActivity(ja.JobReopen)
	return env
}

type fakeJob struct {
	mu                    sync.Mutex // the activities run on their own goroutines
	queued, recorded, seq int
	assigns, awaits       int
	drains                int
	controls              []string // JobControl's states, in order
	reopens               []jobs.ReopenInput
}

// controlled returns the control states written, in order.
func (f *fakeJob) controlled() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.controls)
}

// count reads the counters under the lock.
func (f *fakeJob) count() (queued, recorded, assigns, awaits int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.queued, f.recorded, f.assigns, f.awaits
}

func newJobEnv(t *testing.T, fj *fakeJob, awaitDelay time.Duration) *testsuite.TestWorkflowEnvironment {
	env := newCrawlJobEnv()
	env.OnActivity(ja.JobStart, mock.Anything, mock.Anything).Return(
		func(context.Context, jobs.Spec) (jobs.Stats, error) {
			fj.mu.Lock()
			defer fj.mu.Unlock()
			return jobs.Stats{Seen: fj.queued, Queued: fj.queued}, nil
		})
	env.OnActivity(ja.JobAssign, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in jobs.AssignInput) (jobs.AssignResult, error) {
			fj.mu.Lock()
			defer fj.mu.Unlock()
			fj.assigns++
			var res jobs.AssignResult
			busy := map[string]bool{}
			for _, b := range in.InFlight {
				busy[b.Runner] = true
			}
			for _, r := range []string{crawler(1), crawler(2)} {
				if busy[r] || fj.queued == 0 {
					continue
				}
				n := min(fj.queued, in.Spec.BatchSize)
				fj.queued -= n
				res.Assigned = append(res.Assigned, jobs.BatchRef{Batch: "b" + string(rune('0'+in.Seq+len(res.Assigned))), Runner: r, Size: n})
			}
			res.Stats = jobs.Stats{Queued: fj.queued, Recorded: fj.recorded}
			return res, nil
		})
	await := func(drain bool) func(ctx context.Context, _ jobs.Spec, inflight []jobs.BatchRef) (jobs.AwaitResult, error) {
		return func(ctx context.Context, _ jobs.Spec, inflight []jobs.BatchRef) (jobs.AwaitResult, error) {
			fj.mu.Lock()
			if drain {
				fj.drains++
			} else {
				fj.awaits++
			}
			fj.mu.Unlock()
			if awaitDelay > 0 {
				select {
				case <-time.After(awaitDelay):
				case <-ctx.Done():
					return jobs.AwaitResult{}, ctx.Err()
				}
			}
			fj.mu.Lock()
			defer fj.mu.Unlock()
			var res jobs.AwaitResult
			if len(inflight) > 0 {
				b := inflight[0]
				res.Done = []jobs.BatchRef{b}
				fj.recorded += b.Size
				// Each finished batch found as many new links as it had
				// pages, until 50 pages were queued in all.
				if fj.recorded+fj.queued < 50 {
					fj.queued += b.Size
				}
			}
			res.Stats = jobs.Stats{Queued: fj.queued, Recorded: fj.recorded}
			return res, nil
		}
	}
	env.OnActivity(ja.JobAwait, mock.Anything, mock.Anything, mock.Anything).Return(await(false))
	env.OnActivity(ja.JobDrain, mock.Anything, mock.Anything, mock.Anything).Return(await(true))
	env.OnActivity(ja.JobControl, mock.Anything, mock.Anything, mock.Anything).Return(
		func(_ context.Context, job, state string) error {
			fj.mu.Lock()
			defer fj.mu.Unlock()
			fj.controls = append(fj.controls, state)
			return nil
		})
	env.OnActivity(ja.JobReopen, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in jobs.ReopenInput) (jobs.ReopenResult, error) {
			fj.mu.Lock()
			defer fj.mu.Unlock()
			fj.reopens = append(fj.reopens, in)
			return jobs.ReopenResult{Stats: jobs.Stats{Queued: fj.queued, Recorded: fj.recorded}}, nil
		})
	return env
}

func TestCrawlJobCompletesWhenFrontierEmptyAndNothingInFlight(t *testing.T) {
	fj := &fakeJob{queued: 15}
	env := newJobEnv(t, fj, 0)
	env.ExecuteWorkflow(CrawlJob, JobInput{Spec: jobSpec()})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var p JobProgress
	require.NoError(t, env.GetWorkflowResult(&p))
	assert.Equal(t, JobCompleted, p.State)
	queued, recorded, _, _ := fj.count()
	assert.Equal(t, 0, queued)
	assert.Equal(t, recorded, p.Stats.Recorded)
	assert.GreaterOrEqual(t, p.Stats.Recorded, 45, "links found were crawled too")
	assert.Empty(t, p.InFlight)
	assert.Equal(t, p.Seq, p.Batches, "every batch handed out finished")
}

// progressAt queries the job's progress.
func progressAt(t *testing.T, env *testsuite.TestWorkflowEnvironment) JobProgress {
	t.Helper()
	v, err := env.QueryWorkflow(QueryProgress)
	require.NoError(t, err)
	var p JobProgress
	require.NoError(t, v.Get(&p))
	return p
}

// canceledProgress checks the workflow ended canceled and returns the
// progress its error carries.
func canceledProgress(t *testing.T, env *testsuite.TestWorkflowEnvironment) JobProgress {
	t.Helper()
	require.True(t, env.IsWorkflowCompleted())
	err := env.GetWorkflowError()
	var ce *temporal.CanceledError
	require.True(t, errors.As(err, &ce), "want a canceled error (Temporal's status Canceled), got %v", err)
	var p JobProgress
	require.NoError(t, ce.Details(&p), "the canceled error carries the progress")
	return p
}

func TestCrawlJobPauseResumeCancel(t *testing.T) {
	t.Run("pause tells the Runners and stops assignment, resume continues", func(t *testing.T) {
		fj := &fakeJob{queued: 40}
		env := newJobEnv(t, fj, time.Second)
		var assignsWhilePaused int
		env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalPause, nil) }, 500*time.Millisecond)
		env.RegisterDelayedCallback(func() {
			p := progressAt(t, env)
			assert.Equal(t, JobPaused, p.State)
			assert.Equal(t, jobs.ControlPaused, p.Control, "the Runners were told")
			assert.Empty(t, p.InFlight, "its batches ended")
			assert.Equal(t, []string{jobs.ControlPaused}, fj.controlled())
			_, _, assignsWhilePaused, _ = fj.count()
		}, 10*time.Second)
		env.RegisterDelayedCallback(func() {
			_, _, assigns, _ := fj.count()
			assert.Equal(t, assignsWhilePaused, assigns, "no batch handed out while paused")
			env.SignalWorkflow(SignalResume, nil)
		}, time.Hour)
		env.ExecuteWorkflow(CrawlJob, JobInput{Spec: jobSpec()})
		require.NoError(t, env.GetWorkflowError())
		var p JobProgress
		require.NoError(t, env.GetWorkflowResult(&p))
		assert.Equal(t, JobCompleted, p.State)
		assert.Equal(t, jobs.ControlRunning, p.Control)
		queued, _, _, _ := fj.count()
		assert.Zero(t, queued)
		assert.Equal(t, []string{jobs.ControlPaused, jobs.ControlRunning}, fj.controlled(), "resumed before any batch went out")
		fj.mu.Lock()
		assert.Positive(t, fj.drains, "paused, it waited for its batches with JobDrain (an idle Runner does not wake it)")
		fj.mu.Unlock()
	})
	t.Run("a pause and resume within one wait change nothing", func(t *testing.T) {
		fj := &fakeJob{queued: 20}
		env := newJobEnv(t, fj, time.Second)
		env.RegisterDelayedCallback(func() {
			env.SignalWorkflow(SignalPause, nil)
			env.SignalWorkflow(SignalResume, nil)
		}, 500*time.Millisecond)
		env.ExecuteWorkflow(CrawlJob, JobInput{Spec: jobSpec()})
		require.NoError(t, env.GetWorkflowError())
		assert.Empty(t, fj.controlled(), "nothing to write: the store says running")
	})
	cancels := map[string]func(env *testsuite.TestWorkflowEnvironment){
		"Temporal's cancellation": func(env *testsuite.TestWorkflowEnvironment) { env.CancelWorkflow() },
		"the cancel signal":       func(env *testsuite.TestWorkflowEnvironment) { env.SignalWorkflow(SignalCancel, nil) },
	}
	for name, cancel := range cancels {
		t.Run(name+" tells the Runners, waits for the batches in flight, ends Canceled", func(t *testing.T) {
			fj := &fakeJob{queued: 40}
			env := newJobEnv(t, fj, time.Second)
			var assignsAtCancel int
			env.RegisterDelayedCallback(func() {
				_, _, assignsAtCancel, _ = fj.count()
				cancel(env)
			}, 1500*time.Millisecond)
			env.ExecuteWorkflow(CrawlJob, JobInput{Spec: jobSpec()})
			p := canceledProgress(t, env)
			assert.Equal(t, JobCanceled, p.State)
			assert.Equal(t, jobs.ControlCancelled, p.Control)
			assert.Empty(t, p.InFlight, "it waited for the batches in flight")
			assert.False(t, p.FinishedAt.IsZero())
			queued, recorded, assigns, _ := fj.count()
			assert.Equal(t, assignsAtCancel, assigns)
			assert.Positive(t, queued, "the rest of the frontier was not crawled")
			assert.Equal(t, recorded, p.Stats.Recorded)
			assert.Equal(t, []string{jobs.ControlCancelled}, fj.controlled())
		})
	}
	t.Run("cancel of a paused job", func(t *testing.T) {
		fj := &fakeJob{queued: 40}
		env := newJobEnv(t, fj, time.Second)
		env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalPause, nil) }, 500*time.Millisecond)
		env.RegisterDelayedCallback(func() { env.CancelWorkflow() }, time.Minute)
		env.ExecuteWorkflow(CrawlJob, JobInput{Spec: jobSpec()})
		p := canceledProgress(t, env)
		assert.Equal(t, JobCanceled, p.State)
		assert.Equal(t, []string{jobs.ControlPaused, jobs.ControlCancelled}, fj.controlled())
	})
}

// A new run of an ended job (resume of a cancelled job, rerun --failed)
// sets its control state back to running and queues its failed URLs first,
// then crawls on from the last run's counters and batch numbers.
func TestCrawlJobReopened(t *testing.T) {
	fj := &fakeJob{queued: 10, recorded: 30, seq: 3}
	env := newJobEnv(t, fj, 0)
	var firstAssign *jobs.AssignInput
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, args converter.EncodedValues) {
		if info.ActivityType.Name == "JobAssign" && firstAssign == nil {
			var in jobs.AssignInput
			require.NoError(t, args.Get(&in))
			firstAssign = &in
			fj.mu.Lock()
			assert.Len(t, fj.reopens, 1, "reopened before the first batch")
			fj.mu.Unlock()
		}
	})
	last := JobState{Started: true, State: JobCanceled, Seq: 3, Batches: 3, Stats: jobs.Stats{Recorded: 30, Queued: 10},
		Control: jobs.ControlCancelled, StartedAt: time.Unix(1, 0), FinishedAt: time.Unix(2, 0)}
	env.ExecuteWorkflow(CrawlJob, JobInput{Spec: jobSpec(), State: last, Reopen: &Reopen{Failed: true}})
	require.NoError(t, env.GetWorkflowError())
	var p JobProgress
	require.NoError(t, env.GetWorkflowResult(&p))
	assert.Equal(t, JobCompleted, p.State)
	assert.Equal(t, 1, p.Reruns)
	assert.Greater(t, p.Stats.Recorded, 30)
	assert.Greater(t, p.Batches, 3, "the batches of the run before count")
	require.NotNil(t, firstAssign)
	assert.Equal(t, 3, firstAssign.Seq, "batch numbers go on from the last run's")
	assert.False(t, firstAssign.Start, "the job is in the store: no JobStart")
	assert.Equal(t, []jobs.ReopenInput{{Spec: jobSpec(), Failed: true}}, fj.reopens)
	assert.Empty(t, fj.controlled(), "JobReopen set it running")
	assert.True(t, p.StartedAt.After(time.Unix(2, 0)), "this run's start")
}

func TestCrawlJobContinuesAsNewWithItsState(t *testing.T) {
	fj := &fakeJob{queued: 1 << 20}
	env := newJobEnv(t, fj, 0)
	env.ExecuteWorkflow(CrawlJob, JobInput{Spec: jobSpec()})
	require.True(t, env.IsWorkflowCompleted())
	err := env.GetWorkflowError()
	require.Error(t, err)
	assert.True(t, workflow.IsContinueAsNewError(err), "%v", err)
	_, _, _, awaits := fj.count()
	assert.LessOrEqual(t, awaits, jobLoopsPerRun+1, "the run is bounded")
}

func TestCrawlJobRequeuedBatchesLeaveFlight(t *testing.T) {
	env := newCrawlJobEnv()
	env.OnActivity(ja.JobStart, mock.Anything, mock.Anything).Return(jobs.Stats{Queued: 5}, nil)
	assigned := false
	env.OnActivity(ja.JobAssign, mock.Anything, mock.Anything).Return(
		func(context.Context, jobs.AssignInput) (jobs.AssignResult, error) {
			if assigned {
				return jobs.AssignResult{Stats: jobs.Stats{Queued: 0, Recorded: 5}}, nil
			}
			assigned = true
			return jobs.AssignResult{Assigned: []jobs.BatchRef{{Batch: "b0", Runner: crawler(2), Size: 5}}}, nil
		})
	env.OnActivity(ja.JobAwait, mock.Anything, mock.Anything, mock.Anything).Return(
		jobs.AwaitResult{Requeued: []jobs.BatchRef{{Batch: "b0", Runner: crawler(2)}}, Stats: jobs.Stats{Queued: 0, Recorded: 5}}, nil)
	env.ExecuteWorkflow(CrawlJob, JobInput{Spec: jobSpec()})
	require.NoError(t, env.GetWorkflowError())
	var p JobProgress
	require.NoError(t, env.GetWorkflowResult(&p))
	assert.Equal(t, JobCompleted, p.State)
	assert.Equal(t, 1, p.Requeued)
	assert.Equal(t, 0, p.Batches)
}

// A one-page job: the first JobAssign stores the job, hands out its batch
// and sees it done; the job completes without a JobStart or JobAwait round.
func TestCrawlJobSmallJobCompletesAfterOneActivity(t *testing.T) {
	env := newCrawlJobEnv()
	var calls []jobs.AssignInput
	env.OnActivity(ja.JobAssign, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in jobs.AssignInput) (jobs.AssignResult, error) {
			calls = append(calls, in)
			b := jobs.BatchRef{Batch: "b0", Runner: crawler(1), Size: 1}
			return jobs.AssignResult{Assigned: []jobs.BatchRef{b}, Done: []jobs.BatchRef{b}, Stats: jobs.Stats{Seen: 1, Recorded: 1}}, nil
		})
	env.ExecuteWorkflow(CrawlJob, JobInput{Spec: jobSpec()})
	require.NoError(t, env.GetWorkflowError())
	var p JobProgress
	require.NoError(t, env.GetWorkflowResult(&p))
	assert.Equal(t, JobCompleted, p.State)
	assert.Equal(t, 1, p.Batches)
	assert.Empty(t, p.InFlight)
	require.Len(t, calls, 1, "one activity for the whole job")
	assert.True(t, calls[0].Start, "the first JobAssign stores the job")
	env.AssertNotCalled(t, "JobStart", mock.Anything, mock.Anything)
	env.AssertNotCalled(t, "JobAwait", mock.Anything, mock.Anything, mock.Anything)
}

// A new job's first JobAssign (the one that stores it) runs as a local
// activity, in the worker that runs the workflow's first task: no round
// trip to the server before the job is stored and its first batch handed
// out. The JobAssigns after it are activities.
func TestCrawlJobStartsWithALocalJobAssign(t *testing.T) {
	env := newCrawlJobEnv()
	var local, remote []bool // Start of each JobAssign, by kind
	env.SetOnLocalActivityStartedListener(func(info *activity.Info, _ context.Context, args []any) {
		if info.ActivityType.Name == "JobAssign" {
			local = append(local, args[0].(jobs.AssignInput).Start)
		}
	})
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, args converter.EncodedValues) {
		if info.ActivityType.Name == "JobAssign" {
			var in jobs.AssignInput
			require.NoError(t, args.Get(&in))
			remote = append(remote, in.Start)
		}
	})
	calls := 0
	env.OnActivity(ja.JobAssign, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in jobs.AssignInput) (jobs.AssignResult, error) {
			calls++
			if calls == 1 {
				return jobs.AssignResult{Stats: jobs.Stats{Seen: 2, Queued: 2}}, nil // nothing handed out yet
			}
			b := jobs.BatchRef{Batch: "b0", Runner: crawler(1), Size: 2}
			return jobs.AssignResult{Assigned: []jobs.BatchRef{b}, Done: []jobs.BatchRef{b}, Stats: jobs.Stats{Seen: 2, Recorded: 2}}, nil
		})
	env.OnActivity(ja.JobAwait, mock.Anything, mock.Anything, mock.Anything).Return(jobs.AwaitResult{Idle: true, Stats: jobs.Stats{Seen: 2, Queued: 2}}, nil).Maybe()
	env.ExecuteWorkflow(CrawlJob, JobInput{Spec: jobSpec()})
	require.NoError(t, env.GetWorkflowError())
	assert.Equal(t, []bool{true}, local, "the job's first JobAssign, local")
	assert.NotEmpty(t, remote, "the next JobAssigns are activities")
	assert.NotContains(t, remote, true)
}
