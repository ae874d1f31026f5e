//go:build recordhistory

package workflows

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/testsuite"
)

// TestRecordCrawlJobControlHistory records testdata/crawl_job_local_start_history.json
// for TestReplayCrawlJobLocalStartHistory (run it by hand after an intended
// change of CrawlJob; testdata/crawl_job_control_history.json is its
// recording from before local-start, and stays):
//
//	go test -tags recordhistory -run TestRecordCrawlJobControlHistory ./workflows/
//
// A CrawlJob on a Temporal dev server with stand-in activities under the
// real names: paused while a batch is in flight, resumed, then cancelled
// with Temporal's cancellation; it ends Canceled.
func TestRecordCrawlJobControlHistory(t *testing.T) {
	tmp := testsuite.StartTemporal(t)
	c := tmp.Client(t)
	spec := jobSpec()
	queue := JobQueue(spec.Group)
	var mu sync.Mutex
	queued, seq := 100, 0
	var controls []string
	w := worker.New(c, queue, worker.Options{})
	Register(w)
	w.RegisterActivityWithOptions(func(_ context.Context, in jobs.AssignInput) (jobs.AssignResult, error) {
		mu.Lock()
		defer mu.Unlock()
		var res jobs.AssignResult
		if len(in.InFlight) == 0 && queued > 0 {
			n := min(queued, 10)
			queued -= n
			res.Assigned = []jobs.BatchRef{{Batch: jobs.BatchID(spec.ID, in.Seq), Runner: crawler(1), Size: n}}
			seq++
		}
		res.Stats = jobs.Stats{Queued: queued}
		return res, nil
	}, activity.RegisterOptions{Name: "JobAssign"})
	await := func(ctx context.Context, _ jobs.Spec, inflight []jobs.BatchRef) (jobs.AwaitResult, error) {
		select {
		case <-time.After(300 * time.Millisecond):
		case <-ctx.Done():
			return jobs.AwaitResult{}, ctx.Err()
		}
		mu.Lock()
		defer mu.Unlock()
		return jobs.AwaitResult{Done: inflight, Stats: jobs.Stats{Queued: queued}}, nil
	}
	w.RegisterActivityWithOptions(await, activity.RegisterOptions{Name: "JobAwait"})
	w.RegisterActivityWithOptions(await, activity.RegisterOptions{Name: "JobDrain"})
	w.RegisterActivityWithOptions(func(_ context.Context, job, state string) error {
		mu.Lock()
		defer mu.Unlock()
		controls = append(controls, state)
		return nil
	}, activity.RegisterOptions{Name: "JobControl"})
	require.NoError(t, w.Start())
	defer w.Stop()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id := JobWorkflowID(spec.Group, spec.ID)
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, CrawlJob, JobInput{Spec: spec})
	require.NoError(t, err)
	waitState := func(state, control string) {
		t.Helper()
		require.Eventually(t, func() bool {
			v, err := c.QueryWorkflow(ctx, id, "", QueryProgress)
			if err != nil {
				return false
			}
			var p JobProgress
			return v.Get(&p) == nil && p.State == state && p.Control == control
		}, 30*time.Second, 20*time.Millisecond, "state %s, control %s", state, control)
	}
	waitState(JobRunning, jobs.ControlRunning)
	require.NoError(t, c.SignalWorkflow(ctx, id, "", SignalPause, nil))
	waitState(JobPaused, jobs.ControlPaused)
	require.NoError(t, c.SignalWorkflow(ctx, id, "", SignalResume, nil))
	waitState(JobRunning, jobs.ControlRunning)
	require.NoError(t, c.CancelWorkflow(ctx, id, ""))
	err = run.Get(ctx, nil)
	require.Error(t, err, "it ends canceled")
	mu.Lock()
	require.Equal(t, []string{jobs.ControlPaused, jobs.ControlRunning, jobs.ControlCancelled}, controls)
	mu.Unlock()

	var h historypb.History
	it := c.GetWorkflowHistory(ctx, id, run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		require.NoError(t, err)
		h.Events = append(h.Events, e)
	}
	data, err := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(&h)
	require.NoError(t, err)
	out := filepath.Join("testdata", "crawl_job_local_start_history.json")
	require.NoError(t, os.WriteFile(out, append(data, '\n'), 0o644))
	t.Logf("wrote %s: %d events", out, len(h.Events))
}
