package workflows

import (
	"testing"

	"github.com/stretchr/testify/assert"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
)

// crawlJobControlHistory is a CrawlJob of control-v1 recorded on a real
// Temporal dev server (record_job_history_test.go) before local-start (its
// first JobAssign an activity): paused with a batch in flight, resumed,
// then cancelled with Temporal's cancellation.
const crawlJobControlHistory = "testdata/crawl_job_control_history.json"

// crawlJobLocalStartHistory is the same job recorded with local-start: its
// first JobAssign a local activity.
const crawlJobLocalStartHistory = "testdata/crawl_job_local_start_history.json"

// TestReplayCrawlJobControlHistory replays it with the current code: a
// change of CrawlJob's command sequence that is not behind a
// workflow.GetVersion fails it.
func TestReplayCrawlJobControlHistory(t *testing.T) {
	assertControlHistory(t, replay(t, crawlJobControlHistory))
}

// TestReplayCrawlJobLocalStartHistory replays the recording with
// local-start: its first JobAssign is a local activity's marker, the next
// ones activities.
func TestReplayCrawlJobLocalStartHistory(t *testing.T) {
	h := replay(t, crawlJobLocalStartHistory)
	assertControlHistory(t, h)
	markers, assigns := 0, 0
	for _, e := range h.GetEvents() {
		if a := e.GetMarkerRecordedEventAttributes(); a != nil && a.GetMarkerName() == "LocalActivity" {
			markers++
		}
		if a := e.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == "JobAssign" {
			assigns++
		}
	}
	assert.Equal(t, 1, markers, "the first JobAssign, local")
	assert.Positive(t, assigns, "the next JobAssigns are activities")
}

// assertControlHistory checks a recorded CrawlJob: paused, resumed, then
// cancelled with Temporal's cancellation.
func assertControlHistory(t *testing.T, h *historypb.History) {
	t.Helper()
	var scheduled []string
	canceled, cancelRequested := false, false
	for _, e := range h.GetEvents() {
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			scheduled = append(scheduled, e.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName())
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED:
			cancelRequested = true
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED:
			canceled = true
		}
	}
	var controls int
	for _, s := range scheduled {
		if s == "JobControl" {
			controls++
		}
	}
	assert.Equal(t, 3, controls, "paused, running, cancelled: %v", scheduled)
	assert.Contains(t, scheduled, "JobDrain")
	assert.True(t, cancelRequested, "cancelled with Temporal's cancellation")
	assert.True(t, canceled, "it ended Canceled")
}
