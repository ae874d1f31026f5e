package jobs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/batoncrawl/baton/activities/metadata"
	"github.com/batoncrawl/baton/roles"
)

// This file hands a job's batches out to its idle Runners (JobAssign).

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
	c := metadata.NewCluster(a.Meta, a.Root, in.Spec.Group)
	var g roles.GroupState
	var op *opening // a new job's first hand-out
	if in.Start {
		g, op, err = a.start(ctx, c, in.Spec)
	} else {
		g, _, err = c.GetGroup(ctx)
	}
	if err != nil {
		return AssignResult{}, err
	}
	res, seq, taken, err := a.delivered(ctx, js, c, in.Spec.ID, in.Seq)
	if err != nil {
		return res, err
	}
	if op != nil && (len(res.Assigned) > 0 || taken != nil) {
		op.idle, op.stats = nil, nil // a retried call: read them again, past its batches
	}
	more, seq, err := a.handOut(ctx, js, c, g, in.Spec, seq, append(slices.Clone(in.InFlight), res.Assigned...), op, taken)
	res.Assigned = append(res.Assigned, more...)
	if err != nil {
		return res, err
	}
	res.Stats, err = js.Stats(ctx, in.Spec.ID)
	if err == nil {
		a.Metrics.Queued(in.Spec.ID, res.Stats.Queued)
	}
	if err != nil || !in.Start || len(res.Assigned) == 0 {
		return res, err
	}
	// A new job: wait a moment for its first batches here, so that a small
	// job (one page) completes without a JobAwait round trip (its start
	// batches end as soon as its pages are recorded: BatchRunner); and
	// hand the links of its first pages to the Runners still idle (those
	// past maxStartBatches) as soon as they are recorded (polled every
	// startIdlePoll), without the two activity round trips of a JobAwait
	// and a JobAssign.
	deadline := a.now().Add(a.startLinger())
	actx, cancel := context.WithTimeout(ctx, a.startLinger())
	defer cancel()
	inflight := slices.Clone(res.Assigned)
	for {
		aw, err := a.await(actx, in.Spec, inflight, deadline, true, startIdlePoll)
		if err != nil {
			if ctx.Err() != nil {
				return res, ctx.Err()
			}
			return res, nil // the linger ran out: JobAwait goes on
		}
		res.Stats = aw.Stats
		res.Done = append(res.Done, aw.Done...)
		inflight = slices.DeleteFunc(inflight, func(b BatchRef) bool { return slices.Contains(aw.Done, b) })
		if len(aw.Requeued) > 0 || len(aw.Failed) > 0 || len(inflight) == 0 || a.now().After(deadline) {
			return res, nil
		}
		if !aw.Idle {
			continue // a batch ended: wait for the others (a start batch ends soon after the last batch with URLs)
		}
		g, _, err := c.GetGroup(ctx)
		if err != nil {
			return res, err
		}
		more, next, err := a.handOut(ctx, js, c, g, in.Spec, seq, append(slices.Clone(in.InFlight), res.Assigned...), nil, nil)
		res.Assigned, seq = append(res.Assigned, more...), next
		if err != nil {
			return res, err
		}
		if len(more) == 0 {
			return res, nil
		}
		inflight = append(inflight, more...) // the next await reads the counters again
	}
}

// delivered finds, for a retried JobAssign, the batches an earlier
// attempt delivered from seq on (their holder's Task names them, or they
// ran already), to report again, and the seq after them. taken is the
// batch after those that the attempt took but did not deliver (nil if
// none): handOut gives it to an idle Runner as it is, or back to the
// frontier.
func (a *Activities) delivered(ctx context.Context, js SupervisorStore, c *metadata.Cluster, job string, seq int) (res AssignResult, next int, taken *BatchInfo, err error) {
	for {
		id := BatchID(job, seq)
		infos, err := js.Batches(ctx, job, []string{id})
		if err != nil || len(infos) == 0 {
			return res, seq, nil, err
		}
		b := infos[0]
		delivered := b.State != BatchRunning
		if !delivered && b.Holder != "" {
			t, _, err := c.GetTask(ctx, b.Holder)
			var ce *metadata.CorruptError
			if err != nil && !errors.As(err, &ce) && !errors.Is(err, metadata.ErrNotFound) {
				return res, seq, nil, err // unknown: not taken from its holder on a guess
			}
			delivered = err == nil && t.Job != nil && t.Job.ID == job && t.Job.Batch == id
		}
		if !delivered {
			return res, seq, &b, nil
		}
		res.Assigned = append(res.Assigned, BatchRef{Batch: id, Runner: b.Holder, Size: b.Size})
		seq++
	}
}

// opening is what a new job's first hand-out (handOut) has from the job's
// start (start): its idle Runners in hand-out order and its counters,
// read while it was stored (nil: read by the hand-out), and warmed,
// closed once the warm-up of its seeds claimed their robots.txt (nil:
// nothing to wait for).
type opening struct {
	idle   []string
	stats  *Stats
	warmed <-chan struct{}
}

// handOut gives a batch of the frontier to each idle Runner of the group
// that carries the job's crawler (read here, busy being the batches in
// flight, unless the job's opening has them), with IDs
// from seq on, and returns the batches and the next seq. A batch taken
// whose Runner became busy before it got it is re-queued and reported with
// no Runner (it used its ID). At a job's opening (its first hand-out), the
// idle Runners left once the frontier is empty (up to maxStartBatches in
// all) get start batches: empty batches that pull the first pages' links
// themselves as soon as they are recorded (SupervisorStore.OpenBatch,
// BatchRunner); and no batch's Task for another worker's Runner is
// written before the opening's warmed is closed (maxWarmWait at most).
// taken is a batch an earlier attempt took (its ID seq's) and no Runner
// got: it goes first, as it is, and back to the frontier if no Runner
// gets it now either.
func (a *Activities) handOut(ctx context.Context, js SupervisorStore, c *metadata.Cluster, g roles.GroupState, spec Spec, seq int, busy []BatchRef, op *opening, taken *BatchInfo) ([]BatchRef, int, error) {
	log := a.log(ctx, "job", spec.ID)
	var assigned []BatchRef
	start := op != nil
	var idle []string
	var st *Stats
	var warmed <-chan struct{}
	if start {
		idle, st, warmed = op.idle, op.stats, op.warmed
	}
	if idle == nil {
		idle = carriers(ctx, c, a.idleRunners(ctx, c, g, nil, busy, seq), spec)
	}
	var err error
	if st == nil {
		var read Stats
		if read, err = js.Stats(ctx, spec.ID); err != nil {
			return assigned, seq, err
		}
		st = &read
	}
	size := firstBatch(spec, st.Queued, max(len(idle), len(g.CurrentRunner)))
	undelivered := "" // a batch taken that no Runner got yet
	var info BatchInfo
	if taken != nil {
		undelivered, info = taken.ID, *taken
	}
	// empty: the frontier had nothing for the last TakeBatch, or the
	// batches took all it had when its counters were read (no TakeBatch
	// more, which would wait for the job's lock the first batch's Runner
	// takes as it starts).
	empty, left := st.Queued == 0, st.Queued
	for _, r := range idle {
		batch := BatchID(spec.ID, seq)
		// (When batch is undelivered, the last one's Runner became busy:
		// the batch as it is goes to this one.)
		if batch != undelivered {
			info = BatchInfo{}
			if !empty {
				if info, err = js.TakeBatch(ctx, spec.ID, batch, size); err != nil {
					return assigned, seq, err
				}
				left -= info.Size
				empty = info.Size == 0 || left <= 0
			}
			if info.Size == 0 {
				// The frontier is empty (the job's first pages are being
				// fetched): at a job's start, a start batch. A retried
				// call finds the one an earlier attempt opened and did not
				// deliver (it is the lowest ID the call reaches).
				if !start || len(assigned) >= maxStartBatches {
					break
				}
				if info, err = js.OpenBatch(ctx, spec.ID, batch); err != nil {
					return assigned, seq, err
				}
			}
		}
		undelivered = batch
		epoch, ok, err := a.deliver(ctx, js, c, spec.ID, r, batch, info, &warmed)
		if err != nil {
			return assigned, seq, err
		}
		if !ok {
			continue // became busy meanwhile; the batch goes to the next idle Runner
		}
		log.Debug("batch assigned", "batch", batch, "runner", r, "epoch", epoch, "size", info.Size)
		assigned = append(assigned, BatchRef{Batch: batch, Runner: r, Size: info.Size})
		undelivered = ""
		seq++
	}
	if undelivered != "" {
		// Every Runner it was meant for became busy meanwhile: its URLs go
		// back to the frontier, and it is reported (with no Runner) so that
		// the job counts it re-queued and uses the next batch ID; otherwise
		// nothing would be queued or in flight and the job would end with
		// those URLs never crawled.
		if err := a.requeueUndelivered(ctx, js, spec.ID, undelivered); err != nil {
			return assigned, seq, err
		}
		assigned = append(assigned, BatchRef{Batch: undelivered})
		seq++
	}
	return assigned, seq, nil
}

// deliver gives batch to idle Runner r: it claims the batch for r in the
// store at an epoch above the Task's and the batch's, waits for the
// opening's warm-up (*warmed, once) when r is another worker's, and writes
// r's Task naming the batch. ok false: r became busy meanwhile (its Task
// pending or written by another), nothing written to its Task.
func (a *Activities) deliver(ctx context.Context, js SupervisorStore, c *metadata.Cluster, job, r, batch string, info BatchInfo, warmed *<-chan struct{}) (epoch int64, ok bool, err error) {
	cur, v, err := c.GetTask(ctx, r)
	var ce *metadata.CorruptError
	if err != nil && !errors.As(err, &ce) && !errors.Is(err, metadata.ErrNotFound) {
		return 0, false, err
	}
	// (A batch an earlier attempt delivered was reported above: this
	// one is new, or was taken but never delivered.)
	if cur.Pending() {
		return 0, false, nil
	}
	epoch = max(cur.Epoch, info.Epoch) + 1
	if _, err := js.Claim(ctx, job, batch, r, epoch); err != nil {
		return 0, false, err
	}
	if *warmed != nil && r != a.Local.Name {
		// Another worker's Runner reads the claim in the store; this
		// worker's own waits for its warm-up in the process.
		wait := time.NewTimer(maxWarmWait)
		select {
		case <-*warmed:
		case <-wait.C: // a slow warm-up (its host's name slow to resolve): the Runner fetches robots.txt itself if it must
		case <-ctx.Done():
			wait.Stop()
			return 0, false, ctx.Err()
		}
		wait.Stop()
		*warmed = nil
	}
	t := roles.EmptyTask()
	t.Job = &roles.JobRef{ID: job, Batch: batch, Size: info.Size}
	t.RunningStatus = roles.TaskProcessing
	_, op := c.FenceTask(r, v, t, r, epoch)
	if _, err := c.Store.Set(ctx, op.Path, op.Data, op.Version); err != nil {
		if errors.Is(err, metadata.ErrBadVersion) || errors.Is(err, metadata.ErrNotFound) {
			return 0, false, nil
		}
		return 0, false, err
	}
	return epoch, true, nil
}

// requeueUndelivered gives the URLs of a batch taken that no Runner got
// back to the frontier.
func (a *Activities) requeueUndelivered(ctx context.Context, js SupervisorStore, job, batch string) error {
	infos, err := js.Batches(ctx, job, []string{batch})
	if err != nil {
		return err
	}
	if len(infos) == 1 && infos[0].State == BatchRunning {
		n, err := js.Requeue(ctx, job, batch, infos[0].Epoch+1)
		if err != nil {
			return err
		}
		a.log(ctx, "job", job).Info("batch re-queued: its Runner became busy before it got it", "batch", batch, "urls", n)
	}
	return nil
}

// start stores a new job (JobStart) while it reads the group and its idle
// Runners that carry the job's crawler, in hand-out order, and warms the
// worker's own Runner at once (warm): the seed's robots.txt is being
// fetched while the job is stored and its first batch handed out. The
// seeds' batch goes first to the worker's own Runner when it is idle
// (its fetches wait for the warm-up in the same process, not for the
// store), at once; a batch for another worker's Runner is handed out
// once the warm-up claimed the seeds' robots.txt in the store
// (opening.warmed): that Runner waits for the file the claim announces
// instead of fetching robots.txt itself. The own Runner does not wait for
// the claim (a write at a busy moment): its first request follows
// robots.txt's answer sooner (docs/benchmarks.md, the start of a crawl).
func (a *Activities) start(ctx context.Context, c *metadata.Cluster, spec Spec) (g roles.GroupState, op *opening, err error) {
	stored := make(chan struct{})
	errc := make(chan error, 1)
	var created Stats
	go func() {
		var err error
		created, err = a.JobStart(ctx, spec)
		if err == nil {
			close(stored)
		}
		errc <- err
	}()
	op = &opening{warmed: a.warm(ctx, spec, stored)}
	g, _, err = c.GetGroup(ctx)
	if err == nil {
		op.idle = carriers(ctx, c, a.idleRunners(ctx, c, g, nil, nil, 0), spec)
		if i := slices.Index(op.idle, a.Local.Name); op.warmed != nil && i > 0 {
			op.idle = append([]string{a.Local.Name}, slices.Delete(slices.Clone(op.idle), i, i+1)...)
		}
	}
	if serr := <-errc; serr != nil {
		return g, nil, serr // the job's error first: it may not be retried
	}
	op.stats = &created
	return g, op, err
}

// warm tells this worker's Runner to get ready for a new job's seeds
// (Local.Runner.Warm: their robots.txt is fetched while the job is
// stored, closing stored, and its first batch handed out, whichever
// Runner gets it) and returns when they may be handed out; nil when it
// warms nothing: a worker of another group, seeds in the store (a seeds
// file) or more than a first batch of them.
func (a *Activities) warm(ctx context.Context, spec Spec, stored <-chan struct{}) <-chan struct{} {
	l := a.Local
	if l.Runner == nil || l.Group != spec.Group || spec.SeedsStored > 0 || len(spec.Seeds) == 0 || len(spec.Seeds) > firstTake {
		return nil
	}
	seeds, err := spec.SeedEntries(nil)
	if err != nil || len(seeds) != len(spec.Seeds) {
		return nil
	}
	urls := make([]string, len(seeds))
	for k, e := range seeds {
		urls[k] = e.URL
	}
	return l.Runner.Warm(ctx, spec, urls, stored)
}

// firstBatch is the size of the batches a hand-out takes from queued URLs
// for runners Runners: the job's batch size (firstTake for an unbounded
// batch, which starts with a Runner's first round or two and pulls the
// rest as it frees slots), but while the frontier is short (the start and
// the end of a crawl) it is shared among all the Runners instead of given
// to the first idle ones, so that no Runner is left with a long batch
// while the others idle.
func firstBatch(spec Spec, queued, runners int) int {
	size := spec.BatchSize
	if size == 0 {
		size = firstTake
	}
	if runners > 0 {
		size = min(size, max(1, (queued+runners-1)/runners))
	}
	return size
}

// maxParallelReads bounds the ZooKeeper reads idleRunners has under way
// at once.
const maxParallelReads = 16

// maxStartBatches bounds the start batches of a job (handOut): each polls
// the store's counters every few milliseconds while it waits, so a large
// cluster does not send every idle Runner to wait on the same first
// links; the others get batches from the hand-outs that follow.
const maxStartBatches = 8

// firstTake is the size of an unbounded batch when it is handed out (a
// Runner pulls the rest from the frontier as it frees slots).
const firstTake = 2 * DefaultConcurrency

// maxWarmWait bounds how long a new job's first hand-out waits for the
// warm-up to claim the seeds' robots.txt (Warmer.Warm): a few
// milliseconds normally, as the job is stored meanwhile.
const maxWarmWait = 2 * time.Second

// DefaultStartLinger is how long a new job's first JobAssign waits for
// its first batches to finish (Activities.StartLinger).
const DefaultStartLinger = 250 * time.Millisecond

// carriers keeps the runners that carry the job's crawler at its version
// (every Runner carries the built-in one): a Runner never gets a batch of a
// crawler it does not carry. An unreadable Crawlers znode counts as not
// carrying (the batch waits for another Runner rather than failing).
func carriers(ctx context.Context, c *metadata.Cluster, runners []string, spec Spec) []string {
	if spec.Crawler == "" || spec.Crawler == roles.BuiltinCrawler {
		return runners
	}
	out := runners[:0:0]
	for _, r := range runners {
		if cr, err := c.GetCrawlers(ctx, r); err == nil && cr.Carries(spec.Crawler, spec.CrawlerVersion) {
			out = append(out, r)
		}
	}
	return out
}

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
	surplus := g.Surplus() // stepping down after a scale-down: no new work
	var cands []string
	for _, r := range runners {
		if takingOver[r] || slices.Contains(surplus, r) || slices.ContainsFunc(busy, func(b BatchRef) bool { return b.Runner == r }) {
			continue
		}
		cands = append(cands, r)
	}
	// Each candidate's NodeState, Heartbeat and Task are read at once (one
	// round trip to ZooKeeper, not three per Runner one after the other:
	// the first hand-out of a job waits for them), then judged in order.
	type state struct {
		n       roles.NodeState
		hb      roles.Heartbeat
		t       roles.Task
		nErr    error
		hbErr   error
		taskErr error
	}
	states := make([]state, len(cands))
	var wg sync.WaitGroup
	sem := make(chan struct{}, maxParallelReads)
	read := func(f func()) {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			f()
		}()
	}
	for i, r := range cands {
		st := &states[i]
		read(func() { st.n, _, st.nErr = c.GetNode(ctx, r) })
		read(func() { st.hb, _, st.hbErr = c.GetHeartbeat(ctx, r) })
		read(func() { st.t, st.taskErr = task(r) })
	}
	wg.Wait()
	var idle []string
	for i, r := range cands {
		st := states[i]
		if st.nErr != nil || st.n.Role != roles.RoleRunner || st.hbErr != nil {
			continue
		}
		timeout, _ := st.hb.Timeout()
		if age, err := st.hb.Age(a.now()); err != nil || age >= timeout || st.hb.HealthyState == roles.HeartApparentDeath {
			continue
		}
		if st.taskErr != nil && !errors.Is(st.taskErr, metadata.ErrNotFound) {
			continue
		}
		if st.t.Pending() {
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
