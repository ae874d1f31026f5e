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
//
// Its NodeState and Task are read only when they change (ZooKeeper
// watches), so a beat costs one write.
func (a *Activities) BeatHeart(ctx context.Context, m Member) error {
	c := a.cluster(m.Group)
	tick := time.NewTicker(m.Timers.UpdateTime)
	defer tick.Stop()
	hb := roles.NewHeartbeat(a.now(), m.Timers)
	var nodeZ, taskZ watchedZnode
	lastBeat := func() {
		hb.HealthyState = roles.HeartApparentDeath
		hb.HeartRhythmTime = a.now().UTC().Format(roles.TimeFormat)
		wctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, _ = c.Put(wctx, c.HeartbeatPath(m.Name), hb, metadata.AnyVersion)
		cancel()
	}
	for {
		nd, err := nodeZ.get(ctx, a.Store, c.NodePath(m.Name))
		node, err := decodeWith(nd, err, c.NodePath(m.Name), roles.DecodeNodeState)
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
			td, err := taskZ.get(ctx, a.Store, c.TaskPath(m.Name))
			if t, err := decodeWith(td, err, c.TaskPath(m.Name), roles.DecodeTask); err == nil {
				hb.TaskState = t.RunningStatus
			}
			if _, err := c.SetHeartbeat(ctx, m.Name, hb, metadata.AnyVersion); err != nil && !errors.Is(err, context.Canceled) {
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
			lastBeat()
			return errors.New("worker stopping")
		case <-ctx.Done():
			lastBeat()
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// watchedZnode caches a znode's content until its one-shot watch fires (a
// change, a deletion, or a session event), so a loop reads it only when it
// changed. It is used by one goroutine.
type watchedZnode struct {
	changed <-chan struct{}
	data    []byte
	err     error
}

// get returns the znode's content, reading it again only after a change.
func (w *watchedZnode) get(ctx context.Context, s metadata.Store, path string) ([]byte, error) {
	if w.changed != nil {
		select {
		case <-w.changed:
		default:
			return w.data, w.err
		}
	}
	w.data, _, w.changed, w.err = s.GetW(ctx, path)
	if w.err != nil && !errors.Is(w.err, metadata.ErrNotFound) {
		w.changed = nil // a failed read is retried at the next call
	}
	return w.data, w.err
}

// decodeWith decodes data read from path, turning a decoding error into a
// CorruptError that names the znode.
func decodeWith[T any](data []byte, err error, path string, dec func([]byte) (T, error)) (T, error) {
	var zero T
	if err != nil {
		return zero, err
	}
	v, err := dec(data)
	if err != nil {
		return v, &metadata.CorruptError{Path: path, Err: err}
	}
	return v, nil
}
