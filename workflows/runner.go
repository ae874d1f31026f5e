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
	f := newRunnerFlow(ctx, m)
	for {
		if f.result != nil || f.fatal != nil {
			f.stopping = true
		}
		if f.stopping {
			if f.waiting {
				f.cancelWait()
			}
			if f.watching {
				f.cancelWatch()
			}
		} else {
			f.schedule()
		}
		if f.stopping && !f.waiting && !f.watching && (f.active == 0 || f.result != nil || f.fatal != nil) {
			break
		}
		f.sel.Select(ctx)
		f.loops++
		if f.loops >= maxLoops || workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			f.stopping = true
		}
	}
	if f.fatal != nil {
		return RoleResult{}, f.fatal
	}
	if f.result != nil {
		return *f.result, nil
	}
	return RoleResult{}, workflow.NewContinueAsNewError(ctx, Runner, m)
}

// runnerFlow is one run of the Runner workflow: its Tasks running, its
// WaitTask and WatchRunners activities, and why it ends.
type runnerFlow struct {
	ctx, lctx, sctx workflow.Context
	m               cluster.Member
	capacity        int
	// ringWatch: every runner watches its ring successors, with backups
	// too, and keeps watching at capacity ("ring-watch").
	ringWatch, watches bool
	watchFree          int // Free of the running watch
	sel                workflow.Selector

	active, loops                int
	waiting, watching, ownActive bool
	stopping                     bool
	cancelWait, cancelWatch      workflow.CancelFunc
	result                       *RoleResult
	fatal                        error
	tookOver                     []string
}

func newRunnerFlow(ctx workflow.Context, m cluster.Member) *runnerFlow {
	f := &runnerFlow{ctx: ctx, lctx: withLong(ctx, m), sctx: withShort(ctx, m), m: m, capacity: 1}
	if m.AllAreRunners() {
		f.capacity = max(1, m.Capacity)
	}
	// Since "ring-watch", every runner watches its ring successors, with
	// backups too (it reports a dead runner to the standby and removes a
	// dead backup itself), and keeps watching at capacity (it then reports
	// dead peers instead of taking them over). Before, only All-are-Runner
	// runners watched, and stopped at capacity.
	f.ringWatch = workflow.GetVersion(ctx, "ring-watch", workflow.DefaultVersion, 1) == 1
	f.watches = f.ringWatch || m.AllAreRunners()
	f.sel = workflow.NewSelector(ctx)
	return f
}

// schedule starts the wait for the own Task and the watch of the ring as
// the room the runner has allows.
func (f *runnerFlow) schedule() {
	if !f.waiting && !f.ownActive && f.active < f.capacity {
		f.startWait() // at capacity even the own Task waits (avalanche guard)
	}
	switch {
	case !f.watches:
	case !f.ringWatch && !f.watching && f.active < f.capacity:
		f.startWatch()
	case !f.ringWatch && f.watching && f.active >= f.capacity:
		f.cancelWatch() // no room: let a survivor with room take the next dead peer
	case f.ringWatch && !f.watching:
		f.startWatch()
	case f.ringWatch && f.m.AllAreRunners() && (f.watchFree > 0) != (f.active < f.capacity):
		// Room came or went: watch again with the new Free (at capacity it
		// reports dead peers for a survivor with room).
		f.cancelWatch()
	}
}

func (f *runnerFlow) done(r RoleResult) {
	if f.result == nil {
		r.TookOver = f.tookOver
		f.result = &r
	}
}

// startRun runs owner's Task (RunTask).
func (f *runnerFlow) startRun(owner string) {
	f.active++
	if owner == f.m.Name {
		f.ownActive = true
	}
	fut := workflow.ExecuteActivity(f.lctx, ra.RunTask, cluster.RunTaskInput{Member: f.m, Owner: owner})
	f.sel.AddFuture(fut, func(fut workflow.Future) {
		f.active--
		if owner == f.m.Name {
			f.ownActive = false
		}
		var r cluster.RunTaskResult
		err := fut.Get(f.ctx, &r)
		switch {
		case cluster.IsFenced(err) && owner == f.m.Name:
			f.done(RoleResult{Reason: ReasonFenced})
		case cluster.IsFenced(err):
			workflow.GetLogger(f.ctx).Warn("adopted task fenced", "owner", owner, "error", err)
		case err != nil:
			f.fatal = err
		}
	})
}

// startCancellable runs act(in) under a context that *cancel ends, with
// *running true until it answers; its result goes into out and handle
// runs, unless it was cancelled or failed (fatal).
func (f *runnerFlow) startCancellable(act, in any, running *bool, cancel *workflow.CancelFunc, out any, handle func()) {
	wctx, c := workflow.WithCancel(f.lctx)
	*cancel, *running = c, true
	fut := workflow.ExecuteActivity(wctx, act, in)
	f.sel.AddFuture(fut, func(fut workflow.Future) {
		*running = false
		err := fut.Get(f.ctx, out)
		var ce *temporal.CanceledError
		switch {
		case errors.As(err, &ce):
		case err != nil:
			f.fatal = err
		default:
			handle()
		}
	})
}

// startWait waits for the runner's own Task (WaitTask).
func (f *runnerFlow) startWait() {
	var w cluster.WaitTaskResult
	f.startCancellable(ra.WaitTask, f.m, &f.waiting, &f.cancelWait, &w, func() {
		switch {
		case w.Fenced:
			f.done(RoleResult{Reason: ReasonFenced, Role: w.Role})
		case w.Pending:
			f.startRun(f.m.Name)
		}
	})
}

// startWatch watches the runner's ring successors (WatchRunners).
func (f *runnerFlow) startWatch() {
	f.watchFree = 0
	if f.m.AllAreRunners() {
		f.watchFree = max(0, f.capacity-f.active)
	}
	var w cluster.WatchResult
	f.startCancellable(fa.WatchRunners, cluster.WatchInput{Member: f.m, Free: f.watchFree}, &f.watching, &f.cancelWatch, &w, func() {
		f.onWatched(w)
	})
}

// onWatched acts on what WatchRunners saw: the runner's own position
// changed, or a peer died.
func (f *runnerFlow) onWatched(w cluster.WatchResult) {
	switch {
	case w.Changed && f.ringWatch && w.Position.Role.Dead():
		// Marked dead: the same end as when WaitTask sees it first.
		f.done(RoleResult{Reason: ReasonFenced, Role: w.Position.Role})
	case w.Changed:
		f.done(RoleResult{Reason: ReasonChanged, Role: w.Position.Role})
	case w.Dead != "" && (f.active < f.capacity || (f.ringWatch && w.DeadRole != roles.RoleRunner)):
		// A dead backup has no Task: removing it takes no room.
		h, claimed, err := failOver(f.sctx, f.m, w, true)
		if err != nil {
			f.fatal = err
			return
		}
		if claimed {
			f.tookOver = append(f.tookOver, w.Dead)
		}
		if claimed && h.Pending {
			f.startRun(h.Owner)
		}
		for _, owner := range h.Also {
			if claimed {
				f.startRun(owner)
			}
		}
	}
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
