package worker

import (
	"context"
	"errors"
	"sync/atomic"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/batoncrawl/baton/activities/heartbeat"
)

// errTypeStopping is the error type of an activity ended by its worker's
// clean stop.
const errTypeStopping = "WorkerStopping"

// stopInterceptor keeps a clean stop (SIGTERM, Ctrl-C) out of the error
// log: the long-running activities (BeatHeart, WatchRunners, WaitTask…)
// end with context.Canceled or heartbeat.ErrStopping when their worker
// stops, and the Temporal SDK logs every activity error at ERROR
// ("Activity error."). Such an error, while the worker stops, becomes a
// benign application error: the SDK logs it at DEBUG, and it is still a
// failure to Temporal (retried as before). So is a cancellation while the
// instance leaves its group (leaving): it closes its workflows before it
// stops its workers, and an activity whose heartbeat finds its workflow
// closed is cancelled by the SDK then. Any other error, and any error
// while the worker is neither stopping nor leaving, is left as it is.
type stopInterceptor struct {
	interceptor.WorkerInterceptorBase
	leaving *atomic.Bool // set once the instance leaves its group (nil: never)
}

func (s *stopInterceptor) InterceptActivity(_ context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	i := &stopActivity{leaving: s.leaving}
	i.Next = next
	return i
}

type stopActivity struct {
	interceptor.ActivityInboundInterceptorBase
	leaving *atomic.Bool
}

func (a *stopActivity) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	res, err := a.Next.ExecuteActivity(ctx, in)
	if err != nil && endedByStop(ctx, err, a.leaving) {
		err = temporal.NewApplicationErrorWithOptions("ended by the worker's stop: "+err.Error(), errTypeStopping,
			temporal.ApplicationErrorOptions{Category: temporal.ApplicationErrorCategoryBenign, Cause: err})
	}
	return res, err
}

// endedByStop reports whether err is an activity's end because its worker
// stops: a cancellation or heartbeat.ErrStopping while the instance
// leaves its group (leaving set) or the worker's stop channel is closed
// (or its context was ended by the worker's shutdown).
func endedByStop(ctx context.Context, err error, leaving *atomic.Bool) bool {
	if !errors.Is(err, context.Canceled) && !errors.Is(err, heartbeat.ErrStopping) {
		return false
	}
	if leaving != nil && leaving.Load() {
		return true
	}
	if errors.Is(context.Cause(ctx), sdkworker.ErrWorkerShutdown) {
		return true
	}
	select {
	case <-activity.GetWorkerStopChannel(ctx):
		return true
	default:
		return false
	}
}
