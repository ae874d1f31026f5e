package workflows

import (
	"errors"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/batoncrawl/baton/activities/cluster"
	"github.com/batoncrawl/baton/roles"
)

// RoleResult is why a role workflow ended; the Lifecycle then re-reads the
// instance's position and dispatches again.
type RoleResult struct {
	Reason string     `json:"reason"` // "fenced", "position-changed", "activated", "promoted"
	Role   roles.Role `json:"role,omitempty"`
	// TookOver lists the dead peers whose Tasks this role handed over.
	TookOver []string `json:"took_over,omitempty"`
}

// Reasons a role workflow ends.
const (
	ReasonFenced    = "fenced"
	ReasonChanged   = "position-changed"
	ReasonActivated = "activated"
	ReasonPromoted  = "promoted"
)

// Runner is the Runner role: it waits for its Task (a ZooKeeper watch,
// inside the WaitTask activity), runs it (RunTask) and waits again. Beside
// the task loop a WatchRunners activity watches the runner's ring
// successors: with backups, a dead runner is reported to the standby and a
// dead backup is removed from the group by this runner. In All-are-Runner
// mode it is also the backup of its peers: when a peer dies this runner
// claims it (only one survivor wins the claim) and runs the dead peer's Task
// beside its own, as long as it runs fewer than Member.Capacity Tasks; at
// capacity it only reports dead peers, so a dead peer's Task waits for a
// survivor with room (the avalanche guard). It ends when the runner is fenced (marked
// dead), and continues as new to keep its history bounded.
func Runner(ctx workflow.Context, m cluster.Member) (RoleResult, error) {
	lctx, sctx := withLong(ctx, m), withShort(ctx, m)
	capacity := 1
	if m.AllAreRunners() {
		capacity = max(1, m.Capacity)
	}
	// Since "ring-watch", every runner watches its ring successors, with
	// backups too (it reports a dead runner to the standby and removes a
	// dead backup itself), and keeps watching at capacity (it then reports
	// dead peers instead of taking them over). Before, only All-are-Runner
	// runners watched, and stopped at capacity.
	ringWatch := workflow.GetVersion(ctx, "ring-watch", workflow.DefaultVersion, 1) == 1
	watches := ringWatch || m.AllAreRunners()
	watchFree := 0 // Free of the running watch
	sel := workflow.NewSelector(ctx)
	var (
		active, loops                int
		waiting, watching, ownActive bool
		stopping                     bool
		cancelWait, cancelWatch      workflow.CancelFunc
		result                       *RoleResult
		fatal                        error
		tookOver                     []string
	)
	done := func(r RoleResult) {
		if result == nil {
			r.TookOver = tookOver
			result = &r
		}
	}
	var startRun func(owner string)
	startRun = func(owner string) {
		active++
		if owner == m.Name {
			ownActive = true
		}
		f := workflow.ExecuteActivity(lctx, ra.RunTask, cluster.RunTaskInput{Member: m, Owner: owner})
		sel.AddFuture(f, func(f workflow.Future) {
			active--
			if owner == m.Name {
				ownActive = false
			}
			var r cluster.RunTaskResult
			err := f.Get(ctx, &r)
			switch {
			case cluster.IsFenced(err) && owner == m.Name:
				done(RoleResult{Reason: ReasonFenced})
			case cluster.IsFenced(err):
				workflow.GetLogger(ctx).Warn("adopted task fenced", "owner", owner, "error", err)
			case err != nil:
				fatal = err
			}
		})
	}
	startWait := func() {
		wctx, cancel := workflow.WithCancel(lctx)
		cancelWait, waiting = cancel, true
		f := workflow.ExecuteActivity(wctx, ra.WaitTask, m)
		sel.AddFuture(f, func(f workflow.Future) {
			waiting = false
			var w cluster.WaitTaskResult
			err := f.Get(ctx, &w)
			var ce *temporal.CanceledError
			switch {
			case errors.As(err, &ce):
			case err != nil:
				fatal = err
			case w.Fenced:
				done(RoleResult{Reason: ReasonFenced, Role: w.Role})
			case w.Pending:
				startRun(m.Name)
			}
		})
	}
	startWatch := func() {
		wctx, cancel := workflow.WithCancel(lctx)
		cancelWatch, watching = cancel, true
		watchFree = 0
		if m.AllAreRunners() {
			watchFree = max(0, capacity-active)
		}
		f := workflow.ExecuteActivity(wctx, fa.WatchRunners, cluster.WatchInput{Member: m, Free: watchFree})
		sel.AddFuture(f, func(f workflow.Future) {
			watching = false
			var w cluster.WatchResult
			err := f.Get(ctx, &w)
			var ce *temporal.CanceledError
			switch {
			case errors.As(err, &ce):
			case err != nil:
				fatal = err
			case w.Changed && ringWatch && w.Position.Role.Dead():
				// Marked dead: the same end as when WaitTask sees it first.
				done(RoleResult{Reason: ReasonFenced, Role: w.Position.Role})
			case w.Changed:
				done(RoleResult{Reason: ReasonChanged, Role: w.Position.Role})
			case w.Dead != "" && (active < capacity || (ringWatch && w.DeadRole != roles.RoleRunner)):
				// A dead backup has no Task: removing it takes no room.
				h, claimed, err := failOver(sctx, m, w, true)
				if err != nil {
					fatal = err
					return
				}
				if claimed {
					tookOver = append(tookOver, w.Dead)
				}
				if claimed && h.Pending {
					startRun(h.Owner)
				}
				for _, owner := range h.Also {
					if claimed {
						startRun(owner)
					}
				}
			}
		})
	}
	for {
		if result != nil || fatal != nil {
			stopping = true
		}
		if stopping {
			if waiting {
				cancelWait()
			}
			if watching {
				cancelWatch()
			}
		} else {
			if !waiting && !ownActive && active < capacity {
				startWait() // at capacity even the own Task waits (avalanche guard)
			}
			switch {
			case !watches:
			case !ringWatch && !watching && active < capacity:
				startWatch()
			case !ringWatch && watching && active >= capacity:
				cancelWatch() // no room: let a survivor with room take the next dead peer
			case ringWatch && !watching:
				startWatch()
			case ringWatch && m.AllAreRunners() && (watchFree > 0) != (active < capacity):
				// Room came or went: watch again with the new Free (at
				// capacity it reports dead peers for a survivor with room).
				cancelWatch()
			}
		}
		if stopping && !waiting && !watching && (active == 0 || result != nil || fatal != nil) {
			break
		}
		sel.Select(ctx)
		loops++
		if loops >= maxLoops || workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			stopping = true
		}
	}
	if fatal != nil {
		return RoleResult{}, fatal
	}
	if result != nil {
		return *result, nil
	}
	return RoleResult{}, workflow.NewContinueAsNewError(ctx, Runner, m)
}

// failOver runs the three fail-over steps for a dead peer, each its own
// activity so that a crash between them resumes at the next: Discover
// (claim), Activate (group membership) and, for a dead runner, HandOver.
func failOver(ctx workflow.Context, m cluster.Member, w cluster.WatchResult, adopt bool) (cluster.HandOverResult, bool, error) {
	in := cluster.PeerInput{Member: m, Dead: w.Dead, DeadRole: w.DeadRole, Beat: w.Beat}
	var d cluster.DiscoverResult
	if err := workflow.ExecuteActivity(ctx, fa.Discover, in).Get(ctx, &d); err != nil {
		return cluster.HandOverResult{}, false, err
	}
	if !d.Claimed {
		workflow.GetLogger(ctx).Info("dead peer claimed by another instance", "dead", w.Dead, "by", d.By)
		return cluster.HandOverResult{}, false, nil
	}
	var pos cluster.Position
	if err := workflow.ExecuteActivity(ctx, fa.Activate, in).Get(ctx, &pos); err != nil {
		if cluster.IsLost(err) {
			return cluster.HandOverResult{}, false, nil
		}
		return cluster.HandOverResult{}, false, err
	}
	if w.DeadRole != roles.RoleRunner {
		return cluster.HandOverResult{Owner: m.Name}, true, nil
	}
	var h cluster.HandOverResult
	if err := workflow.ExecuteActivity(ctx, fa.HandOver, in, adopt).Get(ctx, &h); err != nil {
		if cluster.IsLost(err) {
			return h, false, nil
		}
		return h, false, err
	}
	return h, true, nil
}
