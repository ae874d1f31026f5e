package failover

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/batoncrawl/baton/activities/cluster"
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
func (a *Activities) peerAge(ctx context.Context, c *metadata.Cluster, peer string, def time.Duration) (age, timeout time.Duration, beat string, ok bool) {
	hb, _, err := c.GetHeartbeat(ctx, peer)
	if err != nil {
		if cluster.IsCorrupt(err) {
			a.Deps.Corrupt(ctx, err)
			return def, def, "", true
		}
		return def, def, "", errors.Is(err, metadata.ErrNotFound)
	}
	timeout, _ = hb.Timeout()
	if hb.HealthyState == roles.HeartApparentDeath || hb.HealthyState == roles.HeartAsystole {
		return timeout, timeout, hb.HeartRhythmTime, true
	}
	age, _ = hb.Age(a.Deps.Now())
	return age, timeout, hb.HeartRhythmTime, true
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
		g.until = a.Deps.Now().Add(d)
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

// ring is one watcher's view of its ring successors: the dead-peer
// detector with its counts, the grace after the watcher's own trouble, and
// the peers whose heartbeat age it exports. Used by one goroutine.
type ring struct {
	a       *Activities
	c       *metadata.Cluster
	m       cluster.Member
	det     *roles.Detector
	gr      *grace
	watched map[string]bool
	// reported are the runners this watcher reported dead (it cannot take
	// them over itself), so it writes each report once.
	reported map[string]bool
	// due is how soon, after the last check, the first watched heartbeat
	// reaches its update_timeout (0: none is fresh, or one is late already).
	due time.Duration
}

// wait is how long the watcher waits before its next check: the check
// interval, or less when a watched heartbeat times out sooner, so that
// its first late check comes when it times out rather than up to a check
// interval later. While a watched heartbeat is late, checks are a check
// interval apart, so a peer is still declared dead only after
// heart_rhythm_timeout checks that each saw it late, its heartbeat then
// at least update_timeout + (heart_rhythm_timeout - 1) x the interval old.
func (r *ring) wait() time.Duration {
	d := r.m.Timers.CheckCrawlerState
	if r.due > 0 && r.due < d {
		return r.due
	}
	return d
}

func (a *Activities) newRing(ctx context.Context, c *metadata.Cluster, m cluster.Member) *ring {
	det, gr := a.resumeDetector(ctx, m.Timers)
	return &ring{a: a, c: c, m: m, det: det, gr: gr, watched: map[string]bool{}, reported: map[string]bool{}}
}

// close stops exporting the watched peers' ages.
func (r *ring) close() {
	for p := range r.watched {
		r.a.Deps.Metrics.ForgetPeer(p)
	}
}

// deadPeer is a peer declared dead by a watcher.
type deadPeer struct {
	name string
	role roles.Role
	age  time.Duration
	beat string // its heartbeat's heart_rhythm_time then ("" if unreadable)
}

// check reads the heartbeat of each of the watcher's ring successors
// among the group's members once, feeds their ages to the detector, and
// returns the peers declared dead now (in ring order), with their role
// (roleOf). It forgets peers that are no longer its successors.
func (r *ring) check(ctx context.Context, members []string, roleOf func(context.Context, string) roles.Role) []deadPeer {
	peers := roles.RingSuccessors(members, r.m.Name, roles.RingWatchers)
	var dead []deadPeer
	r.due = 0
	late := false
	defer func() {
		if late {
			r.due = 0
		}
	}()
	for _, p := range peers {
		age, timeout, beat, ok := r.a.peerAge(ctx, r.c, p, r.m.Timers.UpdateTimeout)
		if !ok {
			r.gr.trouble(r.a.Deps.Now())
			continue
		}
		if left := timeout - age; left > 0 && (r.due == 0 || left < r.due) {
			// A millisecond past it: the check then sees it timed out.
			r.due = left + time.Millisecond
		}
		r.a.Deps.Metrics.PeerAge(p, age)
		r.watched[p] = true
		if age >= timeout && r.gr.blind(r.a.Deps.Now) {
			continue
		}
		if age >= timeout {
			late = true
		}
		if r.det.Observe(p, age, timeout) != roles.Dead {
			delete(r.reported, p) // alive (again): a later death is reported anew
			continue
		}
		if role := roleOf(ctx, p); role != "" {
			dead = append(dead, deadPeer{name: p, role: role, age: age, beat: beat})
		}
	}
	for name := range r.det.Counts {
		if !slices.Contains(peers, name) {
			r.det.Forget(name)
		}
	}
	for name := range r.watched {
		if !slices.Contains(peers, name) {
			r.a.Deps.Metrics.ForgetPeer(name)
			delete(r.watched, name)
		}
	}
	for name := range r.reported {
		if !slices.Contains(peers, name) {
			delete(r.reported, name)
		}
	}
	return dead
}

// claimedElsewhere reports whether a live instance other than the watcher
// already claimed the dead peer.
func (r *ring) claimedElsewhere(ctx context.Context, name string) bool {
	pn, _, err := r.c.GetNode(ctx, name)
	return err == nil && pn.TakenOverBy != "" && pn.TakenOverBy != r.m.Name && !cluster.ClaimerDead(ctx, r.c, pn.TakenOverBy)
}

// report writes a death report for a runner the watcher cannot take over
// itself (it is not the standby, or in All-are-Runner mode it has no room):
// a child znode of the group's reports directory, which wakes the
// instances that can act on it. Written once per runner; a failure is
// logged and the report retried at the next check.
func (r *ring) report(ctx context.Context, d deadPeer) {
	if r.reported[d.name] {
		return
	}
	body := metadata.Encode(roles.DeathReport{ReportedBy: r.m.Name, Role: d.role, HeartbeatAge: d.age.String(), Time: r.a.Deps.Now().UTC().Format(roles.TimeFormat)})
	_, err := r.c.Store.Create(ctx, r.c.ReportPath(d.name), body, metadata.Persistent)
	if err != nil && !errors.Is(err, metadata.ErrExists) {
		r.a.Deps.Logger(ctx).Warn("could not report a dead peer", "watcher", r.m.Name, "dead", d.name, "err", err)
		return
	}
	r.reported[d.name] = true
	r.a.Deps.Logger(ctx).Warn("peer reported dead", "watcher", r.m.Name, "dead", d.name, "dead_role", d.role, "heartbeat_age", d.age)
}

// reports returns the runners reported dead that the watcher may take
// over now: a report is taken when the runner is still a current runner
// whose heartbeat is at least update_timeout old (the reporter's verdict,
// checked once more here). Reports of former members, and of runners whose
// heartbeat is fresh again (the reporter was wrong), are deleted.
func (r *ring) reports(ctx context.Context, names []string, roleOf func(context.Context, string) roles.Role) []deadPeer {
	names = slices.Clone(names) // the caller's cached listing stays as read
	roles.SortNames(names)
	var out []deadPeer
	for _, n := range names {
		if _, err := roles.ParseName(n); err != nil {
			r.a.Deps.Logger(ctx).Warn("ignoring a death report with a bad name", "znode", r.c.ReportPath(n), "err", err)
			continue
		}
		if n == r.m.Name || roleOf(ctx, n) != roles.RoleRunner {
			if n != r.m.Name {
				r.dropReport(ctx, n, "not a current runner")
			}
			continue
		}
		age, timeout, beat, ok := r.a.peerAge(ctx, r.c, n, r.m.Timers.UpdateTimeout)
		if !ok {
			continue
		}
		if age < timeout {
			r.dropReport(ctx, n, "its heartbeat is fresh")
			continue
		}
		out = append(out, deadPeer{name: n, role: roles.RoleRunner, age: age, beat: beat})
	}
	return out
}

// electing reports whether a member of g registered, is not elected yet
// and is alive (its heartbeat is fresh). During formation the runner list
// fills one Elect at a time: a standby elected early sees the group short
// of runners, and would promote itself into a place a member electing
// right after it is about to take. It reads heartbeats only while some
// member is unelected, that is during formation.
func (a *Activities) electing(ctx context.Context, c *metadata.Cluster, g roles.GroupState, def time.Duration) bool {
	for _, n := range g.Unelected() {
		if age, timeout, _, ok := a.peerAge(ctx, c, n, def); ok && age < timeout {
			return true
		}
	}
	return false
}

func (r *ring) dropReport(ctx context.Context, name, why string) {
	if err := r.c.Store.Delete(ctx, r.c.ReportPath(name), metadata.AnyVersion); err == nil {
		r.a.Deps.Logger(ctx).Info("death report dropped", "dead", name, "why", why)
	}
}

// WatchRunners is the watch of the Primary Backup and of every runner.
// Every check_crawler_state it reads the heartbeats of the watcher's ring
// successors (see roles.RingWatchers) and feeds their ages to the dead-runner
// detector; the watcher's view of its group (groupView) is read again only
// after it changed.
//
// What it does with a dead peer depends on who watches:
//   - a dead backup is returned (Dead) to whoever detects it, which removes
//     it from the group;
//   - a dead runner is returned to the standby (the Primary Backup) and,
//     in All-are-Runner mode, to a runner with room (Free > 0). Any other
//     watcher reports it: a child znode under the group's reports
//     directory, which wakes the standby (or the runners with room), whose
//     own watch takes the report once it sees the heartbeat timed out too.
//
// It returns Changed when the watcher's own position changed (a runner
// that is a runner no more, a backup that is not the standby, or a watcher
// marked dead), and Promote when the watcher is the standby and the group
// wants more runners than it has (a scale-up). Peers already claimed by
// another live instance are skipped.
func (a *Activities) WatchRunners(ctx context.Context, in cluster.WatchInput) (cluster.WatchResult, error) {
	m := in.Member
	ctx = cluster.LogWith(ctx, watcherRole(m))
	c := a.Deps.Cluster(m.Group)
	r := a.newRing(ctx, c, m)
	defer r.close()
	v := a.newView(c, m)
	var reports cluster.WatchedChildren
	tick := time.NewTimer(m.Timers.CheckCrawlerState)
	defer tick.Stop()
	for {
		node, pos, gone, err := v.position(ctx)
		if gone || err != nil {
			return cluster.WatchResult{Changed: gone, Position: pos}, err
		}
		all, err := v.allRunners(ctx)
		if err != nil {
			return cluster.WatchResult{}, a.Deps.Corrupt(ctx, err)
		}
		pos.AllRunner = all
		acting := false // takes over dead runners itself
		switch {
		case node.Role == roles.RoleRunner && in.As != roles.RoleBackup:
			acting = all && in.Free > 0
		case pos.Standby && !all && in.As != roles.RoleRunner:
			// Only the standby reads GroupState (again only after it
			// changed): it promotes itself when the group wants runners.
			g, err := v.group(ctx)
			if err != nil {
				return cluster.WatchResult{}, a.Deps.Corrupt(ctx, err)
			}
			if g.WantsRunner(true) && !a.electing(ctx, c, g, m.Timers.UpdateTimeout) {
				return cluster.WatchResult{Promote: true, Position: pos}, nil
			}
			acting = true
		default:
			return cluster.WatchResult{Changed: true, Position: pos}, nil
		}
		found := func(d deadPeer) (cluster.WatchResult, bool) {
			if r.claimedElsewhere(ctx, d.name) {
				return cluster.WatchResult{}, false
			}
			a.Deps.Logger(ctx).Warn("peer declared dead", "watcher", m.Name, "dead", d.name, "dead_role", d.role, "heartbeat_age", d.age)
			a.Deps.Metrics.Detected(d.age)
			return cluster.WatchResult{Dead: d.name, DeadRole: d.role, Position: pos, DetectedAfter: d.age, Beat: d.beat}, true
		}
		names, err := v.members(ctx)
		if err != nil {
			return cluster.WatchResult{}, a.Deps.Corrupt(ctx, err)
		}
		for _, d := range r.check(ctx, names, v.roleOf) {
			if d.role == roles.RoleRunner && !acting {
				r.report(ctx, d)
				continue
			}
			if res, ok := found(d); ok {
				return res, nil
			}
		}
		if acting {
			// Reports are listed again only after one came or went; a
			// pending one is looked at every check.
			names, err := reports.Get(ctx, a.Deps.Store, c.ReportsPath())
			if err != nil && !errors.Is(err, metadata.ErrNotFound) {
				return cluster.WatchResult{}, fmt.Errorf("read death reports %s: %w", c.ReportsPath(), err)
			}
			for _, d := range r.reports(ctx, names, v.roleOf) {
				if res, ok := found(d); ok {
					return res, nil
				}
			}
		}
		cluster.Heartbeat(ctx, watchState{Counts: r.det.Counts})
		tick.Reset(r.wait())
		select {
		case <-ctx.Done():
			return cluster.WatchResult{}, ctx.Err()
		case <-tick.C:
		case <-reports.Changed(): // nil (never) unless acting
		}
	}
}

// WaitStandby is a Secondary Backup's wait: it returns when standby_id
// becomes its index (cluster.Position.Standby) or when it was marked dead
// (Changed). Meanwhile it watches its ring successors like every member:
// a dead backup is returned (the secondary removes it from the group), a
// dead runner is reported to the standby. It is woken by a watch on
// GroupState, and checks its successors every check_crawler_state.
func (a *Activities) WaitStandby(ctx context.Context, m cluster.Member) (cluster.WatchResult, error) {
	ctx = cluster.LogWith(ctx, roles.RoleBackup)
	c := a.Deps.Cluster(m.Group)
	r := a.newRing(ctx, c, m)
	defer r.close()
	v := a.newView(c, m)
	var seen []string // the membership listing the standby was last checked with
	for {
		node, pos, gone, err := v.position(ctx)
		if gone || err != nil {
			return cluster.WatchResult{Changed: gone, Position: pos}, err
		}
		if node.Role != roles.RoleBackup || pos.Standby {
			return cluster.WatchResult{Changed: true, Position: pos}, nil
		}
		names, err := v.members(ctx)
		if err != nil {
			return cluster.WatchResult{}, a.Deps.Corrupt(ctx, err)
		}
		if !slices.Equal(names, seen) {
			// Members came or went: if the standby went with nobody named
			// in its place, the smallest backup takes it.
			seen = slices.Clone(names)
			g, _, err := c.GetGroup(ctx)
			if err != nil {
				return cluster.WatchResult{}, a.Deps.Corrupt(ctx, err)
			}
			if g.Standby() == "" && len(g.CurrentBackup) > 0 {
				if _, err := c.UpdateGroup(ctx, func(g *roles.GroupState) error {
					if g.Standby() != "" {
						return metadata.ErrNoChange
					}
					g.StandbyID = g.NextStandby()
					return nil
				}); err != nil {
					return cluster.WatchResult{}, err
				}
				continue
			}
		}
		for _, d := range r.check(ctx, names, v.roleOf) {
			if d.role == roles.RoleRunner {
				r.report(ctx, d)
				continue
			}
			if r.claimedElsewhere(ctx, d.name) {
				continue
			}
			a.Deps.Logger(ctx).Warn("backup declared dead", "watcher", m.Name, "dead", d.name, "heartbeat_age", d.age)
			a.Deps.Metrics.Detected(d.age)
			return cluster.WatchResult{Dead: d.name, DeadRole: roles.RoleBackup, Position: pos, DetectedAfter: d.age, Beat: d.beat}, nil
		}
		cluster.Heartbeat(ctx, watchState{Counts: r.det.Counts})
		if _, err := metadata.WaitAny(ctx, r.wait(), v.selfZ.Changed(), v.nodeZ.Changed()); err != nil {
			return cluster.WatchResult{}, err
		}
	}
}

// lastDetails loads the heartbeat details of the previous attempt.
func lastDetails(ctx context.Context, v any) bool {
	if !activity.IsActivity(ctx) || !activity.HasHeartbeatDetails(ctx) {
		return false
	}
	return activity.GetHeartbeatDetails(ctx, v) == nil
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
