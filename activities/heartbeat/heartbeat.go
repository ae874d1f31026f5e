// Package heartbeat holds the activity of an instance's Heartbeat
// workflow: BeatHeart writes the instance's Heartbeat znode every
// update_time for the life of its worker. It imports only the bottom
// layer (cluster) of activities/.
package heartbeat

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/batoncrawl/baton/activities/cluster"
	"github.com/batoncrawl/baton/activities/metadata"
	"github.com/batoncrawl/baton/roles"
)

// ErrStopping is BeatHeart's error when its worker stops (SIGTERM): the
// heartbeat ends with the worker, it did not fail.
var ErrStopping = errors.New("worker stopping")

// Activities are the heartbeat's: BeatHeart, the activity of the
// Heartbeat workflow. Temporal registers them by method name.
type Activities struct {
	Deps *cluster.Deps
	// Leaving is set by the worker when it leaves its group (SIGTERM): the
	// heartbeat then ends without the Apparent Death mark, which a watcher
	// takes for a death at once, before the member is out of GroupState;
	// leaving deletes the Heartbeat znode instead. Nil: never set.
	Leaving *atomic.Bool
}

// BeatHeart writes the member's Heartbeat every update_time
// (heart_rhythm_time = now in UTC, healthy_state Healthy, task_state = its
// Task's running_status) until ctx ends; then it writes Apparent Death once
// (unless the worker is leaving its group: see Leaving).
// While the member is marked dead it writes nothing, so the Asystole mark
// of the backup that discovered it stays until it rejoins. It is meant to
// run for the life of the worker as a heartbeating activity.
//
// Its NodeState and Task are read only when they change (ZooKeeper
// watches), so a beat costs one write.
func (a *Activities) BeatHeart(ctx context.Context, m cluster.Member) error {
	c := a.Deps.Cluster(m.Group)
	tick := time.NewTicker(m.Timers.UpdateTime)
	defer tick.Stop()
	hb := roles.NewHeartbeat(a.Deps.Now(), m.Timers)
	var nodeZ, taskZ cluster.WatchedZnode
	lastBeat := func() {
		if a.Leaving != nil && a.Leaving.Load() {
			return
		}
		hb.HealthyState = roles.HeartApparentDeath
		hb.HeartRhythmTime = a.Deps.Now().UTC().Format(roles.TimeFormat)
		wctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, _ = c.Put(wctx, c.HeartbeatPath(m.Name), hb, metadata.AnyVersion)
		cancel()
	}
	for {
		nd, err := nodeZ.Get(ctx, a.Deps.Store, c.NodePath(m.Name))
		node, err := cluster.DecodeWith(nd, err, c.NodePath(m.Name), roles.DecodeNodeState)
		lctx := ctx // this round's log context
		if err == nil {
			a.Deps.Seen(node.Role)
			lctx = cluster.LogWith(ctx, node.Role)
		}
		switch {
		case err == nil && node.Role.Dead():
			// wait for the rejoin
		case err == nil || cluster.IsCorrupt(err):
			if err != nil {
				a.Deps.Corrupt(ctx, err)
			}
			hb.HeartRhythmTime = a.Deps.Now().UTC().Format(roles.TimeFormat)
			hb.HealthyState = roles.HeartHealthy
			td, err := taskZ.Get(ctx, a.Deps.Store, c.TaskPath(m.Name))
			if t, err := cluster.DecodeWith(td, err, c.TaskPath(m.Name), roles.DecodeTask); err == nil {
				hb.TaskState = t.RunningStatus
			}
			if _, err := c.SetHeartbeat(ctx, m.Name, hb, metadata.AnyVersion); err != nil && !errors.Is(err, context.Canceled) {
				a.Deps.Logger(lctx).Warn("heartbeat write failed", "crawler", m.Name, "err", err)
			}
		case errors.Is(err, context.Canceled):
		default:
			a.Deps.Logger(ctx).Warn("heartbeat: read NodeState failed", "crawler", m.Name, "err", err)
		}
		cluster.Heartbeat(ctx)
		var stopping <-chan struct{}
		if activity.IsActivity(ctx) {
			stopping = activity.GetWorkerStopChannel(ctx)
		}
		select {
		case <-stopping:
			lastBeat()
			return ErrStopping
		case <-ctx.Done():
			lastBeat()
			return ctx.Err()
		case <-tick.C:
		}
	}
}
