package activities

import (
	"context"
	"errors"
	"slices"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/batoncrawl/baton/activities/metadata"
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

// ringWatchers is how many runners watch each runner in All-are-Runner
// mode: each watches its ringWatchers successors on the ring of runners
// sorted by index, so the cost per instance stays flat as the group grows
// (not every peer every check_crawler_state), and every runner is watched
// by that many predecessors.
const ringWatchers = 2

// ringSuccessors returns the k runners after self on the ring of runners
// sorted by index (fewer when the group is smaller). A member not in the
// list (not a runner yet) watches the first k.
func ringSuccessors(runners []string, self string, k int) []string {
	ring := slices.Clone(runners)
	roles.SortNames(ring)
	ring = slices.DeleteFunc(ring, func(n string) bool { return n == self })
	if len(ring) <= k {
		return ring
	}
	// Where self would be in the sorted ring: its successors follow.
	i, _ := slices.BinarySearchFunc(ring, self, func(a, b string) int {
		return roles.IndexOf(a) - roles.IndexOf(b)
	})
	out := make([]string, 0, k)
	for j := 0; j < k; j++ {
		out = append(out, ring[(i+j)%len(ring)])
	}
	return out
}

// WatchRunners is the Primary Backup's monitor (and, in All-are-Runner
// mode, every runner's monitor of its ring successors). Every check_crawler_state it
// reads GroupState and the Heartbeat of each runner, and of each other
// backup, and feeds their ages to the dead-runner detector. It returns the
// first peer declared dead, Changed when the watcher's own position
// changed (it is no longer the standby, or was itself marked dead), or
// Promote when the group wants more runners than it has and can spare the
// standby (a scale-up). Peers already claimed by another instance are
// skipped.
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
	det, gr := a.resumeDetector(ctx, m.Timers)
	var nodeZ, groupZ watchedZnode
	tick := time.NewTicker(m.Timers.CheckCrawlerState)
	defer tick.Stop()
	for {
		// The watcher's own NodeState and GroupState are read again only
		// after they changed (a watch each): a check costs ZooKeeper the
		// watched peers' heartbeats, not the group's whole membership.
		nd, err := nodeZ.get(ctx, a.Store, c.NodePath(m.Name))
		node, err := decodeWith(nd, err, c.NodePath(m.Name), roles.DecodeNodeState)
		if errors.Is(err, metadata.ErrNotFound) {
			return WatchResult{Changed: true, Position: Position{Missing: true}}, nil
		}
		if err != nil {
			return WatchResult{}, a.corrupt(ctx, err)
		}
		gd, err := groupZ.get(ctx, a.Store, c.GroupPath())
		g, err := decodeWith(gd, err, c.GroupPath(), roles.DecodeGroupState)
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
		} else if g.WantsRunner(true) {
			return WatchResult{Promote: true, Position: pos}, nil
		}
		type peer struct {
			name string
			role roles.Role
		}
		var peers []peer
		runners := g.CurrentRunner
		if g.AllAreRunners() {
			runners = ringSuccessors(g.CurrentRunner, m.Name, ringWatchers)
		}
		for _, r := range runners {
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
	det, gr := a.resumeDetector(ctx, m.Timers)
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

// watcherRole is the role of an instance watching its peers, or claiming a
// dead one before it is activated: a runner in All-are-Runner mode, else
// a backup runner.
func watcherRole(m Member) roles.Role {
	if m.AllAreRunners() {
		return roles.RoleRunner
	}
	return roles.RoleBackup
}

// resumeDetector returns a dead-peer detector with the counts the previous
// attempt of this activity recorded in its heartbeat details (a retried
// watch does not start counting from zero), and the grace after the
// watcher's own ZooKeeper trouble.
func (a *Activities) resumeDetector(ctx context.Context, t roles.Timers) (*roles.Detector, *grace) {
	det := roles.NewDetector(t)
	var st watchState
	if lastDetails(ctx, &st) && st.Counts != nil {
		det.Counts = st.Counts
	}
	return det, newGrace(ctx, a, t.UpdateTimeout)
}
