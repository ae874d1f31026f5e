// Package runner holds the activities of the Runner role: WaitTask, its
// wait for work, and RunTask, which runs the instance's Task (the requests
// of a plain Task, fetched through a crawl.Fetcher, or a crawl job's batch,
// run by the job store's jobs.Batches), fenced by the Task's epoch. A
// runner the group no longer wants steps down to a backup while it waits
// (stepDown). It imports only the bottom layer (cluster) of activities/,
// and crawl and jobs for the fetch and the batches.
package runner

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/batoncrawl/baton/activities/cluster"
	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/metadata"
	"github.com/batoncrawl/baton/roles"
)

// Activities are the Runner's: WaitTask and RunTask. Temporal registers
// them by method name.
type Activities struct {
	Deps *cluster.Deps
	// Fetcher fetches the requests of plain Tasks (the worker's
	// *crawl.Engine), with Options.
	Fetcher crawl.Fetcher
	Options crawl.Options
	// MaxResultDetail caps Task.result_detail (0 means unbounded).
	MaxResultDetail int
	// MaxTaskBytes bounds the encoded Task znode a Runner writes (0 means
	// DefaultMaxTaskBytes); see recordFitted.
	MaxTaskBytes int
	// Linger is how long RunTask waits, after a crawl-job batch of the
	// Runner's own, for its next Task, to run it in the same activity
	// (see RunTask); 0 means DefaultLinger. In All-are-Runner mode it is
	// at most allLinger.
	Linger time.Duration
	// Leaving is set by the worker when it stops (SIGTERM) to leave the
	// cluster: running crawl-job batches stop pulling URLs and end with
	// what they hold, so the instance leaves with nothing to hand over
	// (see scale.AwaitIdle). nil: never.
	Leaving *atomic.Bool
}

// WaitTask blocks until the Runner's own Task has requests to run, or until
// the Runner is no longer a runner (marked dead: it must stop; or, idle
// while the group has more runners than total_runner, it stepped down to a
// backup: Fenced with Role backup-runner). It is woken by ZooKeeper watches
// on its Task, NodeState and GroupState (re-armed after each event), with
// check_task as a safety re-read.
func (a *Activities) WaitTask(ctx context.Context, m cluster.Member) (cluster.WaitTaskResult, error) {
	return a.waitTask(ctx, m, time.Time{})
}

// waitTask is WaitTask until the deadline until (zero: none); past it, it
// returns an empty result (neither Pending nor Fenced).
func (a *Activities) waitTask(ctx context.Context, m cluster.Member, until time.Time) (cluster.WaitTaskResult, error) {
	ctx = cluster.LogWith(ctx, roles.RoleRunner, "crawler", m.Name)
	c := a.Deps.Cluster(m.Group)
	var (
		watches []<-chan struct{}
		selfZ   cluster.WatchedZnode // the runner's membership entry
	)
	for {
		nd, _, nch, err := a.Deps.Store.GetW(ctx, c.NodePath(m.Name))
		if errors.Is(err, metadata.ErrNotFound) {
			return cluster.WaitTaskResult{Fenced: true}, nil // no longer a member: the life cycle registers again
		}
		if err != nil {
			return cluster.WaitTaskResult{}, err
		}
		node, err := roles.DecodeNodeState(nd)
		if err != nil {
			return cluster.WaitTaskResult{}, a.Deps.Corrupt(ctx, &metadata.CorruptError{Path: c.NodePath(m.Name), Err: err})
		}
		if node.Role != roles.RoleRunner {
			return cluster.WaitTaskResult{Fenced: true, Role: node.Role}, nil
		}
		td, tv, tch, err := a.Deps.Store.GetW(ctx, c.TaskPath(m.Name))
		if err != nil && !errors.Is(err, metadata.ErrNotFound) {
			return cluster.WaitTaskResult{}, err
		}
		if err == nil {
			t, err := roles.DecodeTask(td)
			switch {
			case err != nil:
				// Reported, and waited on: the next write of a valid Task wakes us.
				a.Deps.Corrupt(ctx, &metadata.CorruptError{Path: c.TaskPath(m.Name), Err: err})
			case t.Pending() && (t.Holder == "" || t.Holder == m.Name):
				return cluster.WaitTaskResult{Pending: true, Role: node.Role}, nil
			default:
				// Idle: a runner the group no longer wants steps down now.
				// Its membership entry says so, read again only after it
				// changed (a watch): other members' changes do not wake it.
				surplus := a.surplus(ctx, c, m, &selfZ)
				watches = append(watches[:0], selfZ.Changed())
				if surplus {
					down, err := a.stepDown(ctx, c, m, t, tv)
					if err != nil {
						return cluster.WaitTaskResult{}, err
					}
					if down {
						return cluster.WaitTaskResult{Fenced: true, Role: roles.RoleBackup}, nil
					}
					continue
				}
			}
		}
		wait := min(m.Timers.CheckTask, 2*time.Second)
		if !until.IsZero() {
			left := time.Until(until)
			if left <= 0 {
				return cluster.WaitTaskResult{}, nil
			}
			wait = min(wait, left)
		}
		cluster.Heartbeat(ctx)
		if _, err := metadata.WaitAny(ctx, wait, append(watches, nch, tch)...); err != nil {
			return cluster.WaitTaskResult{}, err
		}
	}
}

// RunTask runs Owner's Task as Member: it marks the Task processing, runs
// its requests from next_index on, and after each request records its
// result, the counters and in_progressing_id in one compare-and-set write
// that also checks the runner's NodeState has not changed. A runner that was
// marked dead, or whose Task was handed over (a higher epoch or another
// holder), is fenced: its write is refused and the activity fails with
// cluster.ErrTypeFenced, so a stale holder never records a result. The
// result of a request is recorded exactly once (keyed by task_id and
// epoch).
//
// A Runner's own crawl-job Task is usually followed within milliseconds by
// the job's next batch, and a cluster that crawled once crawls again, so
// after one RunTask waits for the next as WaitTask does (up to lingerFor)
// and runs it in the same activity: a new job's first batch starts
// without the Temporal round trips of a WaitTask's end and a RunTask's
// start (BenchmarkPostgresCrawl, docs/benchmarks.md: the time from a
// Task's write to its batch's start). What WaitTask would return instead (the
// Runner marked dead, or stepped down as the group's surplus) ends the
// RunTask, and the WaitTask after finds it.
func (a *Activities) RunTask(ctx context.Context, in cluster.RunTaskInput) (cluster.RunTaskResult, error) {
	total, err := a.runTask(ctx, in)
	if err != nil || (in.Owner != "" && in.Owner != in.Member.Name) || !total.Job {
		return total, err
	}
	for k := 1; k < maxTasksPerRun; k++ {
		if w, err := a.waitTask(ctx, in.Member, time.Now().Add(a.lingerFor(in.Member))); err != nil || !w.Pending {
			break // (an error: the WaitTask after says what is wrong)
		}
		r, err := a.runTask(ctx, in)
		total.Tasks++
		total.Ran += r.Ran
		total.Epoch, total.Status, total.Result, total.Duration = r.Epoch, r.Status, r.Result, total.Duration+r.Duration
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// lingerFor is how long RunTask waits for a crawl job's next batch, or
// the next job's first: Linger, but in All-are-Runner mode, where a
// runner in RunTask has no room to take over a dead peer's Task (the
// Runner workflow's capacity), only for a job's next batch (allLinger).
func (a *Activities) lingerFor(m cluster.Member) time.Duration {
	l := a.Linger
	if l <= 0 {
		l = DefaultLinger
	}
	if m.AllAreRunners() {
		l = min(l, allLinger)
	}
	return l
}

// DefaultLinger is RunTask's wait for the Runner's next Task.
const DefaultLinger = 10 * time.Minute

// allLinger is RunTask's longest wait in All-are-Runner mode;
// maxTasksPerRun bounds the Tasks of one RunTask.
const (
	allLinger      = time.Second
	maxTasksPerRun = 1000
)

// runTask runs one Task (see RunTask).
func (a *Activities) runTask(ctx context.Context, in cluster.RunTaskInput) (cluster.RunTaskResult, error) {
	m, owner := in.Member, in.Owner
	if owner == "" {
		owner = m.Name
	}
	ctx = cluster.LogWith(ctx, roles.RoleRunner, "crawler", m.Name, "task_owner", owner)
	c := a.Deps.Cluster(m.Group)
	start := a.Deps.Now()
	res := cluster.RunTaskResult{Owner: owner, Tasks: 1}

	node, nv, err := c.GetNode(ctx, m.Name)
	if errors.Is(err, metadata.ErrNotFound) {
		return res, cluster.Fenced("%s has no NodeState: it is not a member any more", m.Name)
	}
	if err != nil {
		return res, a.Deps.Corrupt(ctx, err)
	}
	a.Deps.Seen(node.Role)
	if node.Role != roles.RoleRunner {
		return res, cluster.Fenced("%s is %s, not runner: it does not run tasks", m.Name, node.Role)
	}
	t, tv, err := c.GetTask(ctx, owner)
	if err != nil {
		return res, a.Deps.Corrupt(ctx, err)
	}
	ctx = cluster.LogWith(ctx, "", "task", fmt.Sprintf("%s@%d", owner, t.Epoch), "epoch", t.Epoch)
	if t.Job != nil {
		ctx = cluster.LogWith(ctx, "", "job", t.Job.ID, "batch", t.Job.Batch)
	}
	if t.Holder != "" && t.Holder != m.Name {
		return res, cluster.Fenced("task of %s is held by %s (epoch %d), not %s", owner, t.Holder, t.Epoch, m.Name)
	}
	res.Job = t.Job != nil
	write := a.taskWriter(ctx, c, m.Name, owner, nv, tv)
	if !t.Pending() {
		res.Epoch, res.Status, res.Result = t.Epoch, t.RunningStatus, t.RunningResult
		return res, nil
	}
	if t.Job != nil {
		return a.runBatch(ctx, m, owner, t, write, res, start)
	}
	return a.runPlain(ctx, m, owner, t, write, res, start)
}

// runPlain runs a plain Task's requests from next_index, each result
// recorded in the write that advances next_index.
func (a *Activities) runPlain(ctx context.Context, m cluster.Member, owner string, t roles.Task, write func(roles.Task) (roles.Task, error), res cluster.RunTaskResult, start time.Time) (cluster.RunTaskResult, error) {
	var err error
	if t, err = markProcessing(t, m.Name, write); err != nil {
		return res, err
	}
	res.Epoch = t.Epoch
	defer a.started(ctx, m)()
	log := a.Deps.Logger(ctx)
	log.Info("running task", "from", t.NextIndex, "requests", len(t.RunningContent))
	// Two stages: request i+1 is fetched while the result of request i is
	// recorded, so the bookkeeping is off the critical path. A plain Task
	// keeps the reference's order: its results are recorded one by one,
	// each in the write that advances next_index (exactly once per task_id
	// and epoch).
	fctx, stopFetch := context.WithCancel(ctx)
	defer stopFetch()
	fetchAt := func(i int) <-chan fetched {
		ch := make(chan fetched, 1)
		task := t // the loop below replaces t; the fetch reads this copy
		go func() { ch <- a.fetchRequest(fctx, owner, task, i) }()
		return ch
	}
	pending := fetchAt(t.NextIndex)
	for t.NextIndex < len(t.RunningContent) {
		req := t.RunningContent[t.NextIndex]
		cluster.Heartbeat(ctx, t.NextIndex)
		f := <-pending
		if f.err != nil {
			return res, f.err
		}
		if t.NextIndex+1 < len(t.RunningContent) {
			pending = fetchAt(t.NextIndex + 1)
		}
		next, ok, dropped := recordFitted(t, f.d, a.MaxResultDetail, a.maxTaskBytes())
		if !ok {
			return res, fmt.Errorf("run task: result of task_id %d is not the next one", req.TaskID)
		}
		if dropped > 0 {
			log.Warn("result_detail: older entries dropped to keep the Task znode within its size cap (set --max-result-detail)",
				"dropped", dropped, "max_task_bytes", a.maxTaskBytes())
		}
		if t, err = write(next); err != nil {
			return res, err
		}
		res.Ran++
	}
	res.Status, res.Result = t.RunningStatus, t.RunningResult
	res.Duration = a.Deps.Now().Sub(start)
	log.Info("task finished", "status", t.RunningStatus, "success", t.RunningResult.SuccessCount, "fail", t.RunningResult.FailCount)
	return res, nil
}

// taskWriter returns the write of owner's Task by runner self: fenced by
// the Task's epoch and version (tv, raised by each write) and self's
// NodeState version nv, and, after a ZooKeeper session loss, by a fresh
// read of the Task's holder.
func (a *Activities) taskWriter(ctx context.Context, c *metadata.Cluster, self, owner string, nv, tv int32) func(roles.Task) (roles.Task, error) {
	session := a.Deps.Store.Session()
	return func(next roles.Task) (roles.Task, error) {
		next, op := c.FenceTask(owner, tv, next, self, next.Epoch)
		if s := a.Deps.Store.Session(); s != session {
			// The session was lost: make sure we still hold the Task before
			// writing anything (the compare-and-set below checks it too).
			cur, _, err := c.GetTask(ctx, owner)
			if err != nil {
				return next, err
			}
			if cur.Holder != self || cur.Epoch != next.Epoch {
				return next, cluster.Fenced("after a session loss, task of %s is held by %s at epoch %d", owner, cur.Holder, cur.Epoch)
			}
			session = s
		}
		err := a.Deps.Store.Multi(ctx, metadata.CheckOp(c.NodePath(self), nv), op)
		if errors.Is(err, metadata.ErrBadVersion) {
			cur, _, _ := c.GetTask(ctx, owner)
			n2, _, _ := c.GetNode(ctx, self)
			return next, cluster.Fenced("write refused for task of %s at epoch %d: runner %s is now %s, task holder %s epoch %d",
				owner, next.Epoch, self, n2.Role, cur.Holder, cur.Epoch)
		}
		if err != nil {
			return next, err
		}
		tv++
		return next, nil
	}
}

// keepAlive records an activity heartbeat every interval until the returned
// stop is called, so a slow request does not look like a dead worker.
func keepAlive(ctx context.Context, interval time.Duration) (stop func()) {
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(max(interval, 200*time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				cluster.Heartbeat(ctx)
			}
		}
	}()
	return func() { close(done) }
}

// markProcessing writes the Task as processing, held by self, unless it
// says so already (a plain Task also names the request in progress).
func markProcessing(t roles.Task, self string, write func(roles.Task) (roles.Task, error)) (roles.Task, error) {
	if t.RunningStatus == roles.TaskProcessing && t.Holder == self {
		return t, nil
	}
	t = t.Clone()
	t.RunningStatus = roles.TaskProcessing
	if t.Job == nil && t.NextIndex < len(t.RunningContent) {
		t.InProgressingID = strconv.Itoa(t.RunningContent[t.NextIndex].TaskID)
	}
	return write(t)
}

// started counts a Task as started and keeps its activity alive until the
// function it returns is called.
func (a *Activities) started(ctx context.Context, m cluster.Member) func() {
	done := a.Deps.Metrics.TaskStarted()
	stop := keepAlive(ctx, m.Timers.UpdateTime)
	return func() {
		stop()
		done()
	}
}
