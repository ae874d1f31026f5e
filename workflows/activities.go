package workflows

import (
	"github.com/batoncrawl/baton/activities/cluster"
	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/failover"
	"github.com/batoncrawl/baton/activities/heartbeat"
	"github.com/batoncrawl/baton/activities/membership"
	"github.com/batoncrawl/baton/activities/runner"
	"github.com/batoncrawl/baton/activities/scale"
)

// Activities are the cluster activities of one worker process — every
// capability's, over one set of dependencies — wired as the workflows
// expect them (membership finishes an interrupted claim through the same
// failover activities). The worker sets the capabilities' own fields
// (Failover.Closer, Runner.Options, ...) before it registers them; the
// crawl jobs' activities (jobs.Activities) are registered beside them.
type Activities struct {
	Membership *membership.Activities
	Heartbeat  *heartbeat.Activities
	Failover   *failover.Activities
	Runner     *runner.Activities
	Scale      *scale.Activities
}

// NewActivities wires every capability over d; the Runner fetches the
// requests of plain Tasks with fetcher.
func NewActivities(d *cluster.Deps, fetcher crawl.Fetcher) Activities {
	fo := &failover.Activities{Deps: d}
	return Activities{
		Membership: &membership.Activities{Deps: d, Failover: fo},
		Heartbeat:  &heartbeat.Activities{Deps: d},
		Failover:   fo,
		Runner:     &runner.Activities{Deps: d, Fetcher: fetcher},
		Scale:      &scale.Activities{Deps: d},
	}
}

// All lists them for registering: Temporal knows an activity by the name
// of its method.
func (a Activities) All() []any {
	return []any{a.Membership, a.Heartbeat, a.Failover, a.Runner, a.Scale}
}
