package roles

import (
	"encoding/json"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// keys marshals v and returns the keys of the resulting JSON object.
func keys(t *testing.T, v any) []string {
	t.Helper()
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(mustJSON(t, v), &m))
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func sorted(s ...string) []string {
	sort.Strings(s)
	return s
}

func TestJSONFieldNamesGroupState(t *testing.T) {
	assert.Equal(t, sorted("total_crawler", "total_runner", "total_backup", "standby_id",
		"current_crawler", "current_runner", "current_backup", "fail_crawler", "fail_runner", "fail_backup", "all_runner"),
		keys(t, NewGroupState(2, 1)), "GroupState has the reference's fields and Baton's mode")
	assert.JSONEq(t, `{"total_crawler":3,"total_runner":2,"total_backup":1,"standby_id":"",
		"current_crawler":[],"current_runner":[],"current_backup":[],"fail_crawler":[],"fail_runner":[],"fail_backup":[],
		"all_runner":false}`,
		string(mustJSON(t, NewGroupState(2, 1))))
	// Baton's other addition appears only when set.
	g := NewGroupState(2, 1)
	g.MinBackup = 1
	assert.Contains(t, keys(t, g), "min_backup")
	// A GroupState of an older Baton (no all_runner) reads its mode from
	// the totals, as the reference does.
	old, err := DecodeGroupState([]byte(`{"total_crawler":3,"total_runner":3,"total_backup":0,"standby_id":"",
		"current_crawler":[],"current_runner":[],"current_backup":[],"fail_crawler":[],"fail_runner":[],"fail_backup":[]}`))
	require.NoError(t, err)
	assert.True(t, old.AllAreRunners())
}

func TestJSONFieldNamesNodeState(t *testing.T) {
	assert.Equal(t, sorted("group", "role"), keys(t, NodeState{Group: DefaultGroup, Role: RoleRunner}))
	assert.JSONEq(t, `{"group":"sc-crawler-cluster","role":"runner"}`,
		string(mustJSON(t, NodeState{Group: DefaultGroup, Role: RoleRunner})))
	// Baton's addition appears only when set.
	assert.Equal(t, sorted("group", "role", "taken_over_by"),
		keys(t, NodeState{Group: "g", Role: RoleDeadRunner, TakenOverBy: "g_3"}))
}

func TestJSONFieldNamesTask(t *testing.T) {
	tk := EmptyTask()
	tk.RunningContent = []Request{{TaskID: 1, URL: "http://x/", Method: "POST",
		Parameters: map[string]string{"q": "1"}, Header: map[string]string{"X-A": "b"}, Body: json.RawMessage(`{"k":"v"}`)}}
	tk.ResultDetail = []ResultDetail{{TaskID: 1, State: TaskDone, StatusCode: 200, Response: "ok", ErrorMsg: ""}}
	got := keys(t, tk)
	reference := []string{"running_content", "cookie", "authorization", "in_progressing_id", "running_result", "running_status", "result_detail"}
	assert.Subset(t, got, reference)
	assert.Equal(t, sorted(append(reference, "epoch", "next_index")...), got, "reference fields plus Baton's epoch and next_index")

	var m struct {
		RunningContent []map[string]json.RawMessage `json:"running_content"`
		RunningResult  map[string]json.RawMessage   `json:"running_result"`
		ResultDetail   []map[string]json.RawMessage `json:"result_detail"`
	}
	require.NoError(t, json.Unmarshal(mustJSON(t, tk), &m))
	assert.Equal(t, sorted("task_id", "url", "method", "parameters", "header", "body"), mapKeys(m.RunningContent[0]),
		"a request is {task_id, url, method, parameters, header, body}")
	assert.Equal(t, sorted("success_count", "fail_count"), mapKeys(m.RunningResult))
	assert.Subset(t, mapKeys(m.ResultDetail[0]), []string{"task_id", "state", "status_code", "response", "error_msg"})
	assert.Equal(t, `"done"`, string(m.ResultDetail[0]["state"]))
	assert.Equal(t, `{"k":"v"}`, string(m.RunningContent[0]["body"]), "a JSON body is kept as JSON")

	// Request round trip.
	var back Task
	require.NoError(t, json.Unmarshal(mustJSON(t, tk), &back))
	assert.Equal(t, tk.RunningContent, back.RunningContent)

	// Baton's holder and handed_over_from appear when set.
	tk.Holder, tk.HandedOverFrom = "a_1", "a_2"
	assert.Subset(t, keys(t, tk), []string{"holder", "handed_over_from"})
}

func TestJSONFieldNamesHeartbeat(t *testing.T) {
	assert.Equal(t, sorted("heart_rhythm_time", "time_format", "update_time", "update_timeout",
		"heart_rhythm_timeout", "healthy_state", "task_state"), keys(t, Heartbeat{}))
}

func TestJSONDecodesReferenceDocuments(t *testing.T) {
	// Documents as a SmoothCrawler-Cluster instance writes them.
	g, err := DecodeGroupState([]byte(`{"total_crawler": 3, "total_runner": 2, "total_backup": 0, "standby_id": "",
		"current_crawler": ["sc-crawler_1", "sc-crawler_3"], "current_runner": ["sc-crawler_1", "sc-crawler_3"],
		"current_backup": [], "fail_crawler": ["sc-crawler_2"], "fail_runner": ["sc-crawler_2"], "fail_backup": []}`))
	require.NoError(t, err)
	assert.Equal(t, []string{"sc-crawler_2"}, g.FailRunner)
	tk, err := DecodeTask([]byte(`{"running_content": [{"task_id": 0, "url": "http://127.0.0.1/a", "method": "GET",
		"parameters": {}, "header": {}, "body": {}}], "cookie": {}, "authorization": {}, "in_progressing_id": "0",
		"running_result": {"success_count": 0, "fail_count": 0}, "running_status": "processing", "result_detail": []}`))
	require.NoError(t, err)
	assert.Equal(t, 0, tk.NextIndex)
	assert.True(t, tk.Pending())
}

func mapKeys(m map[string]json.RawMessage) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func TestEnumStrings(t *testing.T) {
	for want, got := range map[string]string{
		"initial": string(RoleInitial), "runner": string(RoleRunner), "backup-runner": string(RoleBackup),
		"dead-runner": string(RoleDeadRunner), "dead-backup-runner": string(RoleDeadBackupRunner),
		"nothing": string(TaskNothing), "processing": string(TaskProcessing), "done": string(TaskDone),
		"terminate": string(TaskTerminate), "error": string(TaskError),
		"Newborn": string(HeartNewborn), "Healthy": string(HeartHealthy), "Arrhythmia": string(HeartArrhythmia),
		"Asystole": string(HeartAsystole), "Apparent Death": string(HeartApparentDeath),
		"Winner": string(Winner), "Loser": string(Loser),
		"sc-crawler-cluster": DefaultGroup,
	} {
		assert.Equal(t, want, got)
	}
	// Marshalled as plain strings.
	assert.Equal(t, `"Apparent Death"`, string(mustJSON(t, HeartApparentDeath)))
	assert.Equal(t, `"backup-runner"`, string(mustJSON(t, RoleBackup)))
}

func TestEnumValid(t *testing.T) {
	for _, r := range []Role{RoleInitial, RoleRunner, RoleBackup, RoleDeadRunner, RoleDeadBackupRunner} {
		assert.True(t, r.Valid(), r)
	}
	for _, r := range []Role{"", "Runner", "backup", "dead", "primary-backup-runner"} {
		assert.False(t, r.Valid(), r)
	}
	assert.True(t, RoleDeadRunner.Dead())
	assert.True(t, RoleDeadBackupRunner.Dead())
	for _, r := range []Role{RoleInitial, RoleRunner, RoleBackup} {
		assert.False(t, r.Dead(), r)
	}
	for _, s := range []TaskState{TaskNothing, TaskProcessing, TaskDone, TaskTerminate, TaskError} {
		assert.True(t, s.Valid(), s)
	}
	for _, s := range []TaskState{"", "Done", "running", "failed"} {
		assert.False(t, s.Valid(), s)
	}
	for _, s := range []HeartState{HeartNewborn, HeartHealthy, HeartArrhythmia, HeartAsystole, HeartApparentDeath} {
		assert.True(t, s.Valid(), s)
	}
	for _, s := range []HeartState{"", "healthy", "ApparentDeath", "Apparent_Death", "Dead"} {
		assert.False(t, s.Valid(), s)
	}
}
