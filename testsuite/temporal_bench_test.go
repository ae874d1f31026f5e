package testsuite_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/batoncrawl/baton/testsuite"
)

// BenchmarkTemporalDispatch measures what a Temporal dev server adds to
// every workflow step, side by side: with the server's default transfer
// queue read rate (20 a second) and with the harness's and the local
// stack's (testsuite.TransferPollRPS). A one-step workflow (one activity)
// is started 30 times, one after the other, against a worker already
// polling; it reports the medians of submit → first workflow task, submit
// → activity started and submit → workflow completed. Run it with
//
//	go test ./testsuite/ -run '^$' -bench TemporalDispatch -benchtime=1x -v
//
// On the 2-core machine the default held each workflow task 25 ms on
// average: the dev server has one history shard and its transfer queue,
// read at most 20 times a second, hands matching the tasks.
func BenchmarkTemporalDispatch(b *testing.B) {
	for _, rps := range []int{20, testsuite.TransferPollRPS} {
		b.Run(fmt.Sprintf("transfer-rps-%d", rps), func(b *testing.B) {
			tmp := testsuite.StartTemporal(b, testsuite.WithTemporalDynamicConfig("history.transferProcessorMaxPollRPS", strconv.Itoa(rps)))
			tc := tmp.Client(b)
			const queue = "dispatch-bench"
			started, acted := make(chan time.Time, 1), make(chan time.Time, 1)
			w := worker.New(tc, queue, worker.Options{})
			w.RegisterWorkflowWithOptions(func(ctx workflow.Context) error {
				// Not deterministic on replay, and not meant to be: the
				// benchmark's clock, read once per run as it starts.
				if !workflow.IsReplaying(ctx) {
					started <- time.Now()
				}
				ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
				return workflow.ExecuteActivity(ctx, "DispatchStep").Get(ctx, nil)
			}, workflow.RegisterOptions{Name: "DispatchBench"})
			w.RegisterActivityWithOptions(func(context.Context) error {
				acted <- time.Now()
				return nil
			}, activity.RegisterOptions{Name: "DispatchStep"})
			if err := w.Start(); err != nil {
				b.Fatal(err)
			}
			defer w.Stop()
			const runs = 30
			var wf, act, done []time.Duration
			b.ResetTimer()
			for range b.N {
				for i := range runs {
					t0 := time.Now()
					run, err := tc.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{
						ID: fmt.Sprintf("dispatch-%d-%d", rps, i), TaskQueue: queue}, "DispatchBench")
					if err != nil {
						b.Fatal(err)
					}
					wf = append(wf, (<-started).Sub(t0))
					act = append(act, (<-acted).Sub(t0))
					if err := run.Get(context.Background(), nil); err != nil {
						b.Fatal(err)
					}
					done = append(done, time.Since(t0))
				}
			}
			b.StopTimer()
			med := func(ds []time.Duration) time.Duration {
				slices.Sort(ds)
				return ds[len(ds)/2]
			}
			mw, ma, md := med(wf), med(act), med(done)
			b.ReportMetric(float64(mw.Microseconds())/1000, "first-task-ms")
			b.ReportMetric(float64(ma.Microseconds())/1000, "activity-ms")
			b.ReportMetric(float64(md.Microseconds())/1000, "done-ms")
			b.Logf("transfer queue read at most %d times a second: submit → first workflow task %v, → activity %v, → completed %v (medians of %d)",
				rps, mw.Round(100*time.Microsecond), ma.Round(100*time.Microsecond), md.Round(100*time.Microsecond), runs*b.N)
		})
	}
}
