package cluster

import (
	"context"

	"github.com/batoncrawl/baton/activities/metadata"
	"github.com/batoncrawl/baton/roles"
)

// PositionOf is member m's Position given its NodeState and its group's
// GroupState.
func PositionOf(node roles.NodeState, g roles.GroupState, m Member) Position {
	return Position{
		Role:      node.Role,
		Standby:   node.Role == roles.RoleBackup && g.IsStandby(m.Name),
		AllRunner: g.AllAreRunners(),
	}
}

// ClaimerDead reports whether the instance holding a claim is itself dead,
// so that its claim can be taken over.
func ClaimerDead(ctx context.Context, c *metadata.Cluster, claimer string) bool {
	n, _, err := c.GetNode(ctx, claimer)
	return err == nil && n.Role.Dead()
}
