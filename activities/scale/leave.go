package scale

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/batoncrawl/baton/activities/cluster"
	"github.com/batoncrawl/baton/activities/metadata"
	"github.com/batoncrawl/baton/roles"
)

// A worker stopped with SIGTERM leaves its group in three steps, run by
// the worker itself (not as activities: its workflows are closed by then):
//
//  1. The Runner's Leaving (runner.Activities.Leaving) is set, so a
//     running crawl-job batch stops pulling URLs and ends with what it
//     holds; AwaitIdle waits for the member's Task to be no longer pending
//     (a plain Task is not waited for: it goes to a backup, as after a
//     crash).
//  2. The worker closes its own workflows and stops polling Temporal.
//  3. Leave removes the member from GroupState and deletes its znodes.
//
// A member whose Task is still pending when the worker must go (a plain
// Task, or a batch that did not drain within the grace period) does not
// leave: it stops as a crash would, with Apparent Death, and a backup
// takes its Task over.

// LeaveResult says whether a member left its group.
type LeaveResult struct {
	Left bool
	// Reason says why not, when Left is false.
	Reason string
}

// AwaitIdle waits until member m's own Task is not pending (or m has no
// Task, or was replaced), woken by a watch, while that Task is a crawl-job
// batch (it drains once the Runner's Leaving is set). It returns false when
// ctx ends first, and at once for a pending plain Task: its requests run in
// order and may take long, so it is handed over to a backup (the member
// stops as a crash would) rather than waited for.
func AwaitIdle(ctx context.Context, s metadata.Store, root string, m cluster.Member) bool {
	c := metadata.NewCluster(s, root, m.Group)
	for {
		data, _, ch, err := s.GetW(ctx, c.TaskPath(m.Name))
		if err != nil {
			return errors.Is(err, metadata.ErrNotFound)
		}
		t, err := roles.DecodeTask(data)
		if err != nil || !t.Pending() || t.Holder != "" && t.Holder != m.Name {
			return true
		}
		if t.Job == nil {
			return false
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}

// Leave takes member m out of its group: in one transaction it is removed
// from current_crawler and current_runner or current_backup (total_crawler
// and, for a backup, total_backup drop by one; standby_id moves on if it
// was the standby) and its NodeState, Task and Heartbeat znodes are
// deleted, so a restart registers it afresh (it joins as a new member).
// The transaction checks that the Task is not pending and unchanged, so a
// job batch assigned at the last moment is not lost: then m does not leave
// and a backup takes that Task over. Call it after m's workflows stopped.
func Leave(ctx context.Context, s metadata.Store, root string, m cluster.Member) (LeaveResult, error) {
	c := metadata.NewCluster(s, root, m.Group)
	node, nv, err := c.GetNode(ctx, m.Name)
	if errors.Is(err, metadata.ErrNotFound) {
		return LeaveResult{Reason: "not registered"}, nil
	}
	if err != nil {
		return LeaveResult{}, err
	}
	if node.Role.Dead() {
		return LeaveResult{Reason: fmt.Sprintf("declared dead already (taken over by %s)", node.TakenOverBy)}, nil
	}
	t, tv, err := c.GetTask(ctx, m.Name)
	if err != nil && !errors.Is(err, metadata.ErrNotFound) {
		return LeaveResult{}, err
	}
	if err == nil && t.Pending() && (t.Holder == "" || t.Holder == m.Name) {
		return LeaveResult{Reason: "its Task is pending: a backup takes it over when it finds the heartbeat stopped"}, nil
	}
	_, hv, herr := s.Get(ctx, c.HeartbeatPath(m.Name))
	_, err = c.UpdateGroupWith(ctx, func(g *roles.GroupState) ([]metadata.Op, error) {
		if !slices.Contains(g.CurrentCrawler, m.Name) {
			return nil, metadata.ErrNoChange
		}
		wasStandby := g.IsStandby(m.Name)
		g.CurrentCrawler = roles.Remove(g.CurrentCrawler, m.Name)
		g.TotalCrawler = max(0, g.TotalCrawler-1)
		if slices.Contains(g.CurrentBackup, m.Name) {
			g.CurrentBackup = roles.Remove(g.CurrentBackup, m.Name)
			g.TotalBackup = max(0, g.TotalBackup-1)
		}
		if slices.Contains(g.CurrentRunner, m.Name) {
			g.CurrentRunner = roles.Remove(g.CurrentRunner, m.Name)
			if g.AllAreRunners() {
				g.TotalRunner = max(0, g.TotalRunner-1)
			}
		}
		if wasStandby {
			g.StandbyID = g.NextStandby()
		}
		ops := []metadata.Op{{Kind: metadata.OpDelete, Path: c.NodePath(m.Name), Version: nv}}
		if err == nil {
			ops = append(ops, metadata.Op{Kind: metadata.OpDelete, Path: c.TaskPath(m.Name), Version: tv})
		}
		if herr == nil {
			ops = append(ops, metadata.Op{Kind: metadata.OpDelete, Path: c.HeartbeatPath(m.Name), Version: hv})
		}
		return ops, nil
	})
	if metadata.IsConflict(err) {
		return LeaveResult{Reason: "its NodeState or Task changed while it left (a Task assigned at the last moment): a backup takes it over"}, nil
	}
	if err != nil {
		return LeaveResult{}, fmt.Errorf("leave %s: %w", m.Name, err)
	}
	return LeaveResult{Left: true}, nil
}
