// Package workflows holds Baton's Temporal workflows, the six that Register
// registers: the per-instance Lifecycle (register, wait for members, elect,
// role loop); the role workflows Runner, PrimaryBackup, SecondaryBackup and
// Heartbeat, on the instance's own task queue (TaskQueue); and CrawlJob,
// one per crawl job on the group's job queue (JobQueue), which hands the
// job's frontier to idle Runners in batches and follows them to the end.
// Workflow code is deterministic: every wait, clock read and I/O happens in
// activities (the subpackages of package activities, one per capability);
// long waits are heartbeating activities driven by ZooKeeper watches, not
// workflow timer loops.
package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/batoncrawl/baton/activities/cluster"
	"github.com/batoncrawl/baton/activities/failover"
	"github.com/batoncrawl/baton/activities/heartbeat"
	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/activities/membership"
	"github.com/batoncrawl/baton/activities/runner"
	"github.com/batoncrawl/baton/activities/scale"
)

// Search attributes set on every Baton workflow, so the Web UI can filter
// by cluster, crawler and role.
var (
	AttrCluster = temporal.NewSearchAttributeKeyKeyword("BatonCluster")
	AttrCrawler = temporal.NewSearchAttributeKeyKeyword("BatonCrawler")
	AttrRole    = temporal.NewSearchAttributeKeyKeyword("BatonRole")
)

// SearchAttributeNames lists Baton's custom search attributes (all Keyword).
var SearchAttributeNames = []string{"BatonCluster", "BatonCrawler", "BatonRole", "BatonJob"}

// TaskQueue is the task queue of one instance: its activities and role
// workflows run in that instance's process.
func TaskQueue(group, name string) string { return fmt.Sprintf("baton.%s.%s", group, name) }

// LifecycleID is the readable workflow ID of an instance's life cycle.
func LifecycleID(group, name string) string { return fmt.Sprintf("baton/%s/%s", group, name) }

// InstanceMemo is the memo of an instance's workflows (its Lifecycle and
// role workflows), shown by the Web UI with the workflow.
func InstanceMemo(group, name, role string) map[string]any {
	return map[string]any{"cluster": group, "crawler": name, "role": role}
}

// childID names a role workflow of an instance.
// InstanceWorkflowIDs lists the workflows to close when an instance is
// gone for good: its Lifecycle (the role workflows are its children, which
// end with it) and its Heartbeat, which outlives Lifecycle runs.
func InstanceWorkflowIDs(group, name string) []string {
	return []string{LifecycleID(group, name), childID(group, name, "heartbeat")}
}

// RoleWorkflowIDs lists every workflow of an instance that runs
// activities on its own task queue: its Lifecycle, its Heartbeat and its
// role workflows.
func RoleWorkflowIDs(group, name string) []string {
	ids := InstanceWorkflowIDs(group, name)
	for _, role := range []string{"runner", "primary-backup", "secondary-backup"} {
		ids = append(ids, childID(group, name, role))
	}
	return ids
}

func childID(group, name, role string) string {
	return fmt.Sprintf("baton/%s/%s/%s", group, name, role)
}

// maxLoops bounds the iterations of a role loop before it continues as new.
const maxLoops = 200

// The activities of each capability (the subpackages of package
// activities), nil: used only for method expressions, whose method names
// are the activity types that Temporal runs and records.
var (
	ma *membership.Activities // Register, WaitMembers, Elect, Position
	ha *heartbeat.Activities  // BeatHeart
	fa *failover.Activities   // WatchRunners, WaitStandby, Discover, Activate, HandOver
	ra *runner.Activities     // WaitTask, RunTask
	sa *scale.Activities      // Promote
	ja *jobs.Activities       // the crawl jobs'
)

// shortOptions are for quick metadata steps. Failures of other types than
// NonRetryableErrorTypes are retried without limit, a corrupted znode
// included: an operator can repair it while the workflow waits.
func shortOptions(m cluster.Member) workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: 50 * time.Millisecond, BackoffCoefficient: 2, MaximumInterval: 2 * time.Second,
			NonRetryableErrorTypes: []string{cluster.ErrTypeFenced, cluster.ErrTypeLost, cluster.ErrTypeBadMember},
		},
	}
}

// localStartOptions are a new job's first JobAssign's, run as a local
// activity in the worker that runs the job's first workflow task (so
// that the job is stored and its first batch handed out without a round
// trip to Temporal's server first): the timeout and retries of
// shortOptions. Its worker killed, the workflow task times out (10 s, as
// the activity's StartToCloseTimeout) and another worker runs it again
// (JobAssign is idempotent: a retried call finds the batches handed
// out).
func localStartOptions(m cluster.Member) workflow.LocalActivityOptions {
	o := shortOptions(m)
	return workflow.LocalActivityOptions{StartToCloseTimeout: o.StartToCloseTimeout, RetryPolicy: o.RetryPolicy}
}

// longOptions are for long waits and task runs: they heartbeat, so a dead
// worker is noticed within the heartbeat timeout and the activity retried
// when the worker is back. The timeout is at least twice every interval
// the waits heartbeat at (WaitTask: check_task; WatchRunners:
// check_crawler_state; WaitStandby: check_standby_id), so a configured
// interval never makes a healthy wait time out.
func longOptions(m cluster.Member) workflow.ActivityOptions {
	o := shortOptions(m)
	o.StartToCloseTimeout = 7 * 24 * time.Hour
	t := m.Timers
	o.HeartbeatTimeout = max(2*time.Second, 4*t.UpdateTime, 2*t.CheckTask, 2*t.CheckCrawlerState, 2*t.CheckStandbyID)
	return o
}

// withLong returns ctx with long-running activity options.
func withLong(ctx workflow.Context, m cluster.Member) workflow.Context {
	return workflow.WithActivityOptions(ctx, longOptions(m))
}

// withShort returns ctx with short activity options.
func withShort(ctx workflow.Context, m cluster.Member) workflow.Context {
	return workflow.WithActivityOptions(ctx, shortOptions(m))
}
