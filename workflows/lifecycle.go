package workflows

import (
	"errors"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/batoncrawl/baton/activities/cluster"
	"github.com/batoncrawl/baton/roles"
)

// LifecycleInput is the input of an instance's Lifecycle.
type LifecycleInput struct {
	Member cluster.Member `json:"member"`
	// Registered is set when the Lifecycle continues as new: registration
	// and election are done.
	Registered bool `json:"registered"`
	// Dispatches counts role dispatches over all runs, for the Web UI.
	Dispatches int `json:"dispatches"`
}

// Query names.
const (
	// QueryPosition returns the instance's current Position.
	QueryPosition = "position"
)

// Lifecycle is one instance's life: register (1), wait for all members
// (2), elect (3, 4) and then dispatch by role in a loop (5): runner →
// Runner, standby backup → PrimaryBackup, other backups → SecondaryBackup,
// each a child workflow; a dead role → rejoin as a backup. The Heartbeat
// role runs beside it as its own workflow. The loop continues as new to
// keep the history bounded.
func Lifecycle(ctx workflow.Context, in LifecycleInput) error {
	m := in.Member
	step := newSteps(ctx, m)
	log := workflow.GetLogger(ctx)
	pos := cluster.Position{Role: roles.RoleInitial}
	if err := workflow.SetQueryHandler(ctx, QueryPosition, func() (cluster.Position, error) { return pos, nil }); err != nil {
		return err
	}
	if !in.Registered {
		var reg cluster.RegisterResult
		if err := step(ma.Register, &reg); err != nil {
			return err
		}
		pos.Role = reg.Role
	}
	if err := startHeartbeat(ctx, m); err != nil {
		return err
	}
	failures := 0
	for i := 0; i < maxLoops/4; i++ {
		pos = cluster.Position{} // decode afresh: omitted fields must not keep old values
		if err := step(ma.Position, &pos); err != nil {
			return err
		}
		_ = workflow.UpsertTypedSearchAttributes(ctx, AttrRole.ValueSet(string(pos.Role)))
		var res RoleResult
		var err error
		switch {
		case pos.Missing:
			var reg cluster.RegisterResult
			err = step(ma.Register, &reg)
		case pos.Role == roles.RoleInitial:
			lctx := withLong(ctx, m)
			if err = workflow.ExecuteActivity(lctx, ma.WaitMembers, m).Get(ctx, nil); err == nil {
				err = step(ma.Elect, nil)
			}
		case pos.Role == roles.RoleRunner:
			res, err = runChild(ctx, m, "runner", Runner)
		case pos.Role == roles.RoleBackup && pos.Standby:
			res, err = runChild(ctx, m, "primary-backup", PrimaryBackup)
		case pos.Role == roles.RoleBackup:
			res, err = runChild(ctx, m, "secondary-backup", SecondaryBackup)
		case pos.Role.Dead():
			log.Warn("this instance was declared dead; rejoining", "role", pos.Role)
			var reg cluster.RegisterResult
			err = step(ma.Register, &reg)
		}
		if err != nil {
			// A failed role is not the end of the instance: report it and
			// dispatch again after a growing pause (the heartbeat goes on, so
			// the instance must keep serving its role).
			failures++
			backoff := min(time.Duration(failures)*time.Second, 30*time.Second)
			log.Error("role failed; dispatching again", "role", pos.Role, "error", err, "retry_in", backoff)
			if err := workflow.Sleep(ctx, backoff); err != nil {
				return err
			}
			continue
		}
		failures = 0
		in.Dispatches++
		if res.Reason != "" {
			log.Info("role ended", "role", pos.Role, "reason", res.Reason, "took_over", res.TookOver)
		}
		if workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			break
		}
	}
	in.Registered = true
	return workflow.NewContinueAsNewError(ctx, Lifecycle, in)
}

// localStepsVersion marks the Lifecycles whose short steps (Register,
// Position, Elect) run as local activities: in the workflow task that
// needs them, in the instance's own process, without a round trip through
// Temporal's server (an activity task, its events and one more workflow
// task each). A group of many instances forming at once, or a backup
// taking over, waits for the server less. Histories without the marker
// replay them as activities.
const localStepsVersion = "lifecycle-local-steps"

// newSteps returns how the Lifecycle runs one short step for m: the
// activity fn (a method expression of ma) with m, its result into out
// (nil: none).
func newSteps(ctx workflow.Context, m cluster.Member) func(fn any, out any) error {
	if workflow.GetVersion(ctx, localStepsVersion, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		sctx := withShort(ctx, m)
		return func(fn any, out any) error { return workflow.ExecuteActivity(sctx, fn, m).Get(ctx, out) }
	}
	lctx := workflow.WithLocalActivityOptions(ctx, localStartOptions(m))
	return func(fn any, out any) error { return workflow.ExecuteLocalActivity(lctx, fn, m).Get(ctx, out) }
}

// runChild runs a role workflow as a child with a readable ID and the
// instance's search attributes.
func runChild(ctx workflow.Context, m cluster.Member, role string, wf any) (RoleResult, error) {
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:            childID(m.Group, m.Name, role),
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_TERMINATE,
		TypedSearchAttributes: temporal.NewSearchAttributes(
			AttrCluster.ValueSet(m.Group), AttrCrawler.ValueSet(m.Name), AttrRole.ValueSet(role)),
		Memo: InstanceMemo(m.Group, m.Name, role),
	})
	var res RoleResult
	err := workflow.ExecuteChildWorkflow(cctx, wf, m).Get(ctx, &res)
	return res, err
}

// startHeartbeat starts the Heartbeat workflow unless it already runs; it
// outlives Lifecycle runs (continue-as-new) on purpose.
func startHeartbeat(ctx workflow.Context, m cluster.Member) error {
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:            childID(m.Group, m.Name, "heartbeat"),
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_ABANDON,
		TypedSearchAttributes: temporal.NewSearchAttributes(
			AttrCluster.ValueSet(m.Group), AttrCrawler.ValueSet(m.Name), AttrRole.ValueSet("heartbeat")),
		Memo: InstanceMemo(m.Group, m.Name, "heartbeat"),
	})
	f := workflow.ExecuteChildWorkflow(cctx, Heartbeat, m)
	err := f.GetChildWorkflowExecution().Get(ctx, nil)
	var already *temporal.ChildWorkflowExecutionAlreadyStartedError
	if errors.As(err, &already) {
		return nil
	}
	return err
}
