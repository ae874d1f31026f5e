package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/batoncrawl/baton/activities/cluster"
	"github.com/batoncrawl/baton/roles"
)

// PrimaryBackup is the Primary Backup Runner role (the backup whose index
// is standby_id). Its WatchRunners watches its two ring successors, like
// every member, and takes the death reports other members write for the
// runners they watch. When a runner dies it discovers, activates and hands
// over (three activities) and ends with ReasonActivated: the instance is
// now a runner. When the group wants more runners than it has (a
// scale-up) it promotes itself (Promote) and ends with ReasonPromoted.
// When a backup it watches dies it removes it from the group and keeps
// watching. It ends with ReasonChanged if it stops being the standby.
func PrimaryBackup(ctx workflow.Context, m cluster.Member) (RoleResult, error) {
	lctx, sctx := withLong(ctx, m), withShort(ctx, m)
	var took []string
	for i := 0; i < maxLoops; i++ {
		var w cluster.WatchResult
		if err := workflow.ExecuteActivity(lctx, fa.WatchRunners, cluster.WatchInput{Member: m, Free: 1, As: roles.RoleBackup}).Get(ctx, &w); err != nil {
			return RoleResult{}, err
		}
		if w.Changed {
			return RoleResult{Reason: ReasonChanged, Role: w.Position.Role, TookOver: took}, nil
		}
		if w.Promote {
			if workflow.GetVersion(ctx, "scale-promote", workflow.DefaultVersion, 1) == 1 {
				var pos cluster.Position
				if err := workflow.ExecuteActivity(sctx, sa.Promote, m).Get(ctx, &pos); err != nil {
					return RoleResult{}, err
				}
				if pos.Role == roles.RoleRunner {
					return RoleResult{Reason: ReasonPromoted, Role: roles.RoleRunner, TookOver: took}, nil
				}
			}
			continue
		}
		h, claimed, err := failOver(sctx, m, w, false)
		if err != nil {
			return RoleResult{}, err
		}
		if claimed {
			took = append(took, w.Dead)
		}
		if claimed && h.Pending && h.Owner != "" && h.Owner != m.Name {
			// Taken over in place (our own Task was busy): run it here.
			if err := runInPlace(ctx, m, h.Owner); err != nil {
				return RoleResult{}, err
			}
		}
		if claimed && w.DeadRole == roles.RoleRunner {
			return RoleResult{Reason: ReasonActivated, Role: roles.RoleRunner, TookOver: took}, nil
		}
		if workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			break
		}
	}
	return RoleResult{}, workflow.NewContinueAsNewError(ctx, PrimaryBackup, m)
}

// SecondaryBackup is the Secondary Backup Runner role. It waits (a watch
// on its own membership entry) until it is the standby and then ends, so
// the Lifecycle runs it as the primary. Meanwhile it watches its two ring
// successors: a dead runner is reported to the standby, a dead backup (the
// primary included) it marks dead and removes from the group, which moves
// standby_id on, so backups are never left unwatched.
func SecondaryBackup(ctx workflow.Context, m cluster.Member) (RoleResult, error) {
	lctx, sctx := withLong(ctx, m), withShort(ctx, m)
	for i := 0; i < maxLoops; i++ {
		var w cluster.WatchResult
		if err := workflow.ExecuteActivity(lctx, fa.WaitStandby, m).Get(ctx, &w); err != nil {
			return RoleResult{}, err
		}
		if w.Changed {
			return RoleResult{Reason: ReasonChanged, Role: w.Position.Role}, nil
		}
		_, claimed, err := failOver(sctx, m, w, false)
		if err != nil {
			return RoleResult{}, err
		}
		if claimed {
			return RoleResult{Reason: ReasonChanged, Role: roles.RoleBackup, TookOver: []string{w.Dead}}, nil
		}
		if workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			break
		}
	}
	return RoleResult{}, workflow.NewContinueAsNewError(ctx, SecondaryBackup, m)
}

// runInPlace runs a Task taken over in the dead owner's znode. The version
// check keeps histories recorded before this step replayable.
func runInPlace(ctx workflow.Context, m cluster.Member, owner string) error {
	if workflow.GetVersion(ctx, "run-in-place", workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return nil
	}
	lctx := withLong(ctx, m)
	err := workflow.ExecuteActivity(lctx, ra.RunTask, cluster.RunTaskInput{Member: m, Owner: owner}).Get(ctx, nil)
	if cluster.IsFenced(err) {
		return nil // another holder took it; our own role is re-read by the life cycle
	}
	return err
}
