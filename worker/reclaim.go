package worker

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"syscall"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/batoncrawl/baton/workflows"
)

// errPredecessorGone fails an activity attempt of a worker process that
// is gone: the activity is retried at once (its retry policy's first
// interval) instead of after its heartbeat timeout.
const errPredecessorGone = "PredecessorGone"

// reclaimActivities fails the activities of the instance's own workflows
// (Lifecycle, Heartbeat, role workflows) that a previous process of the
// instance started and that still count as running: after a crash they
// would be retried only once their heartbeat timeout (seconds) passes, so
// a restarted instance would neither beat its heart nor serve its role
// until then. Only attempts whose worker is provably gone are failed: the
// worker identity (pid@host@) names this host and either this process's
// own pid before its workers start (a container restarted with the same
// pid) or a pid no longer running. An attempt of a process on another
// host, or still running, is left to its heartbeat timeout. It must run
// before this process's Temporal workers start. It returns how many
// attempts it failed; errors are logged, never fatal.
//
// An instance whose Lifecycle Temporal does not know (a new instance, the
// common case of a cluster starting) has nothing to reclaim: its role
// workflows are the Lifecycle's children, closed with it, and its
// Heartbeat is started by it (a closed Lifecycle is known for the
// namespace's retention, far longer than any activity's heartbeat
// timeout). It is looked up first, and alone in that case.
func reclaimActivities(ctx context.Context, tc client.Client, ns, group, name string, log *slog.Logger) int {
	host, err := os.Hostname()
	if err != nil {
		return 0
	}
	n := 0
	lifecycle := workflows.LifecycleID(group, name)
	for _, id := range workflows.RoleWorkflowIDs(group, name) {
		d, err := tc.DescribeWorkflowExecution(ctx, id, "")
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			if id == lifecycle {
				return n
			}
			continue
		}
		if err != nil {
			log.Warn("could not look for a previous process's activities", "workflow_id", id, "err", err)
			continue
		}
		if d.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			continue
		}
		runID := d.GetWorkflowExecutionInfo().GetExecution().GetRunId()
		for _, pa := range d.GetPendingActivities() {
			if pa.GetState() != enumspb.PENDING_ACTIVITY_STATE_STARTED || !workerGone(pa.GetLastWorkerIdentity(), host) {
				continue
			}
			fail := temporal.NewApplicationError("the worker process running this attempt is gone ("+pa.GetLastWorkerIdentity()+"); its instance restarted", errPredecessorGone)
			if err := tc.CompleteActivityByID(ctx, ns, id, runID, pa.GetActivityId(), nil, fail); err != nil {
				log.Warn("could not fail a previous process's activity", "workflow_id", id, "activity", pa.GetActivityType().GetName(), "err", err)
				continue
			}
			log.Info("retrying at once an activity of this instance's previous process", "workflow_id", id,
				"activity", pa.GetActivityType().GetName(), "previous_worker", pa.GetLastWorkerIdentity())
			n++
		}
	}
	return n
}

// workerGone reports whether the worker of identity (the SDK's default,
// pid@host@) ran on this host in a process that is no longer running, or
// in this process's pid (a previous incarnation: this process has not
// started its workers yet).
func workerGone(identity, host string) bool {
	parts := strings.Split(identity, "@")
	if len(parts) < 2 || parts[1] != host {
		return false
	}
	pid, err := strconv.Atoi(parts[0])
	if err != nil || pid <= 0 {
		return false
	}
	if pid == os.Getpid() {
		return true
	}
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}
