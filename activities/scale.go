package activities

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/batoncrawl/baton/activities/metadata"
	"github.com/batoncrawl/baton/roles"
)

// Promote makes the standby backup a runner because the group has fewer
// runners than total_runner (`baton cluster scale --runners` raised it, or
// a worker left) and can spare a backup (min_backup). In one transaction
// it moves the member from current_backup to current_runner (total_backup
// drops by one), moves standby_id to the next backup and writes the
// member's role. It returns the member's position: Role is runner when it
// was promoted, else unchanged (the group no longer wants it). Idempotent.
func (a *Activities) Promote(ctx context.Context, m Member) (Position, error) {
	c := a.cluster(m.Group)
	ctx = logWith(ctx, roles.RoleBackup)
	for {
		node, nv, err := c.GetNode(ctx, m.Name)
		if err != nil {
			return Position{}, a.corrupt(ctx, err)
		}
		if node.Role == roles.RoleRunner {
			g, _, err := c.GetGroup(ctx)
			if err != nil {
				return Position{}, a.corrupt(ctx, err)
			}
			return position(node, g, m), nil
		}
		promoted := false
		g, err := c.UpdateGroupWith(ctx, func(g *roles.GroupState) ([]metadata.Op, error) {
			promoted = false
			if node.Role != roles.RoleBackup || !g.IsStandby(m.Name) || !g.WantsRunner(true) {
				return nil, metadata.ErrNoChange
			}
			g.CurrentBackup = roles.Remove(g.CurrentBackup, m.Name)
			g.CurrentRunner = roles.Add(g.CurrentRunner, m.Name)
			g.TotalBackup = max(0, g.TotalBackup-1)
			g.StandbyID = g.NextStandby()
			promoted = true
			n := node
			n.Role = roles.RoleRunner
			return []metadata.Op{metadata.SetOp(c.NodePath(m.Name), metadata.Encode(n), nv)}, nil
		})
		if metadata.IsConflict(err) {
			continue // our NodeState changed meanwhile: look again
		}
		if err != nil {
			return Position{}, a.corrupt(ctx, fmt.Errorf("promote %s: %w", m.Name, err))
		}
		if promoted {
			node.Role = roles.RoleRunner
			a.seen(node.Role)
			a.log(logWith(ctx, node.Role)).Info("promoted to runner: the group wants more runners",
				"crawler", m.Name, "runners", len(g.CurrentRunner), "total_runner", g.TotalRunner, "standby_id", g.StandbyID)
		}
		return position(node, g, m), nil
	}
}

// stepDown makes a surplus runner (the group has more runners than
// total_runner, and this one has among the largest indexes) a backup, if
// its Task, read at taskVersion, is not pending. The Task is written back
// unchanged in the same transaction, so that a job assignment made from an
// earlier read of it fails and goes to another runner. It reports whether
// the runner stepped down; false with no error means it must look again.
func (a *Activities) stepDown(ctx context.Context, c *metadata.Cluster, m Member, t roles.Task, taskVersion int32) (bool, error) {
	node, nv, err := c.GetNode(ctx, m.Name)
	if err != nil {
		return false, a.corrupt(ctx, err)
	}
	if node.Role != roles.RoleRunner || t.Pending() {
		return false, nil
	}
	down := false
	g, err := c.UpdateGroupWith(ctx, func(g *roles.GroupState) ([]metadata.Op, error) {
		down = false
		if !slices.Contains(g.Surplus(), m.Name) {
			return nil, metadata.ErrNoChange
		}
		g.CurrentRunner = roles.Remove(g.CurrentRunner, m.Name)
		g.CurrentBackup = roles.Add(g.CurrentBackup, m.Name)
		g.TotalBackup++
		if g.Standby() == "" {
			g.StandbyID = g.NextStandby()
		}
		down = true
		n := node
		n.Role = roles.RoleBackup
		return []metadata.Op{
			metadata.SetOp(c.TaskPath(m.Name), metadata.Encode(t), taskVersion),
			metadata.SetOp(c.NodePath(m.Name), metadata.Encode(n), nv),
		}, nil
	})
	if metadata.IsConflict(err) || errors.Is(err, metadata.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, a.corrupt(ctx, fmt.Errorf("step down %s: %w", m.Name, err))
	}
	if down {
		a.seen(roles.RoleBackup)
		a.log(logWith(ctx, roles.RoleBackup)).Info("stepped down to backup: the group has more runners than it wants",
			"crawler", m.Name, "runners", len(g.CurrentRunner), "total_runner", g.TotalRunner)
	}
	return down, nil
}

// surplus reports whether m is a runner the group wants to step down: its
// entry in the membership directory says so. It is read through w, so
// that a caller polling it on a timer costs ZooKeeper a read only after the
// entry changed, and a scale-down wakes only the runners it concerns. A
// group formed before the directory existed is read from GroupState.
func (a *Activities) surplus(ctx context.Context, c *metadata.Cluster, m Member, w *watchedZnode) bool {
	data, err := w.get(ctx, a.Store, c.MemberPath(m.Name))
	if errors.Is(err, metadata.ErrNotFound) {
		g, _, err := c.GetGroup(ctx)
		return err == nil && slices.Contains(g.Surplus(), m.Name)
	}
	me, err := decodeWith(data, err, c.MemberPath(m.Name), roles.DecodeMemberState)
	if isCorrupt(err) {
		a.corrupt(ctx, err)
	}
	return err == nil && me.Surplus
}
