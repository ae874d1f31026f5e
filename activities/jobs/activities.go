package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/batoncrawl/baton/activities/metadata"
	"github.com/batoncrawl/baton/activities/telemetry"
	"github.com/batoncrawl/baton/roles"
)

// Activities are the activities of the CrawlJob workflow. They read the
// cluster's control plane (who is a live, idle Runner; who holds which
// batch at which epoch) from the metadata store and keep the job's data
// in the job store. Tests register (*Activities)(nil).Method. Safe for
// concurrent use.
type Activities struct {
	// Store is the job store (data plane), as the job's supervisor uses
	// it.
	Store SupervisorStore
	// Meta is the cluster metadata (ZooKeeper); Root its root znode.
	Meta metadata.Store
	Root string
	// Timers are the group's timer profile (the worker's): they apply to
	// a job whose spec sets none.
	Timers roles.Timers
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Log is the worker's logger.
	Log *slog.Logger
	// Metrics gets the queued URLs of the jobs supervised here at each
	// read of their counters (nil: none).
	Metrics *telemetry.Metrics
	// Local is this worker's own Runner (zero: none): it gets the
	// robots.txt of a new job's seeds while the job is stored and its
	// first batch handed out, and the seeds' batch goes to it when it is
	// idle (see start).
	Local Local
	// StartLinger is how long a new job's first JobAssign waits for its
	// first batches to end, so that a small job completes without a
	// JobAwait round trip; zero means DefaultStartLinger.
	StartLinger time.Duration
}

// Local names the Runner of the worker process that the job's activities
// run in (Activities.Local).
type Local struct {
	// Group and Name are the worker's group and member name.
	Group, Name string
	// Runner readies the worker for a batch it is about to be handed
	// (BatchRunner.Warm); nil: no Local.
	Runner Warmer
}

// Warmer readies a worker's Runner for the first batch of a new job, of
// the given seeds, before the batch's Task reaches it or another
// worker's Runner (BatchRunner.Warm); stored is closed once the job is in
// the store (nil: it is). Warm must not wait; the channel it returns is
// closed once a batch of the seeds may be handed out.
type Warmer interface {
	Warm(ctx context.Context, spec Spec, seeds []string, stored <-chan struct{}) <-chan struct{}
}

func (a *Activities) startLinger() time.Duration {
	if a.StartLinger > 0 {
		return a.StartLinger
	}
	return DefaultStartLinger
}

func (a *Activities) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

func (a *Activities) log(ctx context.Context, args ...any) *slog.Logger {
	l := a.Log
	if l == nil {
		l = slog.Default()
	}
	if activity.IsActivity(ctx) {
		info := activity.GetInfo(ctx)
		l = l.With("activity", info.ActivityType.Name, "workflow_id", info.WorkflowExecution.ID, "attempt", info.Attempt)
	}
	return l.With(args...)
}

func (a *Activities) store() (SupervisorStore, error) {
	if a.Store == nil {
		return nil, errors.New("no job store configured (worker --store or --data-dir)")
	}
	return a.Store, nil
}

func badJob(format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	return temporal.NewNonRetryableApplicationError("invalid job: "+err.Error(), ErrTypeBadJob, err)
}

// JobStart stores the job with its normalised seeds in the job store.
// Idempotent.
func (a *Activities) JobStart(ctx context.Context, spec Spec) (Stats, error) {
	if err := spec.Validate(); err != nil {
		return Stats{}, badJob("%w", err)
	}
	js, err := a.store()
	if err != nil {
		return Stats{}, err
	}
	if spec.SeedsStored > 0 {
		// The submitter wrote the job and its seeds into the store: it
		// must be there (else this worker is on another store).
		if _, err := js.Spec(ctx, spec.ID); errors.Is(err, ErrNoJob) {
			return Stats{}, badJob("its %d seeds were written by the submitter to the job store, but %s has no job %s: "+
				"submit with the workers' --store/--data-dir", spec.SeedsStored, js.Identity(), spec.ID)
		} else if err != nil {
			return Stats{}, err
		}
	}
	seeds, err := spec.SeedEntries(nil)
	if err != nil {
		return Stats{}, badJob("%w", err)
	}
	st, err := js.CreateJob(ctx, spec, seeds)
	if errors.Is(err, ErrJobExists) {
		return st, badJob("%w: choose another job ID", err)
	}
	if err == nil {
		a.Metrics.Queued(spec.ID, st.Queued)
	}
	return st, err
}

// JobControl records the job's control state in the job store (running,
// paused or cancelled: see Store.SetControl); the Runners crawling it read
// it. Idempotent.
func (a *Activities) JobControl(ctx context.Context, job, state string) error {
	if err := ValidControl(state); err != nil {
		return badJob("%w", err)
	}
	js, err := a.store()
	if err != nil {
		return err
	}
	if err := js.SetControl(ctx, job, state); err != nil {
		return err
	}
	a.log(ctx, "job", job).Info("job control state written", "state", state)
	return nil
}

// ReopenInput is a new run of a job that ended (completed or cancelled):
// `baton resume` of a cancelled job, `baton rerun`.
type ReopenInput struct {
	Spec Spec `json:"spec"`
	// Failed queues the job's failed URLs again (Store.RequeueFailed).
	Failed bool `json:"failed,omitempty"`
}

// ReopenResult is what JobReopen did.
type ReopenResult struct {
	Requeued int   `json:"requeued"` // failed URLs queued again
	Stats    Stats `json:"stats"`
}

// JobReopen makes a job that ended run again: it stores the job if it is
// not (a job cancelled before its first batch), sets its control state to
// running, and with Failed queues its failed URLs again. Idempotent: a
// retry finds no failed page left to queue (none is recorded before the
// run hands out its first batch).
func (a *Activities) JobReopen(ctx context.Context, in ReopenInput) (ReopenResult, error) {
	var res ReopenResult
	js, err := a.store()
	if err != nil {
		return res, err
	}
	if _, err := a.JobStart(ctx, in.Spec); err != nil {
		return res, err
	}
	if err := js.SetControl(ctx, in.Spec.ID, ControlRunning); err != nil {
		return res, err
	}
	if in.Failed {
		if res.Requeued, err = js.RequeueFailed(ctx, in.Spec.ID); err != nil {
			return res, err
		}
	}
	if res.Stats, err = js.Stats(ctx, in.Spec.ID); err != nil {
		return res, err
	}
	a.log(ctx, "job", in.Spec.ID).Info("job reopened", "failed_requeued", res.Requeued, "queued", res.Stats.Queued)
	return res, nil
}

// timers returns the job's timers: its spec's, else the group's.
func (a *Activities) timers(spec Spec) roles.Timers {
	if !spec.Timers.IsZero() {
		return spec.Timers
	}
	if !a.Timers.IsZero() {
		return a.Timers
	}
	return roles.DefaultTimers()
}
