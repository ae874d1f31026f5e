package roles

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// requireFieldError asserts that err is a *FieldError for obj.field that
// wraps ErrInvalid and names both in its message.
func requireFieldError(t *testing.T, err error, obj, field string) *FieldError {
	t.Helper()
	require.Error(t, err)
	var fe *FieldError
	require.True(t, errors.As(err, &fe), "error %q (%T) is not a *FieldError", err, err)
	assert.Equal(t, obj, fe.Object, "object of %q", err)
	assert.Equal(t, field, fe.Field, "field of %q", err)
	assert.ErrorIs(t, err, ErrInvalid)
	assert.Contains(t, err.Error(), obj+"."+field)
	assert.NotEmpty(t, fe.Msg)
	return fe
}

const validHeartbeat = `{"heart_rhythm_time":"2024-05-01T10:00:00.123456Z","time_format":"2006-01-02T15:04:05.000000Z07:00",
"update_time":"0.5s","update_timeout":"2s","heart_rhythm_timeout":"3","healthy_state":"Healthy","task_state":"processing"}`

func TestDecodeValidDocuments(t *testing.T) {
	g, err := DecodeGroupState([]byte(`{"total_crawler":3,"total_runner":2,"total_backup":1,"standby_id":"3",
		"current_crawler":["sc-crawler_1","sc-crawler_2","sc-crawler_3"],"current_runner":["sc-crawler_1","sc-crawler_2"],
		"current_backup":["sc-crawler_3"],"fail_crawler":[],"fail_runner":[],"fail_backup":[]}`))
	require.NoError(t, err)
	assert.Equal(t, 3, g.TotalCrawler)
	assert.Equal(t, "3", g.StandbyID)
	assert.Equal(t, []string{"sc-crawler_1", "sc-crawler_2"}, g.CurrentRunner)

	n, err := DecodeNodeState([]byte(`{"group":"sc-crawler-cluster","role":"dead-runner","taken_over_by":"sc-crawler_3"}`))
	require.NoError(t, err)
	assert.Equal(t, NodeState{Group: "sc-crawler-cluster", Role: RoleDeadRunner, TakenOverBy: "sc-crawler_3"}, n)

	tk, err := DecodeTask([]byte(`{"running_content":[{"task_id":1,"url":"http://x/a","method":"GET"}],
		"cookie":{},"authorization":{},"in_progressing_id":"1","running_result":{"success_count":0,"fail_count":0},
		"running_status":"processing","result_detail":[]}`))
	require.NoError(t, err)
	assert.Equal(t, TaskProcessing, tk.RunningStatus)
	assert.True(t, tk.Pending())

	h, err := DecodeHeartbeat([]byte(validHeartbeat))
	require.NoError(t, err)
	assert.Equal(t, HeartHealthy, h.HealthyState)
	d, err := h.Timeout()
	require.NoError(t, err)
	assert.Equal(t, "2s", d.String())
}

func TestDecodeGroupStateCorrupted(t *testing.T) {
	tests := []struct {
		name, doc, field string
	}{
		{"empty", ``, "(document)"},
		{"malformed", `{"total_crawler":3,`, "(document)"},
		{"not json", `total_crawler=3`, "(document)"},
		{"top-level array", `[]`, "(document)"},
		{"top-level string", `"state"`, "(document)"},
		{"total_crawler string", `{"total_crawler":"3"}`, "total_crawler"},
		{"total_runner float", `{"total_runner":1.5}`, "total_runner"},
		{"total_backup bool", `{"total_backup":true}`, "total_backup"},
		{"standby_id number", `{"standby_id":3}`, "standby_id"},
		{"current_crawler string", `{"current_crawler":"sc-crawler_1"}`, "current_crawler"},
		{"current_runner numbers", `{"current_runner":[1,2]}`, "current_runner"},
		{"fail_backup object", `{"fail_backup":{}}`, "fail_backup"},
		{"negative total", `{"total_crawler":-1}`, "total_crawler"},
		{"negative runner", `{"total_runner":-2}`, "total_runner"},
		{"negative backup", `{"total_backup":-3}`, "total_backup"},
		{"bad name", `{"current_crawler":["sc-crawler_1","nobody"]}`, "current_crawler"},
		{"duplicate runner", `{"current_runner":["sc-crawler_1","sc-crawler_1"]}`, "current_runner"},
		{"bad standby", `{"standby_id":"three"}`, "standby_id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeGroupState([]byte(tt.doc))
			requireFieldError(t, err, "GroupState", tt.field)
		})
	}
}

func TestDecodeNodeStateCorrupted(t *testing.T) {
	tests := []struct {
		name, doc, field string
	}{
		{"empty", ``, "(document)"},
		{"malformed", `{"group":"g","role":`, "(document)"},
		{"top-level array", `["g","runner"]`, "(document)"},
		{"null", `null`, "(document)"},
		{"role number", `{"group":"g","role":1}`, "role"},
		{"group number", `{"group":7,"role":"runner"}`, "group"},
		{"unknown role", `{"group":"g","role":"king"}`, "role"},
		{"role wrong case", `{"group":"g","role":"Runner"}`, "role"},
		{"role underscore", `{"group":"g","role":"backup_runner"}`, "role"},
		{"missing role", `{"group":"g"}`, "role"},
		{"missing group", `{"role":"runner"}`, "group"},
		{"taken_over_by list", `{"group":"g","role":"dead-runner","taken_over_by":["a"]}`, "taken_over_by"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeNodeState([]byte(tt.doc))
			fe := requireFieldError(t, err, "NodeState", tt.field)
			if tt.name == "unknown role" {
				assert.Contains(t, fe.Msg, `"king"`, "the message quotes the unknown value")
			}
		})
	}
}

func TestDecodeTaskCorrupted(t *testing.T) {
	tests := []struct {
		name, doc, field string
	}{
		{"empty", ``, "(document)"},
		{"malformed", `{"running_content":[`, "(document)"},
		{"top-level number", `42`, "(document)"},
		{"running_content object", `{"running_content":{},"running_status":"nothing"}`, "running_content"},
		{"request url number", `{"running_content":[{"task_id":1,"url":5}],"running_status":"nothing"}`, "running_content.url"},
		{"request task_id string", `{"running_content":[{"task_id":"1","url":"http://x"}],"running_status":"nothing"}`, "running_content.task_id"},
		{"request header values", `{"running_content":[{"task_id":1,"url":"http://x","header":{"a":1}}],"running_status":"nothing"}`, "running_content.header"},
		{"cookie list", `{"cookie":["a"],"running_status":"nothing"}`, "cookie"},
		{"authorization values", `{"authorization":{"basic":1},"running_status":"nothing"}`, "authorization"},
		{"in_progressing_id number", `{"in_progressing_id":1,"running_status":"nothing"}`, "in_progressing_id"},
		{"success_count string", `{"running_result":{"success_count":"1","fail_count":0},"running_status":"done"}`, "running_result.success_count"},
		{"fail_count float", `{"running_result":{"success_count":1,"fail_count":0.5},"running_status":"done"}`, "running_result.fail_count"},
		{"result_detail status_code string", `{"result_detail":[{"task_id":1,"status_code":"200"}],"running_status":"done"}`, "result_detail.status_code"},
		{"running_status number", `{"running_status":1}`, "running_status"},
		{"unknown running_status", `{"running_status":"running"}`, "running_status"},
		{"missing running_status", `{"running_content":[]}`, "running_status"},
		{"next_index beyond content", `{"running_content":[{"task_id":1,"url":"http://x"}],"running_status":"processing","next_index":2}`, "next_index"},
		{"negative next_index", `{"running_status":"nothing","next_index":-1}`, "next_index"},
		{"negative epoch", `{"running_status":"nothing","epoch":-1}`, "epoch"},
		{"duplicate task_id", `{"running_content":[{"task_id":1,"url":"http://x"},{"task_id":1,"url":"http://y"}],"running_status":"nothing"}`, "running_content[1].task_id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeTask([]byte(tt.doc))
			requireFieldError(t, err, "Task", tt.field)
		})
	}
}

func TestDecodeHeartbeatCorrupted(t *testing.T) {
	with := func(field, raw string) string {
		// validHeartbeat with one field's raw JSON value replaced
		m := map[string]string{
			"heart_rhythm_time": `"2024-05-01T10:00:00.123456Z"`, "time_format": `"2006-01-02T15:04:05.000000Z07:00"`,
			"update_time": `"0.5s"`, "update_timeout": `"2s"`, "heart_rhythm_timeout": `"3"`,
			"healthy_state": `"Healthy"`, "task_state": `"processing"`,
		}
		m[field] = raw
		s := "{"
		first := true
		for _, k := range []string{"heart_rhythm_time", "time_format", "update_time", "update_timeout", "heart_rhythm_timeout", "healthy_state", "task_state"} {
			if !first {
				s += ","
			}
			first = false
			s += `"` + k + `":` + m[k]
		}
		return s + "}"
	}
	tests := []struct {
		name, doc, field string
	}{
		{"empty", ``, "(document)"},
		{"malformed", `{"heart_rhythm_time":`, "(document)"},
		{"top-level array", `[1]`, "(document)"},
		{"time number", with("heart_rhythm_time", `1714557600`), "heart_rhythm_time"},
		{"time not matching format", with("heart_rhythm_time", `"yesterday"`), "heart_rhythm_time"},
		{"time in reference format", with("heart_rhythm_time", `"2024-05-01 10:00:00"`), "heart_rhythm_time"},
		{"update_timeout not a duration", with("update_timeout", `"two seconds"`), "update_timeout"},
		{"update_timeout zero", with("update_timeout", `"0s"`), "update_timeout"},
		{"update_timeout number", with("update_timeout", `2`), "update_timeout"},
		{"update_time not a duration", with("update_time", `"often"`), "update_time"},
		{"heart_rhythm_timeout not a count", with("heart_rhythm_timeout", `"three"`), "heart_rhythm_timeout"},
		{"heart_rhythm_timeout zero", with("heart_rhythm_timeout", `"0"`), "heart_rhythm_timeout"},
		{"heart_rhythm_timeout number", with("heart_rhythm_timeout", `3`), "heart_rhythm_timeout"},
		{"unknown healthy_state", with("healthy_state", `"Dead"`), "healthy_state"},
		{"healthy_state wrong case", with("healthy_state", `"apparent death"`), "healthy_state"},
		{"healthy_state number", with("healthy_state", `1`), "healthy_state"},
		{"unknown task_state", with("task_state", `"running"`), "task_state"},
	}
	require.NotPanics(t, func() {
		_, err := DecodeHeartbeat([]byte(with("task_state", `"done"`)))
		require.NoError(t, err, "the helper builds a valid heartbeat")
	})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeHeartbeat([]byte(tt.doc))
			requireFieldError(t, err, "Heartbeat", tt.field)
		})
	}
}

func TestHeartbeatAgeAndTimeFormat(t *testing.T) {
	h, err := DecodeHeartbeat([]byte(validHeartbeat))
	require.NoError(t, err)
	rt, err := h.RhythmTime()
	require.NoError(t, err)
	age, err := h.Age(rt.Add(1500 * 1e6))
	require.NoError(t, err)
	assert.Equal(t, "1.5s", age.String())
	age, err = h.Age(rt.Add(-5 * 1e9))
	require.NoError(t, err)
	assert.Zero(t, age, "a heartbeat from the future is not negative-aged")

	// An empty time_format means Baton's layout.
	h.TimeFormat = ""
	_, err = h.RhythmTime()
	require.NoError(t, err)
	// Another layout is honoured.
	h.TimeFormat, h.HeartRhythmTime = "2006-01-02 15:04:05", "2024-05-01 10:00:00"
	rt2, err := h.RhythmTime()
	require.NoError(t, err)
	assert.Equal(t, 10, rt2.Hour())
	h.HeartRhythmTime = "garbage"
	_, err = h.Age(rt2)
	requireFieldError(t, err, "Heartbeat", "heart_rhythm_time")
}
