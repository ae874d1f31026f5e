package membership

import (
	"context"
	"slices"

	"github.com/batoncrawl/baton/activities/cluster"
	"github.com/batoncrawl/baton/activities/metadata"
	"github.com/batoncrawl/baton/roles"
)

// settleClaims finishes or gives up the fail-overs that member m claimed
// (taken_over_by names it) and did not finish: its role workflow ended
// between the claim and the hand-over, because m was itself declared dead
// meanwhile (a ZooKeeper stall makes every heartbeat late at once) or its
// worker restarted. Everyone else respects a live claimer's claim, so
// nobody but m would ever finish it: the dead peer's Task would wait
// forever, and so would the peer's own rejoin.
//
// Called by Register once m is a member again (role is the role it
// registered with, g the GroupState its registration wrote). A claim on a dead runner whose Task was not handed over
// is finished when m is a runner with an idle Task: m takes the peer's
// place (Activate) and its Task (HandOver), as its role workflow would
// have. Any other unfinished claim is released (taken_over_by cleared), so
// that the peer's watchers claim it again if it is still a member, and the
// crawl job re-queues its batch if not (JobAwait: a dead holder nobody
// claimed). Errors are logged: registration goes on, and the next
// registration looks again.
func (a *Activities) settleClaims(ctx context.Context, c *metadata.Cluster, m cluster.Member, role roles.Role, g roles.GroupState) {
	ownIdle := false
	if t, _, err := c.GetTask(ctx, m.Name); err == nil && !t.Pending() {
		ownIdle = true
	}
	for _, p := range append(slices.Clone(g.CurrentCrawler), g.FailCrawler...) {
		if p == m.Name {
			continue
		}
		n, nv, err := c.GetNode(ctx, p)
		if err != nil || n.TakenOverBy != m.Name || !n.Role.Dead() {
			continue
		}
		t, _, terr := c.GetTask(ctx, p)
		taskLeft := terr == nil && t.Pending() && (t.Holder == "" || t.Holder == p)
		member := slices.Contains(g.CurrentCrawler, p)
		if !taskLeft && !member {
			continue // finished: the peer is out and its Task moved on
		}
		in := cluster.PeerInput{Member: m, Dead: p, DeadRole: roles.RoleBackup}
		if n.Role == roles.RoleDeadRunner {
			in.DeadRole = roles.RoleRunner
		}
		log := a.Deps.Logger(ctx).With("crawler", m.Name, "dead", p, "dead_role", n.Role)
		switch {
		case in.DeadRole == roles.RoleBackup:
			// Nothing to hand over: finish removing it from the group.
			if _, err := a.failOver().Activate(ctx, in); err == nil {
				log.Warn("unfinished fail-over of a dead backup finished at registration")
				continue
			}
		case role == roles.RoleRunner && ownIdle && taskLeft:
			if _, err := a.failOver().Activate(ctx, in); err != nil {
				log.Warn("could not finish an unfinished fail-over (activate); releasing it", "err", err)
				break
			}
			h, err := a.failOver().HandOver(ctx, in, false)
			if err != nil {
				log.Warn("could not finish an unfinished fail-over (hand over); releasing it", "err", err)
				break
			}
			log.Warn("unfinished fail-over finished at registration: task taken over", "owner", h.Owner, "pending", h.Pending)
			ownIdle = !h.Pending
			continue
		}
		released := roles.NodeState{Group: m.Group, Role: n.Role}
		if _, err := c.SetNode(ctx, p, released, nv); err != nil {
			log.Warn("could not release an unfinished fail-over", "err", err)
			continue
		}
		log.Warn("unfinished fail-over released at registration: the peer can be claimed again", "member", member, "task_left", taskLeft)
	}
}
