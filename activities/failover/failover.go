package failover

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/batoncrawl/baton/activities/cluster"
	"github.com/batoncrawl/baton/activities/metadata"
	"github.com/batoncrawl/baton/activities/telemetry"
	"github.com/batoncrawl/baton/roles"
)

// claimerAlive returns a lost error when the claimer itself was declared
// dead (a dead role in its NodeState): a fail-over step it runs then would
// overwrite that verdict, or move work into a Task nobody hands over.
func (a *Activities) claimerAlive(ctx context.Context, c *metadata.Cluster, claimer, step string) error {
	_, err := a.aliveCheck(ctx, c, claimer, step)
	return err
}

// lostIfDead is for a write of a fail-over step that failed: a version
// conflict because the claimer was declared dead meanwhile is a lost
// error (the step gives up), anything else is err, retried.
func (a *Activities) lostIfDead(ctx context.Context, c *metadata.Cluster, claimer, step string, err error) error {
	if errors.Is(err, metadata.ErrBadVersion) {
		if lostErr := a.claimerAlive(ctx, c, claimer, step); cluster.IsLost(lostErr) {
			return lostErr
		}
	}
	return err
}

// aliveCheck is claimerAlive that also returns a version check of the
// claimer's NodeState, to put in the transaction of the step's write so
// that a verdict written meanwhile makes it fail.
func (a *Activities) aliveCheck(ctx context.Context, c *metadata.Cluster, claimer, step string) (metadata.Op, error) {
	n, v, err := c.GetNode(ctx, claimer)
	switch {
	case err == nil && n.Role.Dead():
		return metadata.Op{}, cluster.Lost("%s: %s was itself declared dead (%s, by %s)", step, claimer, n.Role, n.TakenOverBy)
	case err == nil:
		return metadata.CheckOp(c.NodePath(claimer), v), nil
	case errors.Is(err, metadata.ErrNotFound):
		return metadata.Op{}, cluster.Lost("%s: %s is no longer a member", step, claimer)
	case cluster.IsCorrupt(err):
		return metadata.Op{}, a.Deps.Corrupt(ctx, err)
	default:
		return metadata.Op{}, err
	}
}

// Discover is the first fail-over step: it claims the dead peer by writing
// its NodeState role (dead-runner or dead-backup-runner) and taken_over_by
// in one compare-and-set, so exactly one instance hands over a dead peer,
// then marks its Heartbeat Asystole and returns its Task. It is idempotent
// for the claimer; a claim held by another live instance is reported with
// Claimed false.
func (a *Activities) Discover(ctx context.Context, in cluster.PeerInput) (cluster.DiscoverResult, error) {
	m := in.Member
	ctx = cluster.LogWith(ctx, watcherRole(m))
	c := a.Deps.Cluster(m.Group)
	node, v, err := c.GetNode(ctx, in.Dead)
	if err != nil && !cluster.IsCorrupt(err) {
		return cluster.DiscoverResult{}, err
	}
	if cluster.IsCorrupt(err) {
		a.Deps.Corrupt(ctx, err) // overwritten by the claim below
		node = roles.NodeState{Group: m.Group, Role: in.DeadRole}
	}
	if err := a.claimerAlive(ctx, c, m.Name, "discover "+in.Dead); err != nil {
		if cluster.IsLost(err) {
			// Declared dead itself: it claims nothing (its watchers take
			// over both, in turn).
			a.Deps.Logger(ctx).Warn("not claiming a dead peer", "dead", in.Dead, "why", err)
			return cluster.DiscoverResult{Claimed: false}, nil
		}
		return cluster.DiscoverResult{}, err
	}
	// The verdict may be acted on late (Temporal was away, the worker
	// was slow): the peer may have beaten since, or changed roles (a
	// standby that took a runner's place has a Task now). Claimed as what
	// it no longer is, its Task would not be handed over; the watcher
	// looks again instead.
	if stale := a.staleVerdict(ctx, c, node, in); stale != "" {
		a.Deps.Logger(ctx).Warn("not claiming a peer seen dead: "+stale, "dead", in.Dead, "dead_role", in.DeadRole)
		return cluster.DiscoverResult{Claimed: false}, nil
	}
	deadRole := roles.RoleDeadRunner
	if in.DeadRole == roles.RoleBackup {
		deadRole = roles.RoleDeadBackupRunner
	}
	switch {
	case node.TakenOverBy == m.Name:
		// ours already
	case node.TakenOverBy != "" && !cluster.ClaimerDead(ctx, c, node.TakenOverBy):
		return cluster.DiscoverResult{Claimed: false, By: node.TakenOverBy}, nil
	default:
		claim := roles.NodeState{Group: m.Group, Role: deadRole, TakenOverBy: m.Name}
		if _, err := c.SetNode(ctx, in.Dead, claim, v); err != nil {
			if errors.Is(err, metadata.ErrBadVersion) {
				n2, _, _ := c.GetNode(ctx, in.Dead)
				return cluster.DiscoverResult{Claimed: false, By: n2.TakenOverBy}, nil
			}
			return cluster.DiscoverResult{}, fmt.Errorf("discover %s: claim: %w", in.Dead, err)
		}
		kind := telemetry.KindRunner
		if in.DeadRole == roles.RoleBackup {
			kind = telemetry.KindBackup
		}
		a.Deps.Metrics.Failover(kind)
	}
	if hb, _, err := c.GetHeartbeat(ctx, in.Dead); err == nil {
		hb.HealthyState = roles.HeartAsystole
		_, _ = c.SetHeartbeat(ctx, in.Dead, hb, metadata.AnyVersion)
	}
	res := cluster.DiscoverResult{Claimed: true, By: m.Name}
	t, _, err := c.GetTask(ctx, in.Dead)
	if err != nil && !errors.Is(err, metadata.ErrNotFound) {
		// A corrupted Task cannot be handed over; it is reported, the
		// fail-over goes on.
		a.Deps.Corrupt(ctx, err)
	}
	res.Task = t
	a.Deps.Logger(ctx).Warn("discovered dead peer", "claimer", m.Name, "dead", in.Dead, "dead_role", deadRole, "task_state", t.RunningStatus)
	return res, nil
}

// staleVerdict says why a watcher's verdict on a peer no longer holds ("":
// it holds): the peer's NodeState shows a live role other than the one it
// was declared dead with, or its heartbeat was written since (in.Beat).
func (a *Activities) staleVerdict(ctx context.Context, c *metadata.Cluster, node roles.NodeState, in cluster.PeerInput) string {
	if (node.Role == roles.RoleRunner || node.Role == roles.RoleBackup) && node.Role != in.DeadRole {
		return fmt.Sprintf("it is a %s now, not a %s", node.Role, in.DeadRole)
	}
	if in.Beat == "" {
		return ""
	}
	if hb, _, err := c.GetHeartbeat(ctx, in.Dead); err == nil && hb.HeartRhythmTime != in.Beat && hb.HealthyState != roles.HeartAsystole {
		return fmt.Sprintf("its heartbeat was written since (%s, seen %s)", hb.HeartRhythmTime, in.Beat)
	}
	return ""
}

// Activate is the second fail-over step, under the group lock: the dead
// peer moves from current_crawler and current_runner (or current_backup) to
// fail_crawler and fail_runner (or fail_backup); for a dead runner with
// backups, the claimer moves from current_backup to current_runner,
// total_backup drops by one and standby_id moves to the next backup, and
// the claimer's NodeState becomes runner. Idempotent.
func (a *Activities) Activate(ctx context.Context, in cluster.PeerInput) (cluster.Position, error) {
	m := in.Member
	ctx = cluster.LogWith(ctx, watcherRole(m))
	c := a.Deps.Cluster(m.Group)
	dn, _, err := c.GetNode(ctx, in.Dead)
	if err == nil && dn.TakenOverBy != m.Name {
		return cluster.Position{}, cluster.Lost("activate: %s was claimed by %s, not %s", in.Dead, dn.TakenOverBy, m.Name)
	}
	step := "activate after " + in.Dead
	becomeRunner := false
	g, err := c.UpdateGroupWith(ctx, func(g *roles.GroupState) ([]metadata.Op, error) {
		// The claimer must still be alive when the group changes: one
		// declared dead meanwhile (its own watchers saw it late) has lost
		// its place, and must not take the dead peer's.
		check, err := a.aliveCheck(ctx, c, m.Name, step)
		if err != nil {
			return nil, err
		}
		changed := false
		if slices.Contains(g.CurrentCrawler, in.Dead) {
			g.CurrentCrawler = roles.Remove(g.CurrentCrawler, in.Dead)
			g.FailCrawler = roles.Add(g.FailCrawler, in.Dead)
			changed = true
		}
		if slices.Contains(g.CurrentRunner, in.Dead) {
			g.CurrentRunner = roles.Remove(g.CurrentRunner, in.Dead)
			g.FailRunner = roles.Add(g.FailRunner, in.Dead)
			changed = true
		}
		if slices.Contains(g.CurrentBackup, in.Dead) {
			g.CurrentBackup = roles.Remove(g.CurrentBackup, in.Dead)
			g.FailBackup = roles.Add(g.FailBackup, in.Dead)
			g.TotalBackup = max(0, g.TotalBackup-1)
			changed = true
		}
		if in.DeadRole == roles.RoleRunner && slices.Contains(g.CurrentBackup, m.Name) {
			g.CurrentBackup = roles.Remove(g.CurrentBackup, m.Name)
			g.CurrentRunner = roles.Add(g.CurrentRunner, m.Name)
			g.TotalBackup = max(0, g.TotalBackup-1)
			changed = true
		}
		if in.DeadRole == roles.RoleRunner && slices.Contains(g.CurrentRunner, m.Name) {
			becomeRunner = true
		}
		if s := g.NextStandby(); s != g.StandbyID && g.Standby() == "" {
			g.StandbyID, changed = s, true
		}
		if !changed {
			return nil, metadata.ErrNoChange
		}
		return []metadata.Op{check}, nil
	})
	if cluster.IsLost(err) {
		return cluster.Position{}, err
	}
	if errors.Is(err, metadata.ErrBadVersion) {
		// Its own NodeState changed meanwhile: lost if it was declared
		// dead, else retried.
		return cluster.Position{}, a.lostIfDead(ctx, c, m.Name, step,
			fmt.Errorf("activate %s after %s: its NodeState changed meanwhile: %w", m.Name, in.Dead, err))
	}
	if err != nil {
		return cluster.Position{}, a.Deps.Corrupt(ctx, fmt.Errorf("activate %s after %s: %w", m.Name, in.Dead, err))
	}
	// The dead peer's death report, if a watcher wrote one, is acted on.
	if err := c.Store.Delete(ctx, c.ReportPath(in.Dead), metadata.AnyVersion); err != nil && !errors.Is(err, metadata.ErrNotFound) {
		a.Deps.Logger(ctx).Warn("could not delete the death report", "dead", in.Dead, "err", err)
	}
	node, nv, err := c.GetNode(ctx, m.Name)
	if err != nil {
		return cluster.Position{}, a.Deps.Corrupt(ctx, err)
	}
	if node.Role.Dead() {
		// Declared dead after the group changed: its watchers remove it
		// and it rejoins; the dead role must stay (see claimerAlive).
		return cluster.Position{}, cluster.Lost("activate %s after %s: %s was itself declared dead", m.Name, in.Dead, m.Name)
	}
	if becomeRunner && node.Role != roles.RoleRunner {
		node.Role = roles.RoleRunner
		if _, err := c.SetNode(ctx, m.Name, node, nv); err != nil {
			return cluster.Position{}, a.lostIfDead(ctx, c, m.Name, step, fmt.Errorf("activate %s: write role: %w", m.Name, err))
		}
	}
	a.Deps.Seen(node.Role)
	a.Deps.Logger(cluster.LogWith(ctx, node.Role)).Warn("activated", "crawler", m.Name, "dead", in.Dead, "standby_id", g.StandbyID)
	if in.DeadRole != roles.RoleRunner {
		a.closeDead(ctx, in) // a dead backup has no Task to hand over
	}
	return cluster.PositionOf(node, g, m), nil
}

// closeDead closes the Temporal workflows of a dead peer whose place was
// taken (see InstanceCloser). A failure is logged, not returned: the
// fail-over is done, and a later rejoin of the peer restarts them anyway.
func (a *Activities) closeDead(ctx context.Context, in cluster.PeerInput) {
	if a.Closer == nil {
		return
	}
	reason := fmt.Sprintf("declared dead; %s took its place", in.Member.Name)
	if err := a.Closer.CloseInstance(ctx, in.Member.Group, in.Dead, reason); err != nil {
		a.Deps.Logger(ctx).Warn("could not close the dead instance's workflows", "dead", in.Dead, "err", err)
	}
}

// HandOver is the last fail-over step. With backups (adopt false) it copies
// the dead runner's Task into the claimer's own Task znode, as the
// reference does: a processing Task whole, continuing where it stopped; an
// error Task reset to run again; nothing to do for done, terminate or an
// empty Task. In All-are-Runner mode (adopt true) the Task stays in the dead
// runner's znode and the survivor becomes its holder. Either way the dead
// Task's epoch is raised and its holder set in the same transaction, which
// fences the old holder. Idempotent.
//
// Once the Task is handed over, the dead instance's Temporal workflows are
// closed (Activities.Closer), so that only live roles show as Running.
func (a *Activities) HandOver(ctx context.Context, in cluster.PeerInput, adopt bool) (cluster.HandOverResult, error) {
	res, err := a.handOver(ctx, in, adopt)
	if err == nil {
		a.closeDead(ctx, in)
	}
	return res, err
}

func (a *Activities) handOver(ctx context.Context, in cluster.PeerInput, adopt bool) (cluster.HandOverResult, error) {
	m := in.Member
	role := watcherRole(m)
	if in.DeadRole == roles.RoleRunner {
		role = roles.RoleRunner // activated: the claimer took the dead runner's place
	}
	ctx = cluster.LogWith(ctx, role)
	c := a.Deps.Cluster(m.Group)
	dn, _, err := c.GetNode(ctx, in.Dead)
	if err == nil && dn.TakenOverBy != m.Name {
		return cluster.HandOverResult{}, cluster.Lost("hand over: %s was claimed by %s, not %s", in.Dead, dn.TakenOverBy, m.Name)
	}
	// A claimer declared dead since its claim must not take the Task: it
	// would sit in the Task of an instance nobody hands over (a dead backup
	// has none). The check also goes into each write below.
	alive, err := a.aliveCheck(ctx, c, m.Name, "hand over "+in.Dead)
	if err != nil {
		return cluster.HandOverResult{}, err
	}
	dead, dv, err := c.GetTask(ctx, in.Dead)
	if errors.Is(err, metadata.ErrNotFound) || cluster.IsCorrupt(err) {
		if err != nil {
			a.Deps.Corrupt(ctx, err)
		}
		return cluster.HandOverResult{Owner: m.Name}, nil
	}
	if err != nil {
		return cluster.HandOverResult{}, err
	}
	if dead.Job != nil {
		ctx = cluster.LogWith(ctx, "", "job", dead.Job.ID, "batch", dead.Job.Batch)
	}
	if dead.Holder == m.Name && dead.HandedOverFrom == in.Dead || dead.Holder == m.Name && adopt {
		// done before (a retry after a crash)
		owner := m.Name
		var also []string
		// The store claim follows the ZooKeeper write: a crash between
		// them is finished here.
		if adopt {
			owner = in.Dead
			if also, err = a.adoptHeldBy(ctx, c, in.Dead, m.Name); err != nil {
				return cluster.HandOverResult{}, err
			}
		} else if own, _, err := c.GetTask(ctx, m.Name); err == nil && own.HandedOverFrom == in.Dead && own.Epoch == dead.Epoch {
			if err := a.claimBatch(ctx, own, m.Name); err != nil {
				return cluster.HandOverResult{}, err
			}
			return cluster.HandOverResult{Owner: m.Name, Pending: own.Pending(), Status: own.RunningStatus}, nil
		} else {
			owner = in.Dead // taken over in place: our own Task was busy
		}
		if dead.Pending() {
			if err := a.claimBatch(ctx, dead, m.Name); err != nil {
				return cluster.HandOverResult{}, err
			}
		}
		return cluster.HandOverResult{Owner: owner, Pending: dead.Pending(), Status: dead.RunningStatus, Also: also}, nil
	}
	next, ok := roles.HandOver(dead, in.Dead, m.Name)
	if !ok {
		a.Deps.Logger(ctx).Info("nothing to hand over", "dead", in.Dead, "task_state", dead.RunningStatus)
		res := cluster.HandOverResult{Owner: m.Name, Status: dead.RunningStatus}
		if adopt {
			res.Also, err = a.adoptHeldBy(ctx, c, in.Dead, m.Name)
		}
		return res, err
	}
	moved := dead.Clone()
	moved.HandedOverFrom = in.Dead
	// The copy left behind is marked terminate: it continues elsewhere, and
	// nothing may run it again from here.
	moved.RunningStatus = roles.TaskTerminate
	if adopt {
		next, op := c.FenceTask(in.Dead, dv, next, m.Name, next.Epoch)
		if err := a.handOverWrite(ctx, c, in, next, alive, op); err != nil {
			return cluster.HandOverResult{}, err
		}
		a.Deps.Logger(ctx).Warn("task adopted", "crawler", m.Name, "from", in.Dead, "epoch", next.Epoch, "next_index", next.NextIndex)
		also, err := a.adoptHeldBy(ctx, c, in.Dead, m.Name)
		return cluster.HandOverResult{Owner: in.Dead, Pending: next.Pending(), Status: next.RunningStatus, Also: also}, err
	}
	own, ov, err := c.GetTask(ctx, m.Name)
	if err != nil && !errors.Is(err, metadata.ErrNotFound) && !cluster.IsCorrupt(err) {
		return cluster.HandOverResult{}, err
	}
	if own.Pending() {
		// Work reached our own Task first (it was assigned between Activate
		// and now): take the dead Task over in place instead, as in
		// All-are-Runner mode; the caller runs it from the dead one's znode.
		next, op := c.FenceTask(in.Dead, dv, next, m.Name, next.Epoch)
		if err := a.handOverWrite(ctx, c, in, next, alive, op); err != nil {
			return cluster.HandOverResult{}, err
		}
		a.Deps.Logger(ctx).Warn("task adopted in place (own Task busy)", "crawler", m.Name, "from", in.Dead, "epoch", next.Epoch)
		return cluster.HandOverResult{Owner: in.Dead, Pending: next.Pending(), Status: next.RunningStatus}, nil
	}
	epoch := max(next.Epoch, own.Epoch+1)
	_, movedOp := c.FenceTask(in.Dead, dv, moved, m.Name, epoch)
	if err != nil { // own Task missing or corrupted: replace it
		_, _ = c.SetTask(ctx, m.Name, roles.EmptyTask(), metadata.AnyVersion)
		_, ov, _ = c.Store.Get(ctx, c.TaskPath(m.Name))
	}
	next, nextOp := c.FenceTask(m.Name, ov, next, m.Name, epoch)
	if err := a.handOverWrite(ctx, c, in, next, alive, movedOp, nextOp); err != nil {
		return cluster.HandOverResult{}, err
	}
	a.Deps.Logger(ctx).Warn("task handed over", "crawler", m.Name, "from", in.Dead, "epoch", next.Epoch, "next_index", next.NextIndex, "status", next.RunningStatus)
	return cluster.HandOverResult{Owner: m.Name, Pending: next.Pending(), Status: next.RunningStatus}, nil
}

// handOverWrite writes a hand-over to ZooKeeper in one transaction (ops,
// with alive, the claimer's NodeState check) and then claims next's batch
// in the job store at next's epoch, so that from then on the store refuses
// the old holder's writes. In that order, the store never names a holder
// that ZooKeeper does not: a hand-over refused by ZooKeeper (a Task
// written meanwhile, or the claimer declared dead) leaves the batch where
// it was. The new holder runs the batch only after HandOver returned, so
// after the claim; a crash between the two is finished by the retry.
func (a *Activities) handOverWrite(ctx context.Context, c *metadata.Cluster, in cluster.PeerInput, next roles.Task, alive metadata.Op, ops ...metadata.Op) error {
	m := in.Member
	if err := c.Store.Multi(ctx, append(ops, alive)...); err != nil {
		return a.lostIfDead(ctx, c, m.Name, "hand over "+in.Dead, fmt.Errorf("hand over %s to %s: %w", in.Dead, m.Name, err))
	}
	return a.claimBatch(ctx, next, m.Name)
}

// adoptHeldBy moves to self the pending Tasks, in other instances' znodes,
// that the dead peer was running (All-are-Runner: Tasks it had taken over
// itself), so a chain of deaths loses nothing. It returns their owners,
// including those self held already (a retry).
func (a *Activities) adoptHeldBy(ctx context.Context, c *metadata.Cluster, dead, self string) ([]string, error) {
	g, _, err := c.GetGroup(ctx)
	if err != nil {
		return nil, err
	}
	var owners []string
	for _, n := range append(slices.Clone(g.CurrentCrawler), g.FailCrawler...) {
		if n == dead || n == self {
			continue
		}
		t, v, err := c.GetTask(ctx, n)
		if err != nil || !t.Pending() {
			continue
		}
		if t.Holder == self && t.HandedOverFrom == dead {
			if err := a.claimBatch(ctx, t, self); err != nil { // a retry: finish the claim
				return owners, err
			}
			owners = append(owners, n)
			continue
		}
		if t.Holder != dead {
			continue
		}
		next := t.Clone()
		next.HandedOverFrom = dead
		next, op := c.FenceTask(n, v, next, self, t.Epoch+1)
		if _, err := c.Store.Set(ctx, op.Path, op.Data, op.Version); err != nil {
			if errors.Is(err, metadata.ErrBadVersion) {
				continue
			}
			return owners, err
		}
		if err := a.claimBatch(ctx, next, self); err != nil {
			return owners, err
		}
		a.Deps.Logger(ctx).Warn("task adopted from a dead holder", "crawler", self, "owner", n, "dead_holder", dead, "epoch", next.Epoch)
		owners = append(owners, n)
	}
	return owners, nil
}
