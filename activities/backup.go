package activities

import (
	"context"
	"errors"
	"fmt"
	"go.temporal.io/sdk/activity"
	"slices"
	"time"

	"github.com/batoncrawl/baton/activities/metadata"
	"github.com/batoncrawl/baton/activities/telemetry"
	"github.com/batoncrawl/baton/roles"
)

// watchState is carried in heartbeat details so a retried watch keeps its
// timeout counters.
type watchState struct {
	Counts map[string]roles.PeerCount `json:"counts"`
}

// peerAge returns how old peer's heartbeat is, and its update_timeout. A
// heartbeat that is missing, corrupted or says Apparent Death (a clean
// shutdown) counts as timed out: it proves nothing about liveness, and a
// live instance overwrites it within update_time.
//
// A read that fails for another reason (the watcher's own connection to
// ZooKeeper is down) returns ok false: it says nothing about the peer.
func (a *Activities) peerAge(ctx context.Context, c *metadata.Cluster, peer string, def time.Duration) (age, timeout time.Duration, ok bool) {
	hb, _, err := c.GetHeartbeat(ctx, peer)
	if err != nil {
		if isCorrupt(err) {
			a.corrupt(ctx, err)
			return def, def, true
		}
		return def, def, errors.Is(err, metadata.ErrNotFound)
	}
	timeout, _ = hb.Timeout()
	if hb.HealthyState == roles.HeartApparentDeath || hb.HealthyState == roles.HeartAsystole {
		return timeout, timeout, true
	}
	age, _ = hb.Age(a.now())
	return age, timeout, true
}

// grace is the detector's blindness after the watcher's own trouble: when
// the watcher could not read ZooKeeper (its connection was down, or its
// activity is a retry), nobody could write heartbeats either, so late
// heartbeats are not counted until every peer has had update_timeout to
// write again. This keeps a ZooKeeper leader election from killing live
// runners.
type grace struct {
	until time.Time
	d     time.Duration
}

func newGrace(ctx context.Context, a *Activities, d time.Duration) *grace {
	g := &grace{d: d}
	if activity.IsActivity(ctx) && activity.GetInfo(ctx).Attempt > 1 {
		g.until = a.now().Add(d)
	}
	return g
}

// trouble starts a grace period.
func (g *grace) trouble(now time.Time) { g.until = now.Add(g.d) }

// blind reports whether a late heartbeat must not be counted now; it reads
// the clock only during or after a grace period.
func (g *grace) blind(now func() time.Time) bool {
	if g.until.IsZero() {
		return false
	}
	if now().Before(g.until) {
		return true
	}
	g.until = time.Time{}
	return false
}

// WatchRunners is the Primary Backup's monitor (and, in All-are-Runner
// mode, every runner's monitor of its peers). Every check_crawler_state it
// reads GroupState and the Heartbeat of each runner, and of each other
// backup, and feeds their ages to the dead-runner detector. It returns the
// first peer declared dead, or Changed when the watcher's own position
// changed (it is no longer the standby, or was itself marked dead). Peers
// already claimed by another instance are skipped.
func (a *Activities) WatchRunners(ctx context.Context, in WatchInput) (WatchResult, error) {
	m := in.Member
	ctx = logWith(ctx, watcherRole(m))
	c := a.cluster(m.Group)
	watched := map[string]bool{} // peers whose heartbeat age this call exports
	defer func() {
		for p := range watched {
			a.Metrics.ForgetPeer(p)
		}
	}()
	det := roles.NewDetector(m.Timers)
	var st watchState
	if lastDetails(ctx, &st) && st.Counts != nil {
		det.Counts = st.Counts
	}
	gr := newGrace(ctx, a, m.Timers.UpdateTimeout)
	tick := time.NewTicker(m.Timers.CheckCrawlerState)
	defer tick.Stop()
	for {
		node, _, err := c.GetNode(ctx, m.Name)
		if errors.Is(err, metadata.ErrNotFound) {
			return WatchResult{Changed: true, Position: Position{Missing: true}}, nil
		}
		if err != nil {
			return WatchResult{}, a.corrupt(ctx, err)
		}
		g, _, err := c.GetGroup(ctx)
		if err != nil {
			return WatchResult{}, a.corrupt(ctx, err)
		}
		pos := position(node, g, m)
		if g.AllAreRunners() {
			if node.Role != roles.RoleRunner {
				return WatchResult{Changed: true, Position: pos}, nil
			}
		} else if !pos.Standby {
			return WatchResult{Changed: true, Position: pos}, nil
		}
		type peer struct {
			name string
			role roles.Role
		}
		var peers []peer
		for _, r := range g.CurrentRunner {
			if r != m.Name {
				peers = append(peers, peer{r, roles.RoleRunner})
			}
		}
		for _, b := range g.CurrentBackup {
			if b != m.Name {
				peers = append(peers, peer{b, roles.RoleBackup})
			}
		}
		for _, p := range peers {
			age, timeout, ok := a.peerAge(ctx, c, p.name, m.Timers.UpdateTimeout)
			if !ok {
				gr.trouble(a.now())
				continue
			}
			a.Metrics.PeerAge(p.name, age)
			watched[p.name] = true
			if age >= timeout && gr.blind(a.now) {
				continue
			}
			v := det.Observe(p.name, age, timeout)
			if v != roles.Dead {
				continue
			}
			if p.role == roles.RoleRunner && g.AllAreRunners() && in.Free <= 0 {
				continue // no capacity: leave it to a survivor that has some
			}
			pn, _, err := c.GetNode(ctx, p.name)
			if err == nil && pn.TakenOverBy != "" && pn.TakenOverBy != m.Name && !a.claimerDead(ctx, c, pn.TakenOverBy) {
				continue
			}
			a.log(ctx).Warn("peer declared dead", "watcher", m.Name, "dead", p.name, "dead_role", p.role, "heartbeat_age", age)
			a.Metrics.Detected(age)
			return WatchResult{Dead: p.name, DeadRole: p.role, Position: pos, DetectedAfter: age}, nil
		}
		for name := range det.Counts {
			if !slices.ContainsFunc(peers, func(p peer) bool { return p.name == name }) {
				det.Forget(name)
			}
		}
		for name := range watched {
			if !slices.ContainsFunc(peers, func(p peer) bool { return p.name == name }) {
				a.Metrics.ForgetPeer(name)
				delete(watched, name)
			}
		}
		heartbeat(ctx, watchState{Counts: det.Counts})
		select {
		case <-ctx.Done():
			return WatchResult{}, ctx.Err()
		case <-tick.C:
		}
	}
}

// claimerDead reports whether the instance holding a claim is itself dead,
// so that its claim can be taken over.
func (a *Activities) claimerDead(ctx context.Context, c *metadata.Cluster, claimer string) bool {
	n, _, err := c.GetNode(ctx, claimer)
	return err == nil && n.Role.Dead()
}

// WaitStandby is a Secondary Backup's wait: it returns when standby_id
// becomes its index (Position.Standby), when it was marked dead (Changed),
// or, if it is next in line after the standby, when the primary backup is
// declared dead by the same detector the primary uses for runners. It is
// woken by a watch on GroupState, with check_standby_id as a safety re-read.
func (a *Activities) WaitStandby(ctx context.Context, m Member) (WatchResult, error) {
	ctx = logWith(ctx, roles.RoleBackup)
	c := a.cluster(m.Group)
	watched := "" // the primary whose heartbeat age this call exports
	defer func() {
		if watched != "" {
			a.Metrics.ForgetPeer(watched)
		}
	}()
	det := roles.NewDetector(m.Timers)
	var st watchState
	if lastDetails(ctx, &st) && st.Counts != nil {
		det.Counts = st.Counts
	}
	gr := newGrace(ctx, a, m.Timers.UpdateTimeout)
	for {
		node, _, err := c.GetNode(ctx, m.Name)
		if errors.Is(err, metadata.ErrNotFound) {
			return WatchResult{Changed: true, Position: Position{Missing: true}}, nil
		}
		if err != nil {
			return WatchResult{}, a.corrupt(ctx, err)
		}
		data, _, ch, err := a.Store.GetW(ctx, c.GroupPath())
		if err != nil {
			return WatchResult{}, err
		}
		g, err := roles.DecodeGroupState(data)
		if err != nil {
			return WatchResult{}, a.corrupt(ctx, &metadata.CorruptError{Path: c.GroupPath(), Err: err})
		}
		pos := position(node, g, m)
		if node.Role != roles.RoleBackup || pos.Standby {
			return WatchResult{Changed: true, Position: pos}, nil
		}
		// The primary is watched by the next backup in line only.
		backups := slices.Clone(g.CurrentBackup)
		roles.SortNames(backups)
		primary, next := g.Standby(), ""
		if i := slices.Index(backups, primary); i >= 0 && i+1 < len(backups) {
			next = backups[i+1]
		}
		if primary == "" { // no standby: the smallest backup takes it
			if _, err := c.UpdateGroup(ctx, func(g *roles.GroupState) error {
				if g.Standby() != "" {
					return metadata.ErrNoChange
				}
				g.StandbyID = g.NextStandby()
				return nil
			}); err != nil {
				return WatchResult{}, err
			}
			continue
		}
		if watched != "" && (watched != primary || next != m.Name) {
			a.Metrics.ForgetPeer(watched)
			watched = ""
		}
		if next == m.Name {
			age, timeout, ok := a.peerAge(ctx, c, primary, m.Timers.UpdateTimeout)
			if !ok {
				gr.trouble(a.now())
			}
			a.Metrics.PeerAge(primary, age)
			watched = primary
			if ok && !(age >= timeout && gr.blind(a.now)) && det.Observe(primary, age, timeout) == roles.Dead {
				a.log(ctx).Warn("primary backup declared dead", "watcher", m.Name, "dead", primary, "heartbeat_age", age)
				a.Metrics.Detected(age)
				return WatchResult{Dead: primary, DeadRole: roles.RoleBackup, Position: pos, DetectedAfter: age}, nil
			}
		}
		heartbeat(ctx, watchState{Counts: det.Counts})
		interval := m.Timers.CheckStandbyID
		if next == m.Name {
			interval = m.Timers.CheckCrawlerState
		}
		if err := wait(ctx, ch, interval); err != nil {
			return WatchResult{}, err
		}
	}
}

// Discover is the first fail-over step: it claims the dead peer by writing
// its NodeState role (dead-runner or dead-backup-runner) and taken_over_by
// in one compare-and-set, so exactly one instance hands over a dead peer,
// then marks its Heartbeat Asystole and returns its Task. It is idempotent
// for the claimer; a claim held by another live instance is reported with
// Claimed false.
func (a *Activities) Discover(ctx context.Context, in PeerInput) (DiscoverResult, error) {
	m := in.Member
	ctx = logWith(ctx, watcherRole(m))
	c := a.cluster(m.Group)
	node, v, err := c.GetNode(ctx, in.Dead)
	if err != nil && !isCorrupt(err) {
		return DiscoverResult{}, err
	}
	if isCorrupt(err) {
		a.corrupt(ctx, err) // overwritten by the claim below
		node = roles.NodeState{Group: m.Group, Role: in.DeadRole}
	}
	deadRole := roles.RoleDeadRunner
	if in.DeadRole == roles.RoleBackup {
		deadRole = roles.RoleDeadBackupRunner
	}
	switch {
	case node.TakenOverBy == m.Name:
		// ours already
	case node.TakenOverBy != "" && !a.claimerDead(ctx, c, node.TakenOverBy):
		return DiscoverResult{Claimed: false, By: node.TakenOverBy}, nil
	default:
		claim := roles.NodeState{Group: m.Group, Role: deadRole, TakenOverBy: m.Name}
		if _, err := c.Store.Set(ctx, c.NodePath(in.Dead), metadata.Encode(claim), v); err != nil {
			if errors.Is(err, metadata.ErrBadVersion) {
				n2, _, _ := c.GetNode(ctx, in.Dead)
				return DiscoverResult{Claimed: false, By: n2.TakenOverBy}, nil
			}
			return DiscoverResult{}, fmt.Errorf("discover %s: claim: %w", in.Dead, err)
		}
		kind := telemetry.KindRunner
		if in.DeadRole == roles.RoleBackup {
			kind = telemetry.KindBackup
		}
		a.Metrics.Failover(kind)
	}
	if hb, _, err := c.GetHeartbeat(ctx, in.Dead); err == nil {
		hb.HealthyState = roles.HeartAsystole
		_, _ = c.Put(ctx, c.HeartbeatPath(in.Dead), hb, metadata.AnyVersion)
	}
	res := DiscoverResult{Claimed: true, By: m.Name}
	t, _, err := c.GetTask(ctx, in.Dead)
	if err != nil && !errors.Is(err, metadata.ErrNotFound) {
		// A corrupted Task cannot be handed over; it is reported, the
		// fail-over goes on.
		a.corrupt(ctx, err)
	}
	res.Task = t
	a.log(ctx).Warn("discovered dead peer", "claimer", m.Name, "dead", in.Dead, "dead_role", deadRole, "task_state", t.RunningStatus)
	return res, nil
}

// Activate is the second fail-over step, under the group lock: the dead
// peer moves from current_crawler and current_runner (or current_backup) to
// fail_crawler and fail_runner (or fail_backup); for a dead runner with
// backups, the claimer moves from current_backup to current_runner,
// total_backup drops by one and standby_id moves to the next backup, and
// the claimer's NodeState becomes runner. Idempotent.
func (a *Activities) Activate(ctx context.Context, in PeerInput) (Position, error) {
	m := in.Member
	ctx = logWith(ctx, watcherRole(m))
	c := a.cluster(m.Group)
	dn, _, err := c.GetNode(ctx, in.Dead)
	if err == nil && dn.TakenOverBy != m.Name {
		return Position{}, lost("activate: %s was claimed by %s, not %s", in.Dead, dn.TakenOverBy, m.Name)
	}
	becomeRunner := false
	g, err := c.UpdateGroup(ctx, func(g *roles.GroupState) error {
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
			return metadata.ErrNoChange
		}
		return nil
	})
	if err != nil {
		return Position{}, a.corrupt(ctx, fmt.Errorf("activate %s after %s: %w", m.Name, in.Dead, err))
	}
	node, nv, err := c.GetNode(ctx, m.Name)
	if err != nil {
		return Position{}, a.corrupt(ctx, err)
	}
	if becomeRunner && node.Role != roles.RoleRunner {
		node.Role = roles.RoleRunner
		if _, err := c.Put(ctx, c.NodePath(m.Name), node, nv); err != nil {
			return Position{}, fmt.Errorf("activate %s: write role: %w", m.Name, err)
		}
	}
	a.seen(node.Role)
	a.log(logWith(ctx, node.Role)).Warn("activated", "crawler", m.Name, "dead", in.Dead, "standby_id", g.StandbyID)
	return position(node, g, m), nil
}

// watcherRole is the role of an instance watching its peers, or claiming a
// dead one before it is activated: a runner in All-are-Runner mode, else
// a backup runner.
func watcherRole(m Member) roles.Role {
	if m.AllAreRunners() {
		return roles.RoleRunner
	}
	return roles.RoleBackup
}

// HandOver is the last fail-over step. With backups (adopt false) it copies
// the dead runner's Task into the claimer's own Task znode, as the
// reference does: a processing Task whole, continuing where it stopped; an
// error Task reset to run again; nothing to do for done, terminate or an
// empty Task. In All-are-Runner mode (adopt true) the Task stays in the dead
// runner's znode and the survivor becomes its holder. Either way the dead
// Task's epoch is raised and its holder set in the same transaction, which
// fences the old holder. Idempotent.
func (a *Activities) HandOver(ctx context.Context, in PeerInput, adopt bool) (HandOverResult, error) {
	m := in.Member
	role := watcherRole(m)
	if in.DeadRole == roles.RoleRunner {
		role = roles.RoleRunner // activated: the claimer took the dead runner's place
	}
	ctx = logWith(ctx, role)
	c := a.cluster(m.Group)
	dn, _, err := c.GetNode(ctx, in.Dead)
	if err == nil && dn.TakenOverBy != m.Name {
		return HandOverResult{}, lost("hand over: %s was claimed by %s, not %s", in.Dead, dn.TakenOverBy, m.Name)
	}
	dead, dv, err := c.GetTask(ctx, in.Dead)
	if errors.Is(err, metadata.ErrNotFound) || isCorrupt(err) {
		if err != nil {
			a.corrupt(ctx, err)
		}
		return HandOverResult{Owner: m.Name}, nil
	}
	if err != nil {
		return HandOverResult{}, err
	}
	if dead.Job != nil {
		ctx = logWith(ctx, "", "job", dead.Job.ID, "batch", dead.Job.Batch)
	}
	if dead.Holder == m.Name && dead.HandedOverFrom == in.Dead || dead.Holder == m.Name && adopt {
		// done before (a retry after a crash)
		owner := m.Name
		var also []string
		if adopt {
			owner = in.Dead
			if also, err = a.adoptHeldBy(ctx, c, in.Dead, m.Name); err != nil {
				return HandOverResult{}, err
			}
		} else if own, _, err := c.GetTask(ctx, m.Name); err == nil && own.HandedOverFrom == in.Dead && own.Epoch == dead.Epoch {
			return HandOverResult{Owner: m.Name, Pending: own.Pending(), Status: own.RunningStatus}, nil
		} else {
			owner = in.Dead // taken over in place: our own Task was busy
		}
		return HandOverResult{Owner: owner, Pending: dead.Pending(), Status: dead.RunningStatus, Also: also}, nil
	}
	next, ok := roles.HandOver(dead, in.Dead, m.Name)
	if !ok {
		a.log(ctx).Info("nothing to hand over", "dead", in.Dead, "task_state", dead.RunningStatus)
		res := HandOverResult{Owner: m.Name, Status: dead.RunningStatus}
		if adopt {
			res.Also, err = a.adoptHeldBy(ctx, c, in.Dead, m.Name)
		}
		return res, err
	}
	moved := dead.Clone()
	moved.Holder, moved.Epoch, moved.HandedOverFrom = m.Name, next.Epoch, in.Dead
	// The copy left behind is marked terminate: it continues elsewhere, and
	// nothing may run it again from here.
	moved.RunningStatus = roles.TaskTerminate
	if adopt {
		if err := a.claimBatch(ctx, next, m.Name); err != nil {
			return HandOverResult{}, err
		}
		if err := c.Store.Multi(ctx, metadata.SetOp(c.TaskPath(in.Dead), metadata.Encode(next), dv)); err != nil {
			return HandOverResult{}, fmt.Errorf("hand over %s to %s: %w", in.Dead, m.Name, err)
		}
		a.log(ctx).Warn("task adopted", "crawler", m.Name, "from", in.Dead, "epoch", next.Epoch, "next_index", next.NextIndex)
		also, err := a.adoptHeldBy(ctx, c, in.Dead, m.Name)
		return HandOverResult{Owner: in.Dead, Pending: next.Pending(), Status: next.RunningStatus, Also: also}, err
	}
	own, ov, err := c.GetTask(ctx, m.Name)
	if err != nil && !errors.Is(err, metadata.ErrNotFound) && !isCorrupt(err) {
		return HandOverResult{}, err
	}
	if own.Pending() {
		// Work reached our own Task first (it was assigned between Activate
		// and now): take the dead Task over in place instead, as in
		// All-are-Runner mode; the caller runs it from the dead one's znode.
		if err := a.claimBatch(ctx, next, m.Name); err != nil {
			return HandOverResult{}, err
		}
		if err := c.Store.Multi(ctx, metadata.SetOp(c.TaskPath(in.Dead), metadata.Encode(next), dv)); err != nil {
			return HandOverResult{}, fmt.Errorf("hand over %s to %s in place: %w", in.Dead, m.Name, err)
		}
		a.log(ctx).Warn("task adopted in place (own Task busy)", "crawler", m.Name, "from", in.Dead, "epoch", next.Epoch)
		return HandOverResult{Owner: in.Dead, Pending: next.Pending(), Status: next.RunningStatus}, nil
	}
	next.Epoch = max(next.Epoch, own.Epoch+1)
	moved.Epoch = next.Epoch
	ops := []metadata.Op{metadata.SetOp(c.TaskPath(in.Dead), metadata.Encode(moved), dv)}
	if err != nil { // own Task missing or corrupted: replace it
		_, _ = c.Put(ctx, c.TaskPath(m.Name), roles.EmptyTask(), metadata.AnyVersion)
		_, ov, _ = c.Store.Get(ctx, c.TaskPath(m.Name))
	}
	ops = append(ops, metadata.SetOp(c.TaskPath(m.Name), metadata.Encode(next), ov))
	// The store first: from now on it refuses the dead holder's writes.
	if err := a.claimBatch(ctx, next, m.Name); err != nil {
		return HandOverResult{}, err
	}
	if err := c.Store.Multi(ctx, ops...); err != nil {
		return HandOverResult{}, fmt.Errorf("hand over %s to %s: %w", in.Dead, m.Name, err)
	}
	a.log(ctx).Warn("task handed over", "crawler", m.Name, "from", in.Dead, "epoch", next.Epoch, "next_index", next.NextIndex, "status", next.RunningStatus)
	return HandOverResult{Owner: m.Name, Pending: next.Pending(), Status: next.RunningStatus}, nil
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
			owners = append(owners, n)
			continue
		}
		if t.Holder != dead {
			continue
		}
		next := t.Clone()
		next.Holder, next.Epoch, next.HandedOverFrom = self, t.Epoch+1, dead
		if err := a.claimBatch(ctx, next, self); err != nil {
			return nil, err
		}
		if _, err := c.Store.Set(ctx, c.TaskPath(n), metadata.Encode(next), v); err != nil {
			if errors.Is(err, metadata.ErrBadVersion) {
				continue
			}
			return owners, err
		}
		a.log(ctx).Warn("task adopted from a dead holder", "crawler", self, "owner", n, "dead_holder", dead, "epoch", next.Epoch)
		owners = append(owners, n)
	}
	return owners, nil
}
