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

// watched caches what a read returned until the one-shot watch armed by
// that read fires (a change, a deletion, or a session event), so a loop
// reads again only after a change. A failed read (other than a missing
// znode, whose watch fires at its creation) is retried at the next call.
// It is used by one goroutine.
type watched[T any] struct {
	changed <-chan struct{}
	val     T
	err     error
}

func (w *watched[T]) get(read func() (T, <-chan struct{}, error)) (T, error) {
	if w.changed != nil {
		select {
		case <-w.changed:
		default:
			return w.val, w.err
		}
	}
	w.val, w.changed, w.err = read()
	if w.err != nil && !errors.Is(w.err, metadata.ErrNotFound) {
		w.changed = nil
	}
	return w.val, w.err
}

// watchedZnode caches a znode's content (GetW).
type watchedZnode struct{ watched[[]byte] }

// get returns the znode's content, reading it again only after a change.
func (w *watchedZnode) get(ctx context.Context, s metadata.Store, path string) ([]byte, error) {
	return w.watched.get(func() ([]byte, <-chan struct{}, error) {
		data, _, ch, err := s.GetW(ctx, path)
		return data, ch, err
	})
}

// watchedChildren caches a znode's children (ChildrenW).
type watchedChildren struct{ watched[[]string] }

// get returns the znode's children, listing them again only after a change.
func (w *watchedChildren) get(ctx context.Context, s metadata.Store, path string) ([]string, error) {
	return w.watched.get(func() ([]string, <-chan struct{}, error) { return s.ChildrenW(ctx, path) })
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
