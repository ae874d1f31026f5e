package worker

import (
	"reflect"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	sdktest "go.temporal.io/sdk/testsuite"

	"github.com/batoncrawl/baton/activities/cluster"
	"github.com/batoncrawl/baton/activities/jobs"
)

// The worker registers the activities of every capability, under the
// names the workflows call them by (and the recorded histories hold):
// Temporal registers each exported method of a struct under its name, so
// the set of names is the set of exported methods, each once.
func TestWorkerRegistersEveryActivity(t *testing.T) {
	acts := activitySet(&cluster.Deps{}, nil, 0, nil, nil)
	var names []string
	for _, a := range acts {
		ty := reflect.TypeOf(a)
		for i := range ty.NumMethod() {
			names = append(names, ty.Method(i).Name)
		}
	}
	slices.Sort(names)
	assert.Equal(t, []string{
		"Activate", "BeatHeart", "Discover", "Elect", "HandOver", "Position", "Promote",
		"Register", "RunTask", "WaitMembers", "WaitStandby", "WaitTask", "WatchRunners",
	}, names)

	// Temporal takes them all, with the crawl jobs': every exported method
	// is a valid activity (a helper promoted into an Activities would not
	// be, and registering it panics).
	var s sdktest.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	assert.NotPanics(t, func() {
		for _, a := range acts {
			env.RegisterActivity(a)
		}
		env.RegisterActivity(&jobs.Activities{})
	})
}
