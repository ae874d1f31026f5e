// Package failover holds the activities by which the members of a group
// watch each other and take a dead one's place:
//
//   - WatchRunners (the Primary Backup and every Runner) and WaitStandby (a
//     Secondary Backup) read the heartbeats of the watcher's ring
//     successors and return a peer declared dead, or report it to whoever
//     can take it over;
//   - Discover, Activate and HandOver are the three steps of a fail-over:
//     claim the dead peer, take its place in the group, take its Task
//     (fenced by a higher epoch, in ZooKeeper and in the job store).
//
// It imports only the bottom layer (cluster) of activities/. Package
// membership, above it, finishes at registration the fail-overs that a
// member claimed and did not finish (with Activate and HandOver).
package failover

import (
	"context"

	"github.com/batoncrawl/baton/activities/cluster"
	"github.com/batoncrawl/baton/roles"
)

// Activities are the watching and fail-over ones: WatchRunners,
// WaitStandby, Discover, Activate and HandOver. Temporal registers them by
// method name.
type Activities struct {
	Deps *cluster.Deps
	// Closer closes a dead instance's Temporal workflows after its place
	// was taken; nil: they stay open (until the instance rejoins).
	Closer InstanceCloser
}

// InstanceCloser closes the Temporal workflows of an instance that was
// declared dead and replaced, or that left the cluster (its Lifecycle,
// role and Heartbeat workflows), so that a list of Running workflows shows
// live roles only. The worker implements it with its Temporal client.
// Implementations are safe for concurrent use; closing workflows that are
// closed already is not an error.
type InstanceCloser interface {
	CloseInstance(ctx context.Context, group, name, reason string) error
}

// watcherRole is the role of an instance watching its peers, or claiming a
// dead one before it is activated: a runner in All-are-Runner mode, else
// a backup runner.
func watcherRole(m cluster.Member) roles.Role {
	if m.AllAreRunners() {
		return roles.RoleRunner
	}
	return roles.RoleBackup
}

// claimBatch raises a crawl-job Task's batch epoch in the store to the
// Task's (a hand-over), when t belongs to a crawl job.
func (a *Activities) claimBatch(ctx context.Context, t roles.Task, holder string) error {
	if t.Job == nil || a.Deps.Batches == nil {
		return nil
	}
	return a.Deps.Batches.Claim(ctx, t.Job.ID, t.Job.Batch, holder, t.Epoch)
}
