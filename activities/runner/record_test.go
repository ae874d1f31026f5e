package runner

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/metadata"
	"github.com/batoncrawl/baton/roles"
)

// A result that does not fit in the Task even alone is recorded as a
// failure that says so: the Task advances, nothing is retried.
func TestRecordFittedResultTooLargeAlone(t *testing.T) {
	tk := roles.EmptyTask()
	tk.RunningContent = []roles.Request{{TaskID: 7, URL: "http://a.test/", Header: map[string]string{"X-Big": strings.Repeat("h", 8<<10)}}}
	tk.RunningStatus = roles.TaskProcessing
	base := len(metadata.Encode(tk))
	limit := base + 300
	d := roles.ResultDetail{TaskID: 7, State: roles.TaskDone, StatusCode: 200, URL: "http://a.test/", Response: strings.Repeat("r", 5000)}
	next, ok, _ := recordFitted(tk, d, 0, limit)
	require.True(t, ok)
	assert.LessOrEqual(t, len(metadata.Encode(next)), limit)
	assert.Equal(t, roles.TaskDone, next.RunningStatus, "the Task advanced to its end")
	assert.Equal(t, roles.RunningResult{FailCount: 1}, next.RunningResult)
	require.Len(t, next.ResultDetail, 1)
	assert.Equal(t, roles.TaskError, next.ResultDetail[0].State)
	assert.Contains(t, next.ResultDetail[0].ErrorMsg, "result not recorded: the Task znode would be")
	assert.Empty(t, next.ResultDetail[0].Response)

	// Within the limit, a result is recorded as it is.
	next, ok, dropped := recordFitted(tk, roles.ResultDetail{TaskID: 7, State: roles.TaskDone, StatusCode: 200, Response: "ok"}, 0, limit)
	require.True(t, ok)
	assert.Zero(t, dropped)
	assert.Equal(t, "ok", next.ResultDetail[0].Response)
	assert.Equal(t, roles.RunningResult{SuccessCount: 1}, next.RunningResult)
}
