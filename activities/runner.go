package activities

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/activities/metadata"
	"github.com/batoncrawl/baton/roles"
)

// WaitTask blocks until the Runner's own Task has requests to run, or until
// the Runner is no longer a runner (marked dead: it must stop; or, idle
// while the group has more runners than total_runner, it stepped down to a
// backup: Fenced with Role backup-runner). It is woken by ZooKeeper watches
// on its Task, NodeState and GroupState (re-armed after each event), with
// check_task as a safety re-read.
func (a *Activities) WaitTask(ctx context.Context, m Member) (WaitTaskResult, error) {
	ctx = logWith(ctx, roles.RoleRunner, "crawler", m.Name)
	c := a.cluster(m.Group)
	var (
		watches []<-chan struct{}
		selfZ   watchedZnode // the runner's membership entry
	)
	for {
		nd, _, nch, err := a.Store.GetW(ctx, c.NodePath(m.Name))
		if errors.Is(err, metadata.ErrNotFound) {
			return WaitTaskResult{Fenced: true}, nil // no longer a member: the life cycle registers again
		}
		if err != nil {
			return WaitTaskResult{}, err
		}
		node, err := roles.DecodeNodeState(nd)
		if err != nil {
			return WaitTaskResult{}, a.corrupt(ctx, &metadata.CorruptError{Path: c.NodePath(m.Name), Err: err})
		}
		if node.Role != roles.RoleRunner {
			return WaitTaskResult{Fenced: true, Role: node.Role}, nil
		}
		td, tv, tch, err := a.Store.GetW(ctx, c.TaskPath(m.Name))
		if err != nil && !errors.Is(err, metadata.ErrNotFound) {
			return WaitTaskResult{}, err
		}
		if err == nil {
			t, err := roles.DecodeTask(td)
			switch {
			case err != nil:
				// Reported, and waited on: the next write of a valid Task wakes us.
				a.corrupt(ctx, &metadata.CorruptError{Path: c.TaskPath(m.Name), Err: err})
			case t.Pending() && (t.Holder == "" || t.Holder == m.Name):
				return WaitTaskResult{Pending: true, Role: node.Role}, nil
			default:
				// Idle: a runner the group no longer wants steps down now.
				// Its membership entry says so, read again only after it
				// changed (a watch): other members' changes do not wake it.
				surplus := a.surplus(ctx, c, m, &selfZ)
				watches = append(watches[:0], selfZ.changed)
				if surplus {
					down, err := a.stepDown(ctx, c, m, t, tv)
					if err != nil {
						return WaitTaskResult{}, err
					}
					if down {
						return WaitTaskResult{Fenced: true, Role: roles.RoleBackup}, nil
					}
					continue
				}
			}
		}
		heartbeat(ctx)
		if _, err := metadata.WaitAny(ctx, min(m.Timers.CheckTask, 2*time.Second), append(watches, nch, tch)...); err != nil {
			return WaitTaskResult{}, err
		}
	}
}

// RunTask runs Owner's Task as Member: it marks the Task processing, runs
// its requests from next_index on, and after each request records its
// result, the counters and in_progressing_id in one compare-and-set write
// that also checks the runner's NodeState has not changed. A runner that was
// marked dead, or whose Task was handed over (a higher epoch or another
// holder), is fenced: its write is refused and the activity fails with
// ErrTypeFenced, so a stale holder never records a result. The result of a
// request is recorded exactly once (keyed by task_id and epoch).
//
// A Runner's own crawl-job Task is usually followed within milliseconds by
// the job's next batch, so after one RunTask lingers (watching its Task
// znode, up to linger) and runs the next Task in the same activity, which
// saves the Temporal round trips of a new WaitTask and RunTask.
func (a *Activities) RunTask(ctx context.Context, in RunTaskInput) (RunTaskResult, error) {
	total, err := a.runTask(ctx, in)
	if err != nil || (in.Owner != "" && in.Owner != in.Member.Name) || !total.Job {
		return total, err
	}
	for k := 1; k < maxTasksPerRun; k++ {
		if !a.awaitOwnTask(ctx, in.Member, linger) {
			break
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

// linger is how long RunTask waits for a crawl job's next batch.
const (
	linger         = time.Second
	maxTasksPerRun = 1000
)

// awaitOwnTask waits up to d for the member's own Task to become pending
// (a ZooKeeper watch), and reports whether it did.
func (a *Activities) awaitOwnTask(ctx context.Context, m Member, d time.Duration) bool {
	c := a.cluster(m.Group)
	deadline := time.Now().Add(d)
	for {
		data, _, ch, err := a.Store.GetW(ctx, c.TaskPath(m.Name))
		if err != nil {
			return false
		}
		if t, err := roles.DecodeTask(data); err == nil && t.Pending() && (t.Holder == "" || t.Holder == m.Name) {
			return true
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		heartbeat(ctx)
		if err := wait(ctx, ch, left); err != nil {
			return false
		}
	}
}

// runTask runs one Task (see RunTask).
func (a *Activities) runTask(ctx context.Context, in RunTaskInput) (RunTaskResult, error) {
	m, owner := in.Member, in.Owner
	if owner == "" {
		owner = m.Name
	}
	ctx = logWith(ctx, roles.RoleRunner, "crawler", m.Name, "task_owner", owner)
	c := a.cluster(m.Group)
	start := a.now()
	res := RunTaskResult{Owner: owner, Tasks: 1}

	node, nv, err := c.GetNode(ctx, m.Name)
	if errors.Is(err, metadata.ErrNotFound) {
		return res, fenced("%s has no NodeState: it is not a member any more", m.Name)
	}
	if err != nil {
		return res, a.corrupt(ctx, err)
	}
	a.seen(node.Role)
	if node.Role != roles.RoleRunner {
		return res, fenced("%s is %s, not runner: it does not run tasks", m.Name, node.Role)
	}
	t, tv, err := c.GetTask(ctx, owner)
	if err != nil {
		return res, a.corrupt(ctx, err)
	}
	ctx = logWith(ctx, "", "task", fmt.Sprintf("%s@%d", owner, t.Epoch), "epoch", t.Epoch)
	if t.Job != nil {
		ctx = logWith(ctx, "", "job", t.Job.ID, "batch", t.Job.Batch)
	}
	if t.Holder != "" && t.Holder != m.Name {
		return res, fenced("task of %s is held by %s (epoch %d), not %s", owner, t.Holder, t.Epoch, m.Name)
	}
	res.Job = t.Job != nil
	session := a.Store.Session()
	write := func(next roles.Task) (roles.Task, error) {
		next, op := c.FenceTask(owner, tv, next, m.Name, next.Epoch)
		if s := a.Store.Session(); s != session {
			// The session was lost: make sure we still hold the Task before
			// writing anything (the compare-and-set below checks it too).
			cur, _, err := c.GetTask(ctx, owner)
			if err != nil {
				return next, err
			}
			if cur.Holder != m.Name || cur.Epoch != next.Epoch {
				return next, fenced("after a session loss, task of %s is held by %s at epoch %d", owner, cur.Holder, cur.Epoch)
			}
			session = s
		}
		err := a.Store.Multi(ctx, metadata.CheckOp(c.NodePath(m.Name), nv), op)
		if errors.Is(err, metadata.ErrBadVersion) {
			cur, _, _ := c.GetTask(ctx, owner)
			n2, _, _ := c.GetNode(ctx, m.Name)
			return next, fenced("write refused for task of %s at epoch %d: runner %s is now %s, task holder %s epoch %d",
				owner, next.Epoch, m.Name, n2.Role, cur.Holder, cur.Epoch)
		}
		if err != nil {
			return next, err
		}
		tv++
		return next, nil
	}
	if !t.Pending() {
		res.Epoch, res.Status, res.Result = t.Epoch, t.RunningStatus, t.RunningResult
		return res, nil
	}
	if t.Job != nil {
		return a.runBatch(ctx, m, owner, t, write, res, start)
	}
	if t.RunningStatus != roles.TaskProcessing || t.Holder != m.Name {
		t = t.Clone()
		t.RunningStatus = roles.TaskProcessing
		if t.NextIndex < len(t.RunningContent) {
			t.InProgressingID = strconv.Itoa(t.RunningContent[t.NextIndex].TaskID)
		}
		if t, err = write(t); err != nil {
			return res, err
		}
	}
	res.Epoch = t.Epoch
	defer a.Metrics.TaskStarted()()
	defer keepAlive(ctx, m.Timers.UpdateTime)()
	log := a.log(ctx)
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
		heartbeat(ctx, t.NextIndex)
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
	res.Duration = a.now().Sub(start)
	log.Info("task finished", "status", t.RunningStatus, "success", t.RunningResult.SuccessCount, "fail", t.RunningResult.FailCount)
	return res, nil
}

// ZooKeeper refuses a znode larger than 1 MiB (jute.maxbuffer): the write
// fails as a lost connection, and the activity would retry it for ever. A
// Runner therefore keeps the Task znodes it writes within a cap below it.
const (
	// DefaultMaxTaskBytes bounds an encoded Task written by a Runner.
	DefaultMaxTaskBytes = 768 << 10
	// Bounds on one result detail's strings: the response (a page's
	// title, or a body's excerpt), the error, and the URL (whole in
	// running_content).
	maxDetailResponse = 1 << 10
	maxDetailError    = 2 << 10
	maxDetailURL      = 2 << 10
)

func (a *Activities) maxTaskBytes() int {
	if a.MaxTaskBytes > 0 {
		return a.MaxTaskBytes
	}
	return DefaultMaxTaskBytes
}

// recordFitted records d in t (roles.Task.Record) so that the encoded Task
// stays within limit bytes: d's strings are bounded (boundDetail); when
// the Task would still be larger, its oldest details are dropped first, as
// --max-result-detail drops them (running_result still counts them), and
// dropped says how many; a result that does not fit even alone is recorded
// as a failure that says so, without its response. Either way the result
// is recorded once, in the write that advances next_index: never an
// error, never retried. ok is Record's.
func recordFitted(t roles.Task, d roles.ResultDetail, maxDetails, limit int) (next roles.Task, ok bool, dropped int) {
	d = boundDetail(d)
	next, ok = t.Record(d, maxDetails)
	if !ok {
		return next, false, 0
	}
	size := len(metadata.Encode(next))
	for size > limit && len(next.ResultDetail) > 1 {
		// Drop about as many of the oldest as the excess takes, then weigh
		// again.
		n, freed := 0, 0
		for n < len(next.ResultDetail)-1 && freed < size-limit {
			freed += len(metadata.Encode(next.ResultDetail[n])) + 1
			n++
		}
		next.ResultDetail = next.ResultDetail[n:]
		dropped += n
		size = len(metadata.Encode(next))
	}
	if size <= limit {
		return next, true, dropped
	}
	fail := d
	fail.State, fail.Response = roles.TaskError, ""
	fail.ErrorMsg = fmt.Sprintf("result not recorded: the Task znode would be %d bytes, more than the %d a Runner writes (ZooKeeper refuses a znode over 1 MiB)", size, limit)
	next, ok = t.Record(fail, maxDetails)
	dropped += len(next.ResultDetail) - 1
	next.ResultDetail = next.ResultDetail[len(next.ResultDetail)-1:]
	return next, ok, dropped
}

// boundDetail cuts a result detail's strings to their bounds (a page's
// title is bounded by the engine already; a Fetcher's excerpt or error, or
// a long URL, is bounded here).
func boundDetail(d roles.ResultDetail) roles.ResultDetail {
	d.Response = cutUTF8(d.Response, maxDetailResponse)
	d.ErrorMsg = cutUTF8(d.ErrorMsg, maxDetailError)
	d.URL = cutUTF8(d.URL, maxDetailURL)
	return d
}

// cutUTF8 cuts s to at most n bytes on a character boundary, marking the
// cut with "…".
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	n -= len("…")
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// fetched is the outcome of fetching one request of a plain Task.
type fetched struct {
	d   roles.ResultDetail
	err error
}

// fetchRequest runs request i of a plain Task through the Fetcher. An
// invalid request becomes a failed result that names the node and index.
func (a *Activities) fetchRequest(ctx context.Context, owner string, t roles.Task, i int) fetched {
	req := t.RunningContent[i]
	if err := req.Validate(); err != nil {
		d := roles.ResultDetail{TaskID: req.TaskID, State: roles.TaskError, URL: req.URL,
			ErrorMsg: fmt.Sprintf("node %s task: running_content[%d]: %v", owner, i, err)}
		a.Metrics.PageError("")
		a.log(ctx).Warn("invalid request recorded as failed", "task_id", req.TaskID, "err", d.ErrorMsg)
		return fetched{d: d}
	}
	if a.Fetcher == nil {
		return fetched{err: errors.New("run task: no fetcher configured")}
	}
	fr := a.Fetcher.Fetch(ctx, req, t)
	if ctx.Err() != nil {
		return fetched{err: ctx.Err()}
	}
	a.Metrics.Page("", fr.StatusCode, fr.Err != nil || fr.StatusCode >= 400, fr.Bytes, fr.Duration)
	d := roles.ResultDetail{TaskID: req.TaskID, State: roles.TaskDone, StatusCode: fr.StatusCode, URL: req.URL,
		Response: fr.Response, Bytes: fr.Bytes, DurationMS: fr.Duration.Milliseconds()}
	if fr.Err != nil {
		d.State, d.ErrorMsg = roles.TaskError, fr.Err.Error()
	} else if fr.StatusCode >= 400 {
		d.State = roles.TaskError
		d.ErrorMsg = fmt.Sprintf("HTTP %d", fr.StatusCode)
	}
	return fetched{d: d}
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
				heartbeat(ctx)
			}
		}
	}()
	return func() { close(done) }
}

// runBatch runs a crawl job's Task: its Task znode names a batch of the
// job store, whose URLs the jobs.Batches crawls concurrently and records
// once each, fenced by the Task's epoch in the store. The znode is written
// only when the batch ends (done, with its counters, or terminate with the
// reason it could not run): a crawl job costs ZooKeeper a write on
// assignment and one at the end of each batch, not one per page.
func (a *Activities) runBatch(ctx context.Context, m Member, owner string, t roles.Task, write func(roles.Task) (roles.Task, error), res RunTaskResult, start time.Time) (RunTaskResult, error) {
	if a.Batches == nil {
		return res, errors.New("run job task: this worker has no job store")
	}
	if t.RunningStatus != roles.TaskProcessing || t.Holder != m.Name {
		t = t.Clone()
		t.RunningStatus = roles.TaskProcessing
		var err error
		if t, err = write(t); err != nil {
			return res, err
		}
	}
	res.Epoch = t.Epoch
	defer a.Metrics.TaskStarted()()
	defer keepAlive(ctx, m.Timers.UpdateTime)()
	log := a.log(ctx)
	log.Info("running task", "batch_size", t.Job.Size)
	c := a.cluster(m.Group)
	var (
		mu   sync.Mutex
		self watchedZnode // the runner's membership entry
	)
	drain := func() bool {
		if a.Leaving != nil && a.Leaving.Load() {
			return true
		}
		mu.Lock()
		defer mu.Unlock()
		return owner == m.Name && a.surplus(ctx, c, m, &self)
	}
	out, err := a.Batches.RunBatch(ctx, jobs.BatchRun{Job: t.Job.ID, Batch: t.Job.Batch, Runner: m.Name, Epoch: t.Epoch, Log: log, Drain: drain})
	if err != nil {
		return res, fmt.Errorf("run job %s batch %s: %w", t.Job.ID, t.Job.Batch, err)
	}
	if out.Fenced {
		return res, fenced("task of %s (job %s batch %s) at epoch %d: %s", owner, t.Job.ID, t.Job.Batch, t.Epoch, out.Reason)
	}
	next := t.Clone()
	next.RunningResult = roles.RunningResult{SuccessCount: out.Success, FailCount: out.Fail}
	next.RunningStatus = roles.TaskDone
	if out.Failed != "" {
		// Not error: a hand-over would run it again, and it cannot run.
		next.RunningStatus = roles.TaskTerminate
		next.ResultDetail = append(next.ResultDetail, roles.ResultDetail{State: roles.TaskError, ErrorMsg: out.Failed, Epoch: t.Epoch})
		log.Error("batch cannot run", "err", out.Failed)
	}
	if _, err := write(next); err != nil {
		return res, err
	}
	res.Ran = out.Ran
	res.Status, res.Result = next.RunningStatus, next.RunningResult
	res.Duration = a.now().Sub(start)
	log.Info("task finished", "status", next.RunningStatus, "success", out.Success, "fail", out.Fail, "ran", out.Ran)
	return res, nil
}
