package worker

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"syscall"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
)

// faultEnv names activities after whose successful completion the worker
// SIGKILLs itself, before Temporal hears of the completion: a real crash
// between two fail-over steps, for fault tests ("Activate" or
// "Discover,Activate"). Unset in production.
const faultEnv = "BATON_FAULT_KILL_AFTER"

type faultInterceptor struct {
	interceptor.WorkerInterceptorBase
	after map[string]bool
}

// newFaultInterceptor returns nil unless BATON_FAULT_KILL_AFTER is set.
func newFaultInterceptor(log *slog.Logger) interceptor.WorkerInterceptor {
	v := os.Getenv(faultEnv)
	if v == "" {
		return nil
	}
	f := &faultInterceptor{after: map[string]bool{}}
	for _, name := range strings.Split(v, ",") {
		f.after[strings.TrimSpace(name)] = true
	}
	log.Warn("fault injection armed: this worker kills itself after these activities", "activities", v)
	return f
}

func (f *faultInterceptor) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	i := &faultActivity{root: f}
	i.Next = next
	return i
}

type faultActivity struct {
	interceptor.ActivityInboundInterceptorBase
	root *faultInterceptor
}

func (a *faultActivity) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	res, err := a.Next.ExecuteActivity(ctx, in)
	if name := activity.GetInfo(ctx).ActivityType.Name; err == nil && a.root.after[name] {
		slog.Warn("fault injection: SIGKILL after activity", "activity", name)
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
	return res, err
}
