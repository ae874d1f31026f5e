package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/batoncrawl/baton/activities/metadata"
	"github.com/batoncrawl/baton/roles"
)

// This file watches a job's batches in flight (JobAwait, JobDrain): how
// each ends, and the re-queue of a batch whose holder died.

// JobAwait waits until a batch in flight finishes, fails or must be
// re-queued, or an idle Runner could take more work (while the frontier has
// some a new batch can take: SupervisorStore.Available), and returns at least every few seconds with fresh counters. A
// batch's state and holder come from the job store; ZooKeeper says whether
// the holder lives, and its watches (GroupState, the holders' Tasks, which
// a Runner writes when its batch ends) wake the wait. A batch whose holder
// is dead and that nobody claimed within twice the detection bound is
// fenced (epoch raised in the store, its Task marked terminate) and its
// unfinished URLs re-queued.
func (a *Activities) JobAwait(ctx context.Context, spec Spec, inflight []BatchRef) (AwaitResult, error) {
	return a.await(ctx, spec, inflight, a.now().Add(5*time.Second), true, awaitIdlePoll)
}

// JobDrain is JobAwait for a job that hands nothing out (paused, or
// cancelling): it waits for a batch in flight to end (or for its dead
// holder's batch to be re-queued), not for an idle Runner, and returns at
// least every few seconds with fresh counters.
func (a *Activities) JobDrain(ctx context.Context, spec Spec, inflight []BatchRef) (AwaitResult, error) {
	return a.await(ctx, spec, inflight, a.now().Add(5*time.Second), false, awaitIdlePoll)
}

// await is JobAwait until deadline (on the activities' clock); with
// handOut false (JobDrain), an idle Runner is no reason to return. While a
// Runner is idle, the frontier's counters are read every poll.
func (a *Activities) await(ctx context.Context, spec Spec, inflight []BatchRef, deadline time.Time, handOut bool, poll time.Duration) (AwaitResult, error) {
	js, err := a.store()
	if err != nil {
		return AwaitResult{}, err
	}
	w := &awaitWatch{a: a, js: js, spec: spec, log: a.log(ctx, "job", spec.ID), c: metadata.NewCluster(a.Meta, a.Root, spec.Group)}
	timers := a.timers(spec)
	w.orphanAfter = 2*timers.DetectionBound() + 2*time.Second
	// CrawlJob's heartbeat timeout for JobAwait is max(3 s, 6 ×
	// check_crawler_state) of the spec's timers: the waits stay well within.
	watchWait := min(2*timers.CheckCrawlerState, max(3*time.Second, 6*spec.Timers.CheckCrawlerState)/3)
	for {
		l, g, err := w.look(ctx, inflight)
		res := l.res
		if err != nil {
			return res, err
		}
		res.Stats, err = js.Stats(ctx, spec.ID)
		if err != nil {
			return res, err
		}
		a.Metrics.Queued(spec.ID, res.Stats.Queued)
		someIdle := handOut && len(a.idleRunners(ctx, w.c, g, l.tasks, inflight, 0)) > 0
		// An idle Runner gets a batch only of what a new batch can take:
		// not while every queued URL is of a host another batch holds in
		// full (the job's politeness), which would hand out empty batches
		// in a loop.
		if someIdle && res.Stats.Queued > 0 {
			if res.Idle, err = js.Available(ctx, spec.ID); err != nil {
				return res, err
			}
		}
		if len(res.Done) > 0 || len(res.Requeued) > 0 || len(res.Failed) > 0 || res.Idle ||
			a.now().After(deadline) || len(inflight) == 0 && (res.Stats.Queued == 0 || !handOut) {
			return res, nil
		}
		if activity.IsActivity(ctx) {
			activity.RecordHeartbeat(ctx, res.Stats)
		}
		// A busy Runner that becomes idle writes its Task: a watch wakes
		// us for a full look. The frontier is in the store, which has no
		// watch: while a Runner is idle, its counters alone are read often,
		// so that URLs found by the others reach it at once.
		if !someIdle {
			if _, err := metadata.WaitAny(ctx, watchWait, l.chans...); err != nil {
				return res, err
			}
			continue
		}
		if done, err := w.pollIdle(ctx, deadline, poll, l.chans, &res); done || err != nil {
			return res, err
		}
	}
}

// awaitWatch is a JobAwait's (or JobDrain's) view of one job.
type awaitWatch struct {
	a           *Activities
	js          SupervisorStore
	spec        Spec
	log         *slog.Logger
	c           *metadata.Cluster
	orphanAfter time.Duration
}

// awaitLook is one look at a job's batches in flight: how they ended, and
// the watches (GroupState, the holders' Tasks) that wake the next look.
type awaitLook struct {
	res      AwaitResult
	chans    []<-chan struct{}
	tasks    map[string]roles.Task
	versions map[string]int32
}

// look reads the group's state and every batch in flight, with watches.
// A batch's end is decided here alone, from its row in the job store
// (FinishBatch, FailBatch, Requeue): the Task znode its Runner writes when
// it ends only wakes the look.
func (w *awaitWatch) look(ctx context.Context, inflight []BatchRef) (*awaitLook, roles.GroupState, error) {
	l := &awaitLook{tasks: map[string]roles.Task{}, versions: map[string]int32{}}
	gd, _, gch, err := w.a.Meta.GetW(ctx, w.c.GroupPath())
	if err != nil {
		return l, roles.GroupState{}, err
	}
	g, err := roles.DecodeGroupState(gd)
	if err != nil {
		return l, g, &metadata.CorruptError{Path: w.c.GroupPath(), Err: err}
	}
	l.chans = append(l.chans, gch)
	ids := make([]string, len(inflight))
	for i, b := range inflight {
		ids[i] = b.Batch
	}
	infos, err := w.js.Batches(ctx, w.spec.ID, ids)
	if err != nil {
		return l, g, err
	}
	byID := map[string]BatchInfo{}
	for _, b := range infos {
		byID[b.ID] = b
	}
	for _, b := range inflight {
		info, ok := byID[b.Batch]
		if !ok {
			l.res.Done = append(l.res.Done, b) // never stored (an empty frontier)
			continue
		}
		switch info.State {
		case BatchDone:
			l.res.Done = append(l.res.Done, b)
		case BatchRequeued:
			l.res.Requeued = append(l.res.Requeued, b)
		case BatchFailed:
			l.res.Failed, l.res.Error = append(l.res.Failed, b), info.Error
		default:
			if err := w.running(ctx, l, b, info); err != nil {
				return l, g, err
			}
		}
	}
	return l, g, nil
}

// watchTask reads runner n's Task with a watch, once a look.
func (w *awaitWatch) watchTask(ctx context.Context, l *awaitLook, n string) {
	if _, ok := l.tasks[n]; ok || n == "" {
		return
	}
	td, v, ch, err := w.a.Meta.GetW(ctx, w.c.TaskPath(n))
	if err != nil {
		return
	}
	l.chans = append(l.chans, ch)
	if t, err := roles.DecodeTask(td); err == nil {
		l.tasks[n], l.versions[n] = t, v
	}
}

// running looks at a batch the store says is running: failed when its
// holder ended its Task without finishing it, re-queued when its holder
// is gone with nobody to take over.
func (w *awaitWatch) running(ctx context.Context, l *awaitLook, b BatchRef, info BatchInfo) error {
	holder := info.Holder
	w.watchTask(ctx, l, holder)
	w.watchTask(ctx, l, b.Runner)
	t, ok := l.tasks[holder]
	if ok && t.Job != nil && t.Job.Batch == b.Batch && t.Epoch == info.Epoch &&
		(t.RunningStatus == roles.TaskTerminate || t.RunningStatus == roles.TaskError) && t.Holder == holder {
		// The holder ended its Task without finishing the batch: it could
		// not run (it said why in result_detail).
		reason := fmt.Sprintf("runner %s ended batch %s as %s", holder, b.Batch, t.RunningStatus)
		if n := len(t.ResultDetail); n > 0 && t.ResultDetail[n-1].ErrorMsg != "" {
			reason += ": " + t.ResultDetail[n-1].ErrorMsg
		}
		if err := w.js.FailBatch(ctx, w.spec.ID, b.Batch, 0, reason); err != nil {
			return err
		}
		w.log.Error("batch failed", "batch", b.Batch, "runner", holder, "reason", reason)
		l.res.Failed, l.res.Error = append(l.res.Failed, b), reason
		return nil
	}
	if !w.a.holderGone(ctx, w.c, holder, w.orphanAfter) {
		return nil
	}
	epoch := info.Epoch + 1
	if ok {
		epoch = max(epoch, t.Epoch+1)
	}
	n, err := w.js.Requeue(ctx, w.spec.ID, b.Batch, epoch)
	if err != nil {
		if errors.Is(err, ErrStale) {
			return nil // claimed meanwhile; look again next round
		}
		return err
	}
	if ok && t.Job != nil && t.Job.Batch == b.Batch {
		fencedT := t.Clone()
		fencedT.RunningStatus = roles.TaskTerminate
		// Its holder stays: only the raised epoch fences it.
		_, op := w.c.FenceTask(holder, l.versions[holder], fencedT, t.Holder, epoch)
		if _, err := w.c.Store.Set(ctx, op.Path, op.Data, op.Version); err != nil {
			w.log.Warn("could not mark the dead holder's Task terminate (the store fences it anyway)", "runner", holder, "err", err)
		}
	}
	w.log.Warn("batch re-queued: its runner died with nobody to take over", "batch", b.Batch, "runner", holder, "urls", n)
	l.res.Requeued = append(l.res.Requeued, b)
	return nil
}

// pollIdle reads the frontier's counters every poll while a Runner is
// idle, until a watch fires (a full look follows: done false), the
// deadline passes (done false), or a new batch can take what is queued
// (res.Idle; done true).
func (w *awaitWatch) pollIdle(ctx context.Context, deadline time.Time, poll time.Duration, chans []<-chan struct{}, res *AwaitResult) (done bool, err error) {
	for !w.a.now().After(deadline) {
		fired, err := metadata.WaitAny(ctx, poll, chans...)
		if err != nil {
			return true, err
		}
		if fired {
			return false, nil
		}
		st, err := w.js.Stats(ctx, w.spec.ID)
		if err != nil {
			return true, err
		}
		w.a.Metrics.Queued(w.spec.ID, st.Queued)
		if st.Queued > 0 {
			ok, err := w.js.Available(ctx, w.spec.ID)
			if err != nil {
				return true, err
			}
			if ok {
				res.Stats, res.Idle = st, true
				return true, nil
			}
		}
		if activity.IsActivity(ctx) {
			activity.RecordHeartbeat(ctx, st)
		}
	}
	return false, nil
}

// awaitIdlePoll is how often JobAwait re-reads the frontier's counters
// while a Runner is idle.
const awaitIdlePoll = 50 * time.Millisecond

// startIdlePoll is awaitIdlePoll during a new job's start (Activities.StartLinger):
// the first pages' links reach the idle Runners within it.
const startIdlePoll = 10 * time.Millisecond

// holderGone reports whether holder is dead or silent for longer than d
// and nobody (alive) claimed it.
func (a *Activities) holderGone(ctx context.Context, c *metadata.Cluster, holder string, d time.Duration) bool {
	if holder == "" {
		return false
	}
	n, _, err := c.GetNode(ctx, holder)
	if err == nil && n.TakenOverBy != "" {
		if cn, _, err := c.GetNode(ctx, n.TakenOverBy); err != nil || !cn.Role.Dead() {
			return false // a backup is handing it over
		}
	}
	hb, _, err := c.GetHeartbeat(ctx, holder)
	if err != nil {
		return false
	}
	age, err := hb.Age(a.now())
	return err == nil && age > d
}
