package activities

import (
	"context"
	"errors"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/batoncrawl/baton/activities/metadata"
	"github.com/batoncrawl/baton/roles"
)

// BeatHeart writes the member's Heartbeat every update_time
// (heart_rhythm_time = now in UTC, healthy_state Healthy, task_state = its
// Task's running_status) until ctx ends; then it writes Apparent Death once.
// While the member is marked dead it writes nothing, so the Asystole mark
// of the backup that discovered it stays until it rejoins. It is meant to
// run for the life of the worker as a heartbeating activity.
func (a *Activities) BeatHeart(ctx context.Context, m Member) error {
	c := a.cluster(m.Group)
	tick := time.NewTicker(m.Timers.UpdateTime)
	defer tick.Stop()
	hb := roles.NewHeartbeat(a.now(), m.Timers)
	for {
		node, _, err := c.GetNode(ctx, m.Name)
		lctx := ctx // this round's log context
		if err == nil {
			a.seen(node.Role)
			lctx = logWith(ctx, node.Role)
		}
		switch {
		case err == nil && node.Role.Dead():
			// wait for the rejoin
		case err == nil || isCorrupt(err):
			if err != nil {
				a.corrupt(ctx, err)
			}
			hb.HeartRhythmTime = a.now().UTC().Format(roles.TimeFormat)
			hb.HealthyState = roles.HeartHealthy
			if t, _, err := c.GetTask(ctx, m.Name); err == nil {
				hb.TaskState = t.RunningStatus
			}
			if _, err := c.Put(ctx, c.HeartbeatPath(m.Name), hb, metadata.AnyVersion); err != nil && !errors.Is(err, context.Canceled) {
				a.log(lctx).Warn("heartbeat write failed", "crawler", m.Name, "err", err)
			}
		case errors.Is(err, context.Canceled):
		default:
			a.log(ctx).Warn("heartbeat: read NodeState failed", "crawler", m.Name, "err", err)
		}
		heartbeat(ctx)
		var stopping <-chan struct{}
		if activity.IsActivity(ctx) {
			stopping = activity.GetWorkerStopChannel(ctx)
		}
		select {
		case <-stopping:
			hb.HealthyState = roles.HeartApparentDeath
			hb.HeartRhythmTime = a.now().UTC().Format(roles.TimeFormat)
			_, _ = c.Put(context.Background(), c.HeartbeatPath(m.Name), hb, metadata.AnyVersion)
			return errors.New("worker stopping")
		case <-ctx.Done():
			hb.HealthyState = roles.HeartApparentDeath
			hb.HeartRhythmTime = a.now().UTC().Format(roles.TimeFormat)
			wctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_, _ = c.Put(wctx, c.HeartbeatPath(m.Name), hb, metadata.AnyVersion)
			cancel()
			return ctx.Err()
		case <-tick.C:
		}
	}
}
