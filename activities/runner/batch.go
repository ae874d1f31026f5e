package runner

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/batoncrawl/baton/activities/cluster"
	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/roles"
)

// runBatch runs a crawl job's Task: its Task znode names a batch of the
// job store, whose URLs the jobs.Batches crawls concurrently and records
// once each, fenced by the Task's epoch in the store. The znode is written
// only when the batch ends (done, with its counters, or terminate with the
// reason it could not run): a crawl job costs ZooKeeper a write on
// assignment and one at the end of each batch, not one per page.
func (a *Activities) runBatch(ctx context.Context, m cluster.Member, owner string, t roles.Task, write func(roles.Task) (roles.Task, error), res cluster.RunTaskResult, start time.Time) (cluster.RunTaskResult, error) {
	if a.Deps.Batches == nil {
		return res, errors.New("run job task: this worker has no job store")
	}
	t, err := markProcessing(t, m.Name, write)
	if err != nil {
		return res, err
	}
	res.Epoch = t.Epoch
	defer a.started(ctx, m)()
	log := a.Deps.Logger(ctx)
	log.Info("running task", "batch_size", t.Job.Size)
	c := a.Deps.Cluster(m.Group)
	var (
		mu   sync.Mutex
		self cluster.WatchedZnode // the runner's membership entry
	)
	drain := func() bool {
		if a.Leaving != nil && a.Leaving.Load() {
			return true
		}
		mu.Lock()
		defer mu.Unlock()
		return owner == m.Name && a.surplus(ctx, c, m, &self)
	}
	out, err := a.Deps.Batches.RunBatch(ctx, jobs.BatchRun{Job: t.Job.ID, Batch: t.Job.Batch, Runner: m.Name, Epoch: t.Epoch, Log: log, Drain: drain})
	if err != nil {
		return res, fmt.Errorf("run job %s batch %s: %w", t.Job.ID, t.Job.Batch, err)
	}
	if out.Fenced {
		return res, cluster.Fenced("task of %s (job %s batch %s) at epoch %d: %s", owner, t.Job.ID, t.Job.Batch, t.Epoch, out.Reason)
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
	res.Duration = a.Deps.Now().Sub(start)
	log.Info("task finished", "status", next.RunningStatus, "success", out.Success, "fail", out.Fail, "ran", out.Ran)
	return res, nil
}
