package cluster

import (
	"context"
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

// Deps holds the clients that the activities of every capability share:
// one Deps per worker process, which each capability's Activities points
// to (its Deps field), so that they also share what the process learns
// (the role its instance was last seen with). It is safe for concurrent
// use.
//
// Deps is a named field of each Activities, not an embedded one, and its
// methods are the capabilities' helpers: Temporal registers every
// exported method of a registered struct as an activity, so none of them
// may be promoted into an Activities.
type Deps struct {
	Store metadata.Store
	Root  string // ZooKeeper root; "" means metadata.DefaultRoot
	// Batches runs the batches of crawl jobs on the job store (a
	// *jobs.BatchRunner); nil when the worker has no store. The Runner
	// runs them, a fail-over claims them.
	Batches jobs.Batches
	// Clock is the clock; nil means time.Now.
	Clock func() time.Time
	// Log is the worker's logger (with its instance); every line an
	// activity logs adds the activity, the role and the job or Task.
	Log *slog.Logger
	// Metrics are Baton's Prometheus metrics; nil records nothing.
	Metrics *telemetry.Metrics
	// OnRole, when set, is called with every role Seen reads (the worker
	// starts what only a Runner needs when its instance is first seen a
	// Runner); it must return quickly.
	OnRole func(roles.Role)

	// lastRole is the role this process's instance was last seen with: the
	// role of log lines of activities that do not know it themselves.
	lastRole atomic.Value // roles.Role
}

// Cluster returns the metadata of group under the Deps' root.
func (d *Deps) Cluster(group string) *metadata.Cluster {
	return metadata.NewCluster(d.Store, d.Root, group)
}

// Now reads the clock.
func (d *Deps) Now() time.Time {
	if d.Clock != nil {
		return d.Clock()
	}
	return time.Now()
}

// logAttrsKey is the context key of the log attributes an activity
// collects as it learns them (LogWith).
type logAttrsKey struct{}

type logAttrs struct {
	role roles.Role
	args []any
}

// LogWith returns ctx whose log lines (Deps.Logger) carry role, unless
// empty, and the key-value pairs args (the job, the Task).
func LogWith(ctx context.Context, role roles.Role, args ...any) context.Context {
	cur, _ := ctx.Value(logAttrsKey{}).(logAttrs)
	if role != "" {
		cur.role = role
	}
	cur.args = append(slices.Clip(cur.args), args...)
	return context.WithValue(ctx, logAttrsKey{}, cur)
}

// Seen remembers the instance's role as read from its NodeState: the role
// of the log lines of activities that do not know it themselves (job
// activities, the start of Register).
func (d *Deps) Seen(role roles.Role) {
	if role != "" {
		d.lastRole.Store(role)
		if d.OnRole != nil {
			d.OnRole(role)
		}
	}
}

// Logger returns the logger of an activity: the worker's (which carries
// the instance), the activity, its workflow and attempt, the instance's
// role as known (ctx's, else the last one seen, else "unknown"), and the
// job and Task attributes collected in ctx.
func (d *Deps) Logger(ctx context.Context) *slog.Logger {
	l := d.Log
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
		role, _ = d.lastRole.Load().(roles.Role)
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

// Heartbeat records activity progress when running inside an activity.
func Heartbeat(ctx context.Context, details ...any) {
	if activity.IsActivity(ctx) {
		activity.RecordHeartbeat(ctx, details...)
	}
}

// Wait blocks until ch fires, d passes or ctx ends.
func Wait(ctx context.Context, ch <-chan struct{}, d time.Duration) error {
	_, err := metadata.WaitAny(ctx, d, ch)
	return err
}
