package activities

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/activities/metadata"
	"github.com/batoncrawl/baton/activities/telemetry"
	"github.com/batoncrawl/baton/roles"
)

// Activities holds the clients every activity uses. Its methods are safe
// for concurrent use; tests register (*Activities)(nil).Method and mock them.
type Activities struct {
	Store   metadata.Store
	Root    string // ZooKeeper root; "" means metadata.DefaultRoot
	Fetcher Fetcher
	// Batches runs the batches of crawl jobs on the job store (a
	// *jobs.BatchRunner); nil when the worker has no store.
	Batches jobs.Batches
	// MaxResultDetail caps Task.result_detail (0 means unbounded).
	MaxResultDetail int
	// MaxTaskBytes bounds the encoded Task znode a Runner writes (0 means
	// DefaultMaxTaskBytes); see recordFitted.
	MaxTaskBytes int
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Log is the worker's logger (with its instance); every line an
	// activity logs adds the activity, the role and the job or Task.
	Log *slog.Logger
	// Metrics are Baton's Prometheus metrics; nil records nothing.
	Metrics *telemetry.Metrics
	// Leaving is set by the worker when it stops (SIGTERM) to leave the
	// cluster: running crawl-job batches stop pulling URLs and end with
	// what they hold, so the instance leaves with nothing to hand over.
	// nil: never.
	Leaving *atomic.Bool
	// Closer closes a dead instance's Temporal workflows after its place
	// was taken; nil: they stay open (until the instance rejoins).
	Closer InstanceCloser

	// lastRole is the role this process's instance was last seen with: the
	// role of log lines of activities that do not know it themselves.
	lastRole atomic.Value // roles.Role
}

// InstanceCloser closes the Temporal workflows of an instance that was
// declared dead and replaced, or that left the cluster (its Lifecycle,
// role and Heartbeat workflows), so that a list of Running workflows shows
// live roles only. The worker implements it with its Temporal client.
// Implementations are safe for concurrent use; closing workflows that are
// closed already is not an error.
type InstanceCloser interface {
	CloseInstance(ctx context.Context, group, name, reason string) error
}

func (a *Activities) cluster(group string) *metadata.Cluster {
	return metadata.NewCluster(a.Store, a.Root, group)
}

func (a *Activities) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

// logAttrsKey is the context key of the log attributes an activity
// collects as it learns them (logWith).
type logAttrsKey struct{}

type logAttrs struct {
	role roles.Role
	args []any
}

// logWith returns ctx whose log lines (a.log) carry role, unless empty,
// and the key-value pairs args (the job, the Task).
func logWith(ctx context.Context, role roles.Role, args ...any) context.Context {
	cur, _ := ctx.Value(logAttrsKey{}).(logAttrs)
	if role != "" {
		cur.role = role
	}
	cur.args = append(slices.Clip(cur.args), args...)
	return context.WithValue(ctx, logAttrsKey{}, cur)
}

// seen remembers the instance's role as read from its NodeState: the role
// of the log lines of activities that do not know it themselves (job
// activities, the start of Register).
func (a *Activities) seen(role roles.Role) {
	if role != "" {
		a.lastRole.Store(role)
	}
}

// log returns the logger of an activity: the worker's (which carries the
// instance), the activity, its workflow and attempt, the instance's role as
// known (ctx's, else the last one seen, else "unknown"), and the job and
// Task attributes collected in ctx.
func (a *Activities) log(ctx context.Context) *slog.Logger {
	l := a.Log
	if l == nil {
		l = slog.Default()
	}
	if activity.IsActivity(ctx) {
		info := activity.GetInfo(ctx)
		l = l.With("activity", info.ActivityType.Name, "workflow_id", info.WorkflowExecution.ID, "attempt", info.Attempt)
	}
	la, _ := ctx.Value(logAttrsKey{}).(logAttrs)
	role := la.role
	if role == "" {
		role, _ = a.lastRole.Load().(roles.Role)
	}
	if role == "" {
		role = "unknown"
	}
	l = l.With("role", string(role))
	if len(la.args) > 0 {
		l = l.With(la.args...)
	}
	return l
}

// heartbeat records activity progress when running inside an activity.
func heartbeat(ctx context.Context, details ...any) {
	if activity.IsActivity(ctx) {
		activity.RecordHeartbeat(ctx, details...)
	}
}

// lastDetails loads the heartbeat details of the previous attempt.
func lastDetails(ctx context.Context, v any) bool {
	if !activity.IsActivity(ctx) || !activity.HasHeartbeatDetails(ctx) {
		return false
	}
	return activity.GetHeartbeatDetails(ctx, v) == nil
}

// wait blocks until ch fires, d passes or ctx ends.
func wait(ctx context.Context, ch <-chan struct{}, d time.Duration) error {
	_, err := metadata.WaitAny(ctx, d, ch)
	return err
}

// corrupt logs a corrupted-znode error (a *metadata.CorruptError in err's
// chain) with the znode and the field at fault, so that an operator can
// repair it, and returns err unchanged; other errors are not logged.
//
// The error stays retryable on purpose: an operator can repair the znode
// while the workflow waits, and the activity's next attempt then goes on
// (logging the znode again at each attempt until it is repaired). Callers
// that can do without the znode (a NodeState or Task replaced on Register,
// a heartbeat counted as missed) log it and go on instead. Only errors that
// no repair of a znode fixes are non-retryable (ErrTypeBadMember).
func (a *Activities) corrupt(ctx context.Context, err error) error {
	var ce *metadata.CorruptError
	if errors.As(err, &ce) {
		field := "(unknown)"
		var fe *roles.FieldError
		if errors.As(ce.Err, &fe) {
			field = fe.Object + "." + fe.Field
		}
		a.log(ctx).Error("corrupted metadata", "znode", ce.Path, "field", field, "err", ce.Err)
	}
	return err
}

func isCorrupt(err error) bool {
	var ce *metadata.CorruptError
	return errors.As(err, &ce)
}

var errNotMember = errors.New("not a member of the group")

func notMember(name, group string) error {
	return fmt.Errorf("%s in group %s: %w", name, group, errNotMember)
}
