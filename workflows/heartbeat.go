package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/batoncrawl/baton/activities/cluster"
)

// Heartbeat is the Heartbeat role: it runs the BeatHeart activity, which
// writes the instance's Heartbeat znode every update_time for as long as
// the worker lives. If the worker dies the activity's own Temporal
// heartbeat times out and it is retried when the worker is back; the
// history holds a handful of events however long it runs.
func Heartbeat(ctx workflow.Context, m cluster.Member) error {
	ctx = withLong(ctx, m)
	return workflow.ExecuteActivity(ctx, ha.BeatHeart, m).Get(ctx, nil)
}
