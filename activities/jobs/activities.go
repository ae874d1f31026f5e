package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/metadata"
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
	var seeds []Entry
	for _, s := range spec.Seeds {
		n, err := spec.Options.NormalizeURL(s)
		if err != nil {
			return Stats{}, badJob("seed %q: %w", s, err)
		}
		seeds = append(seeds, Entry{URL: n})
	}
	for _, s := range spec.Sitemaps {
		n, err := crawl.NormalizeURL(s)
		if err != nil {
			return Stats{}, badJob("sitemap %q: %w", s, err)
		}
		seeds = append(seeds, Entry{URL: n, Depth: SitemapDepth})
	}
	st, err := js.CreateJob(ctx, spec, seeds)
	if errors.Is(err, ErrJobExists) {
		return st, badJob("%w: choose another job ID", err)
	}
	return st, err
}

// BatchID is the ID of a job's seq-th batch.
func BatchID(job string, seq int) string { return fmt.Sprintf("%s-b%06d", job, seq) }

// JobAssign hands a batch of the frontier to each idle Runner, the way the
// ZeroMQ design of seed 003 gives work to the workers that said they are
// free: the store moves the URLs into the batch and records its holder and
// epoch; the Runner's Task znode gets a reference to it (compare-and-set,
// epoch raised, already marked processing so the Runner starts without a
// write of its own). Batch IDs come from Seq, so a retried call finds the
// same batches.
func (a *Activities) JobAssign(ctx context.Context, in AssignInput) (AssignResult, error) {
	js, err := a.store()
	if err != nil {
		return AssignResult{}, err
	}
	log := a.log(ctx, "job", in.Spec.ID)
	if in.Start {
		if _, err := a.JobStart(ctx, in.Spec); err != nil {
			return AssignResult{}, err
		}
	}
	c := metadata.NewCluster(a.Meta, a.Root, in.Spec.Group)
	g, _, err := c.GetGroup(ctx)
	if err != nil {
		return AssignResult{}, err
	}
	var res AssignResult
	seq := in.Seq
	// A retried call: the batches an earlier attempt delivered (their
	// holder's Task names them, or they ran already) are reported again;
	// one it took but could not deliver goes to an idle Runner below.
	for {
		id := BatchID(in.Spec.ID, seq)
		infos, err := js.Batches(ctx, in.Spec.ID, []string{id})
		if err != nil {
			return res, err
		}
		if len(infos) == 0 {
			break
		}
		b := infos[0]
		delivered := b.State != BatchRunning
		if !delivered && b.Holder != "" {
			t, _, err := c.GetTask(ctx, b.Holder)
			delivered = err == nil && t.Job != nil && t.Job.ID == in.Spec.ID && t.Job.Batch == id
		}
		if !delivered {
			break
		}
		res.Assigned = append(res.Assigned, BatchRef{Batch: id, Runner: b.Holder, Size: b.Size})
		seq++
	}
	idle := a.idleRunners(ctx, c, g, nil, append(slices.Clone(in.InFlight), res.Assigned...), seq)
	// While the frontier is short (the start and the end of a crawl), share
	// it among all the Runners instead of giving it to the first idle ones,
	// so that no Runner is left with a long batch while the others idle.
	size := in.Spec.BatchSize
	if size == 0 {
		// An unbounded batch starts with a Runner's first round or two;
		// it pulls the rest as it frees slots.
		size = firstTake
	}
	st, err := js.Stats(ctx, in.Spec.ID)
	if err != nil {
		return res, err
	}
	if n := max(len(idle), len(g.CurrentRunner)); n > 0 {
		size = min(size, max(1, (st.Queued+n-1)/n))
	}
	undelivered := "" // a batch taken that no Runner got yet
	for _, r := range idle {
		batch := BatchID(in.Spec.ID, seq)
		info, err := js.TakeBatch(ctx, in.Spec.ID, batch, size)
		if err != nil {
			return res, err
		}
		if info.Size == 0 {
			break
		}
		undelivered = batch
		cur, v, err := c.GetTask(ctx, r)
		var ce *metadata.CorruptError
		if err != nil && !errors.As(err, &ce) && !errors.Is(err, metadata.ErrNotFound) {
			return res, err
		}
		// (A batch an earlier attempt delivered was reported above: this
		// one is new, or was taken but never delivered.)
		if cur.Pending() {
			continue // became busy meanwhile; the batch goes to the next idle Runner
		}
		epoch := max(cur.Epoch, info.Epoch) + 1
		if _, err := js.Claim(ctx, in.Spec.ID, batch, r, epoch); err != nil {
			return res, err
		}
		t := roles.EmptyTask()
		t.Job = &roles.JobRef{ID: in.Spec.ID, Batch: batch, Size: info.Size}
		t.RunningStatus = roles.TaskProcessing
		_, op := c.FenceTask(r, v, t, r, epoch)
		if _, err := c.Store.Set(ctx, op.Path, op.Data, op.Version); err != nil {
			if errors.Is(err, metadata.ErrBadVersion) || errors.Is(err, metadata.ErrNotFound) {
				continue
			}
			return res, err
		}
		log.Debug("batch assigned", "batch", batch, "runner", r, "epoch", epoch, "size", info.Size)
		res.Assigned = append(res.Assigned, BatchRef{Batch: batch, Runner: r, Size: info.Size})
		undelivered = ""
		seq++
	}
	if undelivered != "" {
		// Every Runner it was meant for became busy meanwhile: its URLs go
		// back to the frontier, and it is reported (with no Runner) so that
		// the job counts it re-queued and uses the next batch ID; otherwise
		// nothing would be queued or in flight and the job would end with
		// those URLs never crawled.
		infos, err := js.Batches(ctx, in.Spec.ID, []string{undelivered})
		if err != nil {
			return res, err
		}
		if len(infos) == 1 && infos[0].State == BatchRunning {
			n, err := js.Requeue(ctx, in.Spec.ID, undelivered, infos[0].Epoch+1)
			if err != nil {
				return res, err
			}
			log.Info("batch re-queued: its Runner became busy before it got it", "batch", undelivered, "urls", n)
		}
		res.Assigned = append(res.Assigned, BatchRef{Batch: undelivered})
		seq++
	}
	res.Stats, err = js.Stats(ctx, in.Spec.ID)
	if err != nil || !in.Start || len(res.Assigned) == 0 {
		return res, err
	}
	// A new job: wait a moment for its first batches here, so that a small
	// job (one page) completes without a JobAwait round trip.
	actx, cancel := context.WithTimeout(ctx, startLinger)
	defer cancel()
	aw, err := a.await(actx, in.Spec, res.Assigned, a.now().Add(startLinger), true)
	switch {
	case err == nil:
		res.Done, res.Stats = aw.Done, aw.Stats
	case ctx.Err() != nil:
		return res, ctx.Err()
	}
	return res, nil
}

// firstTake is the size of an unbounded batch when it is handed out (a
// Runner pulls the rest from the frontier as it frees slots).
const firstTake = 2 * DefaultConcurrency

// startLinger is how long a new job's first JobAssign waits for its
// first batches to finish.
const startLinger = 250 * time.Millisecond

// JobAwait waits until a batch in flight finishes, fails or must be
// re-queued, or an idle Runner could take more work (while the frontier has
// some), and returns at least every few seconds with fresh counters. A
// batch's state and holder come from the job store; ZooKeeper says whether
// the holder lives, and its watches (GroupState, the holders' Tasks, which
// a Runner writes when its batch ends) wake the wait. A batch whose holder
// is dead and that nobody claimed within twice the detection bound is
// fenced (epoch raised in the store, its Task marked terminate) and its
// unfinished URLs re-queued.
func (a *Activities) JobAwait(ctx context.Context, spec Spec, inflight []BatchRef) (AwaitResult, error) {
	return a.await(ctx, spec, inflight, a.now().Add(5*time.Second), true)
}

// JobDrain is JobAwait for a job that hands nothing out (paused, or
// cancelling): it waits for a batch in flight to end (or for its dead
// holder's batch to be re-queued), not for an idle Runner, and returns at
// least every few seconds with fresh counters.
func (a *Activities) JobDrain(ctx context.Context, spec Spec, inflight []BatchRef) (AwaitResult, error) {
	return a.await(ctx, spec, inflight, a.now().Add(5*time.Second), false)
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

// await is JobAwait until deadline (on the activities' clock); with
// handOut false (JobDrain), an idle Runner is no reason to return.
func (a *Activities) await(ctx context.Context, spec Spec, inflight []BatchRef, deadline time.Time, handOut bool) (AwaitResult, error) {
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
		someIdle := handOut && len(a.idleRunners(ctx, c, g, tasks, inflight, 0)) > 0
		res.Idle = someIdle && res.Stats.Queued > 0
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
			fired, err := metadata.WaitAny(ctx, awaitIdlePoll, chans...)
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
			if st.Queued > 0 {
				res.Stats, res.Idle = st, true
				return res, nil
			}
			if activity.IsActivity(ctx) {
				activity.RecordHeartbeat(ctx, st)
			}
		}
	}
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

// awaitIdlePoll is how often JobAwait re-reads the frontier's counters
// while a Runner is idle.
const awaitIdlePoll = 50 * time.Millisecond

// idleRunners lists the group's runners that are alive (fresh heartbeat)
// and have no pending Task, in order of availability (rotated by seq to
// spread the load). tasks holds the Tasks the caller read already (nil or
// partial: the others are read here).
func (a *Activities) idleRunners(ctx context.Context, c *metadata.Cluster, g roles.GroupState, tasks map[string]roles.Task, busy []BatchRef, seq int) []string {
	task := func(name string) (roles.Task, error) {
		if t, ok := tasks[name]; ok {
			return t, nil
		}
		t, _, err := c.GetTask(ctx, name)
		return t, err
	}
	runners := slices.Clone(g.CurrentRunner)
	roles.SortNames(runners)
	// A runner in the middle of a fail-over (it claimed a dead peer whose
	// Task it has not taken yet) is not idle: its Task is about to be the
	// dead peer's.
	takingOver := map[string]bool{}
	for _, d := range g.FailCrawler {
		dn, _, err := c.GetNode(ctx, d)
		if err != nil || dn.TakenOverBy == "" {
			continue
		}
		if dt, err := task(d); err == nil && dt.Pending() && dt.Holder != dn.TakenOverBy {
			takingOver[dn.TakenOverBy] = true
		}
	}
	var idle []string
	surplus := g.Surplus() // stepping down after a scale-down: no new work
	for _, r := range runners {
		if takingOver[r] || slices.Contains(surplus, r) || slices.ContainsFunc(busy, func(b BatchRef) bool { return b.Runner == r }) {
			continue
		}
		n, _, err := c.GetNode(ctx, r)
		if err != nil || n.Role != roles.RoleRunner {
			continue
		}
		hb, _, err := c.GetHeartbeat(ctx, r)
		if err != nil {
			continue
		}
		timeout, _ := hb.Timeout()
		if age, err := hb.Age(a.now()); err != nil || age >= timeout || hb.HealthyState == roles.HeartApparentDeath {
			continue
		}
		t, err := task(r)
		if err != nil && !errors.Is(err, metadata.ErrNotFound) {
			continue
		}
		if t.Pending() {
			continue
		}
		idle = append(idle, r)
	}
	if len(idle) > 1 {
		k := seq % len(idle)
		idle = append(idle[k:], idle[:k]...)
	}
	return idle
}

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
