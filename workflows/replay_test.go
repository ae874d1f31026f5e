package workflows

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
)

// primaryBackupHistory is a history recorded on a real Temporal dev server
// (record_history_test.go): PrimaryBackup of crawler 2 taking over dead
// runner 1 and its processing Task. To regenerate it after an intended
// change of the workflow code:
//
//	go test -tags recordhistory -run TestRecordPrimaryBackupHistory ./workflows/
//
// (it needs the temporal CLI: $BATON_TEMPORAL_BIN, .stack/bin/temporal or
// temporal on $PATH). An unintended change that breaks replay of running
// workflows makes TestReplayPrimaryBackupHistory fail.
const primaryBackupHistory = "testdata/primary_backup_history.json"

// TestReplayPrimaryBackupHistory replays the recorded history with the
// current workflow code: a non-deterministic change fails it.
func TestReplayPrimaryBackupHistory(t *testing.T) {
	h := replay(t, primaryBackupHistory)
	// The history is the one described above.
	var scheduled []string
	var completed bool
	for _, e := range h.GetEvents() {
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
			assert.Equal(t, "PrimaryBackup", e.GetWorkflowExecutionStartedEventAttributes().GetWorkflowType().GetName())
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			scheduled = append(scheduled, e.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName())
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
			completed = true
		}
	}
	assert.Equal(t, failOverSteps, scheduled)
	assert.True(t, completed)
}

// crawlJobV1History is a CrawlJob recorded on a real Temporal dev server
// by the code before the job store and the shorter pickup path (commit
// 9428e5d: JobStart, JobAssign, JobAwait, JobAssign, completed), with
// stand-in activities under the real activity names.
const crawlJobV1History = "testdata/crawl_job_v1_history.json"

// TestReplayCrawlJobV1History replays a job started before pickup-v2 with
// the current code: the GetVersion guards keep it on its old path (a
// JobStart first, a JobAssign round before completing).
func TestReplayCrawlJobV1History(t *testing.T) {
	h := replay(t, crawlJobV1History)
	var scheduled []string
	for _, e := range h.GetEvents() {
		if a := e.GetActivityTaskScheduledEventAttributes(); a != nil {
			scheduled = append(scheduled, a.GetActivityType().GetName())
		}
	}
	assert.Equal(t, []string{"JobStart", "JobAssign", "JobAwait", "JobAssign"}, scheduled)
}

// replay replays the recorded history at path with the current workflow
// code (a non-deterministic change fails the test) and returns it.
func replay(t *testing.T, path string) *historypb.History {
	t.Helper()
	r := worker.NewWorkflowReplayer()
	Register(r)
	var logger log.Logger
	if !testing.Verbose() {
		logger = log.NewStructuredLogger(quietLogger())
	}
	require.NoError(t, r.ReplayWorkflowHistoryFromJSONFile(logger, path))
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	h, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
	require.NoError(t, err)
	return h
}
