package activities_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/cluster"
	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/activities/metadata"
	"github.com/batoncrawl/baton/roles"
)

// fakeBatches is a jobs.Batches that records its calls and returns outcome.
type fakeBatches struct {
	mu      sync.Mutex
	outcome jobs.BatchOutcome
	runs    []jobs.BatchRun
	claims  []string // "job/batch holder@epoch"
	drained []bool   // what Drain said when each run started
}

func (f *fakeBatches) Claim(_ context.Context, job, batch, holder string, epoch int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.claims = append(f.claims, job+"/"+batch+" "+holder+"@"+itoa64(epoch))
	return nil
}

func (f *fakeBatches) RunBatch(_ context.Context, in jobs.BatchRun) (jobs.BatchOutcome, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	in.Log = nil
	if in.Drain != nil {
		f.drained = append(f.drained, in.Drain())
	}
	in.Drain = nil
	f.runs = append(f.runs, in)
	return f.outcome, nil
}

func itoa64(n int64) string { return jsonNumber(n) }

// assignBatch writes a crawl-job Task for instance i as JobAssign does: a
// reference to a batch of the job store, held by i, already processing.
func (f *clusterFixture) assignBatch(i int, job, batch string, size int) roles.Task {
	f.t.Helper()
	c := f.c()
	cur, v, err := c.GetTask(context.Background(), name(i))
	require.NoError(f.t, err)
	t := roles.EmptyTask()
	t.Epoch = cur.Epoch + 1
	t.Job = &roles.JobRef{ID: job, Batch: batch, Size: size}
	t.Holder, t.RunningStatus = name(i), roles.TaskProcessing
	_, err = f.mem.Set(context.Background(), c.TaskPath(name(i)), metadata.Encode(t), v)
	require.NoError(f.t, err)
	return t
}

// A crawl-job Task is a reference: RunTask hands the batch to the
// jobs.Batches at the Task's epoch and writes the Task once, at the end,
// with the batch's counters.
func TestRunTaskRunsAJobBatchThroughTheStore(t *testing.T) {
	f := newClusterFixture(t, 1, 1)
	f.start()
	a := f.acts(nil)
	fb := &fakeBatches{outcome: jobs.BatchOutcome{Success: 7, Fail: 2, Ran: 9}}
	a.Batches = fb
	tk := f.assignBatch(1, "j", "j-b000003", 9)
	_, before, err := f.mem.Get(context.Background(), f.c().TaskPath(name(1)))
	require.NoError(t, err)

	res, err := a.RunTask(context.Background(), cluster.RunTaskInput{Member: f.member(1)})
	require.NoError(t, err)
	assert.Equal(t, []jobs.BatchRun{{Job: "j", Batch: "j-b000003", Runner: name(1), Epoch: tk.Epoch}}, fb.runs)
	assert.Equal(t, []bool{false}, fb.drained, "a runner the group wants is not drained")
	assert.Equal(t, 9, res.Ran)
	got := f.task(1)
	assert.Equal(t, roles.TaskDone, got.RunningStatus)
	assert.Equal(t, roles.RunningResult{SuccessCount: 7, FailCount: 2}, got.RunningResult)
	assert.Empty(t, got.RunningContent, "no URL in the znode")
	_, after, err := f.mem.Get(context.Background(), f.c().TaskPath(name(1)))
	require.NoError(t, err)
	assert.Equal(t, before+1, after, "one ZooKeeper write for the whole batch")
}

// The store refused the runner's epoch (a hand-over raised it): RunTask is
// fenced and does not write the Task.
func TestRunTaskFencedByTheStore(t *testing.T) {
	f := newClusterFixture(t, 1, 1)
	f.start()
	a := f.acts(nil)
	a.Batches = &fakeBatches{outcome: jobs.BatchOutcome{Fenced: true, Reason: "held by sc-crawler_2 at epoch 9"}}
	f.assignBatch(1, "j", "j-b000000", 3)
	_, err := a.RunTask(context.Background(), cluster.RunTaskInput{Member: f.member(1)})
	require.Error(t, err)
	assert.True(t, cluster.IsFenced(err), "%v", err)
	assert.Contains(t, err.Error(), "held by sc-crawler_2 at epoch 9")
	assert.Equal(t, roles.TaskProcessing, f.task(1).RunningStatus)
}

// A batch that cannot run ends its Task as terminate with the reason, so
// the job sees it failed instead of waiting forever; a hand-over does not
// run it again.
func TestRunTaskEndsABatchThatCannotRun(t *testing.T) {
	f := newClusterFixture(t, 1, 1)
	f.start()
	a := f.acts(nil)
	a.Batches = &fakeBatches{outcome: jobs.BatchOutcome{Failed: "job j: its spec cannot be read"}}
	f.assignBatch(1, "j", "j-b000000", 3)
	_, err := a.RunTask(context.Background(), cluster.RunTaskInput{Member: f.member(1)})
	require.NoError(t, err)
	got := f.task(1)
	assert.Equal(t, roles.TaskTerminate, got.RunningStatus)
	require.NotEmpty(t, got.ResultDetail)
	assert.Contains(t, got.ResultDetail[len(got.ResultDetail)-1].ErrorMsg, "spec cannot be read")
	_, ok := roles.HandOver(got, name(1), name(2))
	assert.False(t, ok, "nothing to hand over")
}

// A hand-over raises the batch's epoch in the store as in ZooKeeper.
func TestHandOverClaimsTheBatchInTheStore(t *testing.T) {
	f := newClusterFixture(t, 2, 1)
	f.start()
	ctx := context.Background()
	a := f.acts(nil)
	fb := &fakeBatches{}
	a.Batches = fb
	f.assignBatch(2, "j", "j-b000001", 5)
	in := peer(f.member(3), 2, roles.RoleRunner)
	_, err := a.Discover(ctx, in)
	require.NoError(t, err)
	_, err = a.Activate(ctx, in)
	require.NoError(t, err)
	h, err := a.HandOver(ctx, in, false)
	require.NoError(t, err)
	assert.True(t, h.Pending)
	own := f.task(3)
	require.NotNil(t, own.Job)
	assert.Equal(t, []string{"j/j-b000001 " + name(3) + "@" + itoa64(own.Epoch)}, fb.claims)
}

// After a batch of its own, RunTask waits for the Runner's next Task as
// WaitTask does (up to Linger: ten minutes by default, so that a cluster's
// next job starts without a WaitTask's end and a RunTask's start) and runs
// it in the same activity. The Runner marked dead meanwhile ends it at
// once, however long Linger is: the WaitTask after finds it so.
func TestRunTaskLingersAsWaitTaskDoes(t *testing.T) {
	f := newClusterFixture(t, 1, 1)
	f.start()
	ctx := context.Background()
	a := f.acts(nil)
	a.Linger = time.Hour
	fb := &fakeBatches{outcome: jobs.BatchOutcome{Success: 1, Ran: 1}}
	a.Batches = fb
	f.assignBatch(1, "j", "j-b000000", 1)
	done := goRun(func() (cluster.RunTaskResult, error) {
		return a.RunTask(ctx, cluster.RunTaskInput{Member: f.member(1)})
	})
	f.spy.waitCount(t, f.spy.watch, f.c().TaskPath(name(1)), 1, "RunTask waits for the next Task after its batch")
	f.spy.waitCount(t, f.spy.watch, f.c().NodePath(name(1)), 1, "and watches its NodeState as WaitTask does")
	assert.Equal(t, roles.TaskDone, f.task(1).RunningStatus)
	f.assignBatch(1, "k", "k-b000000", 1) // the next job's first batch
	f.spy.waitCount(t, f.spy.watch, f.c().TaskPath(name(1)), 2, "RunTask waits again after the second batch")
	// The second watch may be armed before the second batch runs (a
	// change of the Task that is not yet the new batch): wait for the run.
	require.Eventually(t, func() bool {
		fb.mu.Lock()
		defer fb.mu.Unlock()
		return len(fb.runs) == 2
	}, 10*time.Second, 5*time.Millisecond, "both batches ran in one RunTask")
	notReturned(t, done, "RunTask waiting for the next Task")
	_, err := f.acts(nil).Discover(ctx, peer(f.member(2), 1, roles.RoleRunner)) // marked dead
	require.NoError(t, err)
	res, err := await(t, done, "RunTask of a Runner marked dead")
	require.NoError(t, err)
	assert.Equal(t, 2, res.Tasks)
	w, err := a.WaitTask(ctx, f.member(1))
	require.NoError(t, err)
	assert.Equal(t, cluster.WaitTaskResult{Fenced: true, Role: roles.RoleDeadRunner}, w)
}

// In All-are-Runner mode RunTask waits a second at most for the next
// Task: while it runs, the runner has no room to take over a dead peer's.
func TestRunTaskLingersBrieflyWhenAllAreRunners(t *testing.T) {
	f := newClusterFixture(t, 2, 0)
	f.start()
	a := f.acts(nil)
	a.Linger = time.Hour
	a.Batches = &fakeBatches{outcome: jobs.BatchOutcome{Success: 1, Ran: 1}}
	f.assignBatch(1, "j", "j-b000000", 1)
	start := time.Now()
	res, err := a.RunTask(context.Background(), cluster.RunTaskInput{Member: f.member(1)})
	require.NoError(t, err)
	assert.Equal(t, 1, res.Tasks)
	assert.Less(t, time.Since(start), 30*time.Second, "returned after its short wait, not Linger's hour")
}
