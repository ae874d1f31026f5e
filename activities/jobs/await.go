package jobs

import (
	"context"
	"errors"
	"fmt"
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
	log := a.log(ctx, "job", spec.ID)
	c := metadata.NewCluster(a.Meta, a.Root, spec.Group)
	timers := a.timers(spec)
	orphanAfter := 2*timers.DetectionBound() + 2*time.Second
	// CrawlJob's heartbeat timeout for JobAwait is max(3 s, 6 ×
	// check_crawler_state) of the spec's timers: the waits stay well within.
	watchWait := min(2*timers.CheckCrawlerState, max(3*time.Second, 6*spec.Timers.CheckCrawlerState)/3)
	ids := make([]string, len(inflight))
	for i, b := range inflight {
		ids[i] = b.Batch
	}
	for {
		var res AwaitResult
		gd, _, gch, err := a.Meta.GetW(ctx, c.GroupPath())
		if err != nil {
			return res, err
		}
		g, err := roles.DecodeGroupState(gd)
		if err != nil {
			return res, &metadata.CorruptError{Path: c.GroupPath(), Err: err}
		}
		chans := []<-chan struct{}{gch}
		tasks := map[string]roles.Task{}
		versions := map[string]int32{}
		watchTask := func(n string) {
			if _, ok := tasks[n]; ok || n == "" {
				return
			}
			td, v, ch, err := a.Meta.GetW(ctx, c.TaskPath(n))
			if err != nil {
				return
			}
			chans = append(chans, ch)
			if t, err := roles.DecodeTask(td); err == nil {
				tasks[n], versions[n] = t, v
			}
		}
		infos, err := js.Batches(ctx, spec.ID, ids)
		if err != nil {
			return res, err
		}
		byID := map[string]BatchInfo{}
		for _, b := range infos {
			byID[b.ID] = b
		}
		for _, b := range inflight {
			info, ok := byID[b.Batch]
			if !ok {
				res.Done = append(res.Done, b) // never stored (an empty frontier)
				continue
			}
			switch info.State {
			case BatchDone:
				res.Done = append(res.Done, b)
				continue
			case BatchRequeued:
				res.Requeued = append(res.Requeued, b)
				continue
			case BatchFailed:
				res.Failed, res.Error = append(res.Failed, b), info.Error
				continue
			}
			holder := info.Holder
			watchTask(holder)
			watchTask(b.Runner)
			t, ok := tasks[holder]
			if ok && t.Job != nil && t.Job.Batch == b.Batch && t.Epoch == info.Epoch &&
				(t.RunningStatus == roles.TaskTerminate || t.RunningStatus == roles.TaskError) && t.Holder == holder {
				// The holder ended its Task without finishing the batch: it
				// could not run (it said why in result_detail).
				reason := fmt.Sprintf("runner %s ended batch %s as %s", holder, b.Batch, t.RunningStatus)
				if n := len(t.ResultDetail); n > 0 && t.ResultDetail[n-1].ErrorMsg != "" {
					reason += ": " + t.ResultDetail[n-1].ErrorMsg
				}
				if err := js.FailBatch(ctx, spec.ID, b.Batch, 0, reason); err != nil {
					return res, err
				}
				log.Error("batch failed", "batch", b.Batch, "runner", holder, "reason", reason)
				res.Failed, res.Error = append(res.Failed, b), reason
				continue
			}
			if !a.holderGone(ctx, c, holder, orphanAfter) {
				continue
			}
			epoch := info.Epoch + 1
			if ok {
				epoch = max(epoch, t.Epoch+1)
			}
			n, err := js.Requeue(ctx, spec.ID, b.Batch, epoch)
			if err != nil {
				if errors.Is(err, ErrStale) {
					continue // claimed meanwhile; look again next round
				}
				return res, err
			}
			if ok && t.Job != nil && t.Job.Batch == b.Batch {
				fencedT := t.Clone()
				fencedT.RunningStatus = roles.TaskTerminate
				// Its holder stays: only the raised epoch fences it.
				_, op := c.FenceTask(holder, versions[holder], fencedT, t.Holder, epoch)
				if _, err := c.Store.Set(ctx, op.Path, op.Data, op.Version); err != nil {
					log.Warn("could not mark the dead holder's Task terminate (the store fences it anyway)", "runner", holder, "err", err)
				}
			}
			log.Warn("batch re-queued: its runner died with nobody to take over", "batch", b.Batch, "runner", holder, "urls", n)
			res.Requeued = append(res.Requeued, b)
		}
		res.Stats, err = js.Stats(ctx, spec.ID)
		if err != nil {
			return res, err
		}
		a.Metrics.Queued(spec.ID, res.Stats.Queued)
		someIdle := handOut && len(a.idleRunners(ctx, c, g, tasks, inflight, 0)) > 0
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
			if _, err := metadata.WaitAny(ctx, watchWait, chans...); err != nil {
				return res, err
			}
			continue
		}
		for !a.now().After(deadline) {
			fired, err := metadata.WaitAny(ctx, poll, chans...)
			if err != nil || fired {
				if err != nil {
					return res, err
				}
				break
			}
			st, err := js.Stats(ctx, spec.ID)
			if err != nil {
				return res, err
			}
			a.Metrics.Queued(spec.ID, st.Queued)
			if st.Queued > 0 {
				ok, err := js.Available(ctx, spec.ID)
				if err != nil {
					return res, err
				}
				if ok {
					res.Stats, res.Idle = st, true
					return res, nil
				}
			}
			if activity.IsActivity(ctx) {
				activity.RecordHeartbeat(ctx, st)
			}
		}
	}
}

// awaitIdlePoll is how often JobAwait re-reads the frontier's counters
// while a Runner is idle.
const awaitIdlePoll = 50 * time.Millisecond

// startIdlePoll is awaitIdlePoll during a new job's start (startLinger):
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
