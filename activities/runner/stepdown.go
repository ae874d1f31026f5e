package runner

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/batoncrawl/baton/activities/cluster"
	"github.com/batoncrawl/baton/activities/metadata"
	"github.com/batoncrawl/baton/roles"
)

// stepDown makes a surplus runner (the group has more runners than
// total_runner, and this one has among the largest indexes) a backup, if
// its Task, read at taskVersion, is not pending. The Task is written back
// unchanged in the same transaction, so that a job assignment made from an
// earlier read of it fails and goes to another runner. It reports whether
// the runner stepped down; false with no error means it must look again.
func (a *Activities) stepDown(ctx context.Context, c *metadata.Cluster, m cluster.Member, t roles.Task, taskVersion int32) (bool, error) {
	node, nv, err := c.GetNode(ctx, m.Name)
	if err != nil {
		return false, a.Deps.Corrupt(ctx, err)
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
		return false, a.Deps.Corrupt(ctx, fmt.Errorf("step down %s: %w", m.Name, err))
	}
	if down {
		a.Deps.Seen(roles.RoleBackup)
		a.Deps.Logger(cluster.LogWith(ctx, roles.RoleBackup)).Info("stepped down to backup: the group has more runners than it wants",
			"crawler", m.Name, "runners", len(g.CurrentRunner), "total_runner", g.TotalRunner)
	}
	return down, nil
}

// surplus reports whether m is a runner the group wants to step down: its
// entry in the membership directory says so. It is read through w, so
// that a caller polling it on a timer costs ZooKeeper a read only after the
// entry changed, and a scale-down wakes only the runners it concerns. A
// group formed before the directory existed is read from GroupState.
func (a *Activities) surplus(ctx context.Context, c *metadata.Cluster, m cluster.Member, w *cluster.WatchedZnode) bool {
	data, err := w.Get(ctx, a.Deps.Store, c.MemberPath(m.Name))
	if errors.Is(err, metadata.ErrNotFound) {
		g, _, err := c.GetGroup(ctx)
		return err == nil && slices.Contains(g.Surplus(), m.Name)
	}
	me, err := cluster.DecodeWith(data, err, c.MemberPath(m.Name), roles.DecodeMemberState)
	if cluster.IsCorrupt(err) {
		a.Deps.Corrupt(ctx, err)
	}
	return err == nil && me.Surplus
}
