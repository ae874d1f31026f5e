// Package membership holds the activities of an instance's life cycle:
// Register (it joins its group, or rejoins it after it was declared dead),
// WaitMembers and Elect (the group forms), and Position (where it stands
// now). It imports the bottom layer (cluster) of activities/ and, one
// layer up, failover: a member that registers again finishes the
// fail-overs it claimed and did not finish (settleClaims).
package membership

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"go.temporal.io/sdk/temporal"

	"github.com/batoncrawl/baton/activities/cluster"
	"github.com/batoncrawl/baton/activities/failover"
	"github.com/batoncrawl/baton/activities/metadata"
	"github.com/batoncrawl/baton/roles"
)

// Activities are the life cycle's: Register, WaitMembers, Elect and
// Position. Temporal registers them by method name.
type Activities struct {
	Deps *cluster.Deps
	// Failover runs the fail-over steps of claims this member left
	// unfinished (settleClaims); nil: a failover.Activities over Deps,
	// without a Closer.
	Failover *failover.Activities
}

func (a *Activities) failOver() *failover.Activities {
	if a.Failover == nil {
		return &failover.Activities{Deps: a.Deps}
	}
	return a.Failover
}

// Register adds the member to its group (step 1 of the life cycle) under
// the group lock: its name goes into current_crawler, the totals are set
// when the group is new, and its NodeState, Task and Heartbeat znodes are
// written. It is idempotent: a member already registered resumes its role,
// and a member that was declared dead rejoins once its old Task has been
// handed over. A member that was declared dead, or is new to a group that
// has elected already (a worker added to a running cluster), joins at
// once without an election: as a runner in All-are-Runner mode or while
// the group has fewer runners than total_runner (and keeps min_backup
// backups), else as a backup; the totals count it.
func (a *Activities) Register(ctx context.Context, m cluster.Member) (cluster.RegisterResult, error) {
	c := a.Deps.Cluster(m.Group)
	if _, err := roles.ParseName(m.Name); err != nil {
		return cluster.RegisterResult{}, cluster.BadMember(err)
	}
	node, _, err := c.GetNode(ctx, m.Name)
	exists := err == nil
	if err != nil && !errors.Is(err, metadata.ErrNotFound) {
		if !cluster.IsCorrupt(err) {
			return cluster.RegisterResult{}, err
		}
		// A corrupted NodeState is reported and replaced by a fresh one: the
		// group membership in GroupState is the source of truth.
		a.Deps.Corrupt(ctx, err)
		node, exists = roles.NodeState{Group: m.Group, Role: roles.RoleInitial}, false
	}
	if exists && node.Group != "" && node.Group != m.Group {
		err := fmt.Errorf("register %s: %s already belongs to group %q, not %q: crawler names are unique under a ZooKeeper root (choose other names or another --zk-root)",
			m.Name, c.NodePath(m.Name), node.Group, m.Group)
		return cluster.RegisterResult{}, cluster.BadMember(err)
	}
	rejoin := exists && node.Role.Dead()
	reclaim := false
	if rejoin {
		// Our old Task must have left before we reset it: the claimer moves
		// it (Holder set to the new holder) during hand-over.
		t, _, err := c.GetTask(ctx, m.Name)
		if err == nil && t.Pending() && (t.Holder == "" || t.Holder == m.Name) {
			return cluster.RegisterResult{}, temporal.NewApplicationError(
				fmt.Sprintf("rejoin %s: its Task is waiting to be handed over by %s", m.Name, node.TakenOverBy), cluster.ErrTypeNotReady)
		}
		// In All-are-Runner mode the survivor runs the adopted Task in place,
		// in our Task znode: resetting it now would lose the rest of it. If
		// that survivor died too, nobody runs it any more: we take it back.
		if err == nil && t.Pending() && m.AllAreRunners() {
			if !cluster.ClaimerDead(ctx, c, t.Holder) {
				return cluster.RegisterResult{}, temporal.NewApplicationError(
					fmt.Sprintf("rejoin %s: its Task is still being run in place by %s", m.Name, t.Holder), cluster.ErrTypeNotReady)
			}
			reclaim = true
		}
	}
	joined := roles.Role("") // the role taken at once when joining a formed group
	group, err := c.UpdateGroup(ctx, func(g *roles.GroupState) error {
		joined = ""
		if g.TotalCrawler == 0 && len(g.CurrentCrawler) == 0 && len(g.FailCrawler) == 0 {
			g.TotalRunner, g.TotalBackup, g.TotalCrawler = m.Runner, m.Backup, m.Runner+m.Backup
			all := m.AllAreRunners()
			g.AllRunner = &all
		}
		back := rejoin || slices.Contains(g.FailCrawler, m.Name)
		// A member new to a group that has elected already (a worker added
		// to a running cluster) joins it at once, like one coming back.
		late := !back && !slices.Contains(g.CurrentCrawler, m.Name) && g.Formed()
		if !back && !late {
			if slices.Contains(g.CurrentCrawler, m.Name) {
				return metadata.ErrNoChange
			}
			g.CurrentCrawler = roles.Add(g.CurrentCrawler, m.Name)
			return nil
		}
		g.FailCrawler = roles.Remove(g.FailCrawler, m.Name)
		g.FailRunner = roles.Remove(g.FailRunner, m.Name)
		g.FailBackup = roles.Remove(g.FailBackup, m.Name)
		g.CurrentCrawler = roles.Add(g.CurrentCrawler, m.Name)
		switch {
		case g.AllAreRunners():
			if late {
				g.TotalRunner++
				g.TotalCrawler++
			}
			g.CurrentRunner = roles.Add(g.CurrentRunner, m.Name)
			joined = roles.RoleRunner
		case slices.Contains(g.CurrentRunner, m.Name):
			joined = roles.RoleRunner
		case slices.Contains(g.CurrentBackup, m.Name):
			joined = roles.RoleBackup
		case g.WantsRunner(false):
			// The group is short of runners (scaled up, or its backups
			// are used up): this member crawls at once.
			if late {
				g.TotalCrawler++
			}
			g.CurrentRunner = roles.Add(g.CurrentRunner, m.Name)
			joined = roles.RoleRunner
		default:
			if late {
				g.TotalCrawler++
			}
			g.CurrentBackup = roles.Add(g.CurrentBackup, m.Name)
			g.TotalBackup++
			joined = roles.RoleBackup
		}
		if g.StandbyID == "" {
			g.StandbyID = g.NextStandby()
		}
		return nil
	})
	if err != nil {
		return cluster.RegisterResult{}, a.Deps.Corrupt(ctx, fmt.Errorf("register %s: %w", m.Name, err))
	}
	a.markRegistered(ctx, c, group)
	res := cluster.RegisterResult{Role: node.Role, Rejoined: rejoin, Resumed: exists && !rejoin}
	switch {
	case joined != "":
		res.Role = joined
	case !exists:
		res.Role = roles.RoleInitial
	}
	if !exists || rejoin || joined != "" && joined != node.Role {
		if _, err := c.SetNode(ctx, m.Name, roles.NodeState{Group: m.Group, Role: res.Role}, metadata.AnyVersion); err != nil {
			return res, fmt.Errorf("register %s: write NodeState: %w", m.Name, err)
		}
	}
	// An empty Task, unless one is there that we still hold.
	t, _, err := c.GetTask(ctx, m.Name)
	if rejoin || errors.Is(err, metadata.ErrNotFound) || cluster.IsCorrupt(err) {
		if cluster.IsCorrupt(err) {
			a.Deps.Corrupt(ctx, err)
		}
		nt := roles.EmptyTask()
		if reclaim && err == nil && t.Pending() {
			nt = t.Clone() // the new epoch fences the dead adopter
			nt.Holder, nt.HandedOverFrom = m.Name, t.Holder
		}
		nt = nt.Replacing(t)
		if _, err := c.SetTask(ctx, m.Name, nt, metadata.AnyVersion); err != nil {
			return res, fmt.Errorf("register %s: write Task: %w", m.Name, err)
		}
	} else if err != nil {
		return res, fmt.Errorf("register %s: read Task: %w", m.Name, err)
	}
	hb := roles.NewHeartbeat(a.Deps.Now(), m.Timers)
	if _, err := c.SetHeartbeat(ctx, m.Name, hb, metadata.AnyVersion); err != nil {
		return res, fmt.Errorf("register %s: write Heartbeat: %w", m.Name, err)
	}
	if _, err := a.Deps.Store.Create(ctx, c.AlivePath(m.Name), []byte(m.Name), metadata.Ephemeral); err != nil && !errors.Is(err, metadata.ErrExists) {
		return res, fmt.Errorf("register %s: alive znode: %w", m.Name, err)
	}
	a.Deps.Seen(res.Role)
	a.Deps.Logger(cluster.LogWith(ctx, res.Role)).Info("registered", "crawler", m.Name, "rejoined", res.Rejoined, "resumed", res.Resumed)
	if exists {
		// Only a member that was here before can hold a claim.
		a.settleClaims(cluster.LogWith(ctx, res.Role), c, m, res.Role, group)
	}
	return res, nil
}

// WaitMembers blocks until every configured member has registered (step 2).
// It is woken by a watch on the RegisteredPath marker, which the member
// completing the group creates, so a forming group of N members wakes each
// waiter once (a watch on GroupState woke every waiter at every
// registration: N² reads). GroupState decides; the marker only wakes: one
// left from an earlier formation makes it watch GroupState itself, and a
// marker never created (a registrant that crashed, or one of an older
// version) costs a check every check_task.
func (a *Activities) WaitMembers(ctx context.Context, m cluster.Member) (roles.GroupState, error) {
	c := a.Deps.Cluster(m.Group)
	stale := false
	for {
		g, err := a.readGroup(ctx, c)
		if err != nil || g.Registered() || len(g.CurrentRunner) > 0 {
			return g, err
		}
		var ch <-chan struct{}
		if !stale {
			// The marker is watched, then GroupState read again: the member
			// completing the group after that read creates the marker after
			// its write. A marker that is there already is stale: no watch
			// is left on it.
			_, _, ch, err = a.Deps.Store.GetW(ctx, c.RegisteredPath())
			stale = err == nil
			if err != nil && !errors.Is(err, metadata.ErrNotFound) {
				return g, err
			}
		}
		if stale {
			g, ch, err = a.watchGroup(ctx, c)
		} else {
			g, err = a.readGroup(ctx, c)
		}
		if err != nil || g.Registered() || len(g.CurrentRunner) > 0 {
			return g, err
		}
		cluster.Heartbeat(ctx, len(g.CurrentCrawler))
		if err := cluster.Wait(ctx, ch, m.Timers.CheckTask); err != nil {
			return g, err
		}
	}
}

// readGroup reads and decodes GroupState.
func (a *Activities) readGroup(ctx context.Context, c *metadata.Cluster) (roles.GroupState, error) {
	data, _, err := a.Deps.Store.Get(ctx, c.GroupPath())
	if err != nil {
		return roles.GroupState{}, err
	}
	return a.decodeGroup(ctx, c, data)
}

// watchGroup reads and decodes GroupState with a watch on it.
func (a *Activities) watchGroup(ctx context.Context, c *metadata.Cluster) (roles.GroupState, <-chan struct{}, error) {
	data, _, ch, err := a.Deps.Store.GetW(ctx, c.GroupPath())
	if err != nil {
		return roles.GroupState{}, nil, err
	}
	g, err := a.decodeGroup(ctx, c, data)
	return g, ch, err
}

func (a *Activities) decodeGroup(ctx context.Context, c *metadata.Cluster, data []byte) (roles.GroupState, error) {
	g, err := roles.DecodeGroupState(data)
	if err != nil {
		return g, a.Deps.Corrupt(ctx, &metadata.CorruptError{Path: c.GroupPath(), Err: err})
	}
	return g, nil
}

// markRegistered creates the RegisteredPath marker of a group whose
// members have all registered and not elected yet, waking their
// WaitMembers. A failure only delays them to their next check.
func (a *Activities) markRegistered(ctx context.Context, c *metadata.Cluster, g roles.GroupState) {
	if !g.Registered() || g.Formed() {
		return
	}
	if _, err := a.Deps.Store.Create(ctx, c.RegisteredPath(), nil, metadata.Persistent); err != nil && !errors.Is(err, metadata.ErrExists) {
		a.Deps.Logger(ctx).Warn("could not mark the group registered; its members find it at their next check", "znode", c.RegisteredPath(), "err", err)
	}
}

// Elect runs the election (steps 3 and 4): the winners join current_runner,
// the losers current_backup, standby_id becomes the smallest backup index,
// and the member's role is written to its NodeState. A member that already
// has a role keeps it.
func (a *Activities) Elect(ctx context.Context, m cluster.Member) (roles.Role, error) {
	c := a.Deps.Cluster(m.Group)
	node, v, err := c.GetNode(ctx, m.Name)
	if err != nil {
		return "", a.Deps.Corrupt(ctx, err)
	}
	a.Deps.Seen(node.Role)
	ctx = cluster.LogWith(ctx, node.Role)
	if node.Role != roles.RoleInitial {
		return node.Role, nil
	}
	var role roles.Role
	_, err = c.UpdateGroup(ctx, func(g *roles.GroupState) error {
		members := slices.Clone(g.CurrentCrawler)
		roles.SortNames(members)
		if len(members) > g.TotalCrawler && g.TotalCrawler > 0 {
			members = members[:g.TotalCrawler]
		}
		results := roles.Elect(members, g.TotalRunner)
		role = roles.RoleBackup
		i := slices.Index(members, m.Name)
		if i >= 0 && results[i] == roles.Winner {
			role = roles.RoleRunner
		}
		switch {
		case role == roles.RoleRunner:
			g.CurrentRunner = roles.Add(g.CurrentRunner, m.Name)
		case i < 0 && !slices.Contains(g.CurrentBackup, m.Name):
			// Registered before the election but beyond the group's size
			// (more workers started than it was formed with): an extra
			// backup, counted in the totals.
			g.CurrentBackup = roles.Add(g.CurrentBackup, m.Name)
			g.TotalBackup++
			g.TotalCrawler++
		default:
			g.CurrentBackup = roles.Add(g.CurrentBackup, m.Name)
		}
		// standby_id is the smallest index among all elected losers, also
		// those that have not written themselves yet (members is sorted).
		if i := slices.Index(results, roles.Loser); i >= 0 {
			if cur, err := strconv.Atoi(g.StandbyID); err != nil || cur > roles.IndexOf(members[i]) {
				g.StandbyID = strconv.Itoa(roles.IndexOf(members[i]))
			}
		}
		return nil
	})
	if err != nil {
		return "", a.Deps.Corrupt(ctx, fmt.Errorf("elect %s: %w", m.Name, err))
	}
	if _, err := c.SetNode(ctx, m.Name, roles.NodeState{Group: m.Group, Role: role}, v); err != nil {
		return "", fmt.Errorf("elect %s: write role: %w", m.Name, err)
	}
	a.Deps.Seen(role)
	a.Deps.Logger(cluster.LogWith(ctx, role)).Info("elected", "crawler", m.Name)
	return role, nil
}

// Position reads the member's role and whether it is the standby (the
// dispatch step of the life cycle).
func (a *Activities) Position(ctx context.Context, m cluster.Member) (cluster.Position, error) {
	c := a.Deps.Cluster(m.Group)
	node, _, err := c.GetNode(ctx, m.Name)
	if errors.Is(err, metadata.ErrNotFound) {
		// The metadata is gone (ZooKeeper's data was wiped, or the root
		// changed) while Temporal kept the workflow: register again.
		a.Deps.Logger(ctx).Warn("this instance's NodeState is missing; it registers again", "znode", c.NodePath(m.Name))
		return cluster.Position{Missing: true}, nil
	}
	if err != nil {
		return cluster.Position{}, a.Deps.Corrupt(ctx, err)
	}
	a.Deps.Seen(node.Role)
	ctx = cluster.LogWith(ctx, node.Role)
	g, _, err := c.GetGroup(ctx)
	if err != nil {
		return cluster.Position{}, a.Deps.Corrupt(ctx, err)
	}
	return cluster.PositionOf(node, g, m), nil
}
