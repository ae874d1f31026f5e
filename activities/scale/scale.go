// Package scale holds what changes the size of a group at run time, but
// the Runner's stepping down (see package runner): Promote, the activity by
// which the standby backup becomes a runner when the group wants more
// (a scale-up, or a worker left); and AwaitIdle and Leave, which a worker
// stopped with SIGTERM runs itself to leave its group. It imports only the
// bottom layer (cluster) of activities/.
package scale

import (
	"context"
	"fmt"

	"github.com/batoncrawl/baton/activities/cluster"
	"github.com/batoncrawl/baton/activities/metadata"
	"github.com/batoncrawl/baton/roles"
)

// Activities are the scaling ones: Promote. Temporal registers them by
// method name.
type Activities struct {
	Deps *cluster.Deps
}

// Promote makes the standby backup a runner because the group has fewer
// runners than total_runner (`baton cluster scale --runners` raised it, or
// a worker left) and can spare a backup (min_backup). In one transaction
// it moves the member from current_backup to current_runner (total_backup
// drops by one), moves standby_id to the next backup and writes the
// member's role. It returns the member's position: Role is runner when it
// was promoted, else unchanged (the group no longer wants it). Idempotent.
func (a *Activities) Promote(ctx context.Context, m cluster.Member) (cluster.Position, error) {
	c := a.Deps.Cluster(m.Group)
	ctx = cluster.LogWith(ctx, roles.RoleBackup)
	for {
		node, nv, err := c.GetNode(ctx, m.Name)
		if err != nil {
			return cluster.Position{}, a.Deps.Corrupt(ctx, err)
		}
		if node.Role == roles.RoleRunner {
			g, _, err := c.GetGroup(ctx)
			if err != nil {
				return cluster.Position{}, a.Deps.Corrupt(ctx, err)
			}
			return cluster.PositionOf(node, g, m), nil
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
			return cluster.Position{}, a.Deps.Corrupt(ctx, fmt.Errorf("promote %s: %w", m.Name, err))
		}
		if promoted {
			node.Role = roles.RoleRunner
			a.Deps.Seen(node.Role)
			a.Deps.Logger(cluster.LogWith(ctx, node.Role)).Info("promoted to runner: the group wants more runners",
				"crawler", m.Name, "runners", len(g.CurrentRunner), "total_runner", g.TotalRunner, "standby_id", g.StandbyID)
		}
		return cluster.PositionOf(node, g, m), nil
	}
}
