package roles

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func reqs(ids ...int) []Request {
	out := make([]Request, len(ids))
	for i, id := range ids {
		out[i] = Request{TaskID: id, URL: "http://example.test/" + itoa(id), Method: "GET"}
	}
	return out
}

func taskWith(status TaskState, next int, ids ...int) Task {
	t := EmptyTask()
	t.RunningContent = reqs(ids...)
	t.RunningStatus = status
	t.NextIndex = next
	return t
}

func TestEmptyTask(t *testing.T) {
	e := EmptyTask()
	require.NoError(t, e.Validate())
	assert.Equal(t, TaskNothing, e.RunningStatus)
	assert.False(t, e.Pending())
	assert.NotNil(t, e.RunningContent)
	assert.NotNil(t, e.Cookie)
	assert.NotNil(t, e.Authorization)
	assert.NotNil(t, e.ResultDetail)
	assert.JSONEq(t, `{"running_content":[],"cookie":{},"authorization":{},"in_progressing_id":"",
		"running_result":{"success_count":0,"fail_count":0},"running_status":"nothing","result_detail":[],
		"epoch":0,"next_index":0}`, string(mustJSON(t, e)))
}

func TestTaskValidate(t *testing.T) {
	tests := []struct {
		name  string
		task  Task
		field string
	}{
		{"unknown status", Task{RunningStatus: "paused"}, "running_status"},
		{"empty status", Task{}, "running_status"},
		{"next_index past the end", taskWith(TaskProcessing, 3, 1, 2), "next_index"},
		{"negative next_index", taskWith(TaskProcessing, -1, 1, 2), "next_index"},
		{"negative epoch", func() Task { t := taskWith(TaskNothing, 0, 1); t.Epoch = -1; return t }(), "epoch"},
		{"duplicate task_id", taskWith(TaskNothing, 0, 1, 2, 1), "running_content[2].task_id"},
		{"duplicate task_id adjacent", taskWith(TaskNothing, 0, 7, 7), "running_content[1].task_id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			requireFieldError(t, tt.task.Validate(), "Task", tt.field)
			requireFieldError(t, tt.task.ValidateRequests(), "Task", tt.field)
		})
	}
	// next_index == len is a finished task: valid.
	require.NoError(t, taskWith(TaskDone, 2, 1, 2).Validate())
	// A bad URL is not a structural error: it is recorded as a failed request when the task runs.
	bad := taskWith(TaskNothing, 0, 1, 2)
	bad.RunningContent[1].URL = "not a url"
	require.NoError(t, bad.Validate())
}

func TestTaskValidateRequests(t *testing.T) {
	tests := []struct {
		name  string
		mod   func(*Request)
		field string
	}{
		{"empty url", func(r *Request) { r.URL = "" }, "running_content[1].url"},
		{"relative url", func(r *Request) { r.URL = "/index.html" }, "running_content[1].url"},
		{"ftp scheme", func(r *Request) { r.URL = "ftp://example.test/file" }, "running_content[1].url"},
		{"no host", func(r *Request) { r.URL = "http:///path" }, "running_content[1].url"},
		{"port without host", func(r *Request) { r.URL = "http://:8080/path" }, "running_content[1].url"},
		{"unparsable url", func(r *Request) { r.URL = "http://[::1" }, "running_content[1].url"},
		{"control character", func(r *Request) { r.URL = "http://example.test/\x7f" }, "running_content[1].url"},
		{"unknown method", func(r *Request) { r.Method = "FETCH" }, "running_content[1].method"},
		{"method with space", func(r *Request) { r.Method = "GET " }, "running_content[1].method"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			task := taskWith(TaskNothing, 0, 1, 2, 3)
			tt.mod(&task.RunningContent[1])
			requireFieldError(t, task.ValidateRequests(), "Task", tt.field)
			// The request's own error names the bare field.
			err := task.RunningContent[1].Validate()
			fe := requireFieldError(t, err, "Request", tt.field[len("running_content[1]."):])
			_ = fe
		})
	}
	t.Run("good requests", func(t *testing.T) {
		task := taskWith(TaskNothing, 0, 1, 2, 3, 4)
		task.RunningContent[0].Method = ""     // means GET
		task.RunningContent[1].Method = "post" // case-insensitive
		task.RunningContent[2].URL = "https://example.test:8443/a?b=c"
		task.RunningContent[3].Method = "DELETE"
		require.NoError(t, task.ValidateRequests())
	})
	t.Run("first bad request is named", func(t *testing.T) {
		task := taskWith(TaskNothing, 0, 1, 2, 3)
		task.RunningContent[2].URL = "ftp://x"
		task.RunningContent[0].Method = "BREW"
		requireFieldError(t, task.ValidateRequests(), "Task", "running_content[0].method")
	})
	t.Run("structural errors come first", func(t *testing.T) {
		task := taskWith(TaskNothing, 0, 1, 1)
		task.RunningContent[0].URL = ""
		requireFieldError(t, task.ValidateRequests(), "Task", "running_content[1].task_id")
	})
}

func TestTaskPending(t *testing.T) {
	tests := []struct {
		task Task
		want bool
	}{
		{EmptyTask(), false},
		{taskWith(TaskNothing, 0, 1), true}, // assigned, not started
		{taskWith(TaskProcessing, 1, 1, 2), true},
		{taskWith(TaskProcessing, 2, 1, 2), false},
		{taskWith(TaskDone, 0, 1, 2), false},
		{taskWith(TaskTerminate, 0, 1, 2), false},
		{taskWith(TaskError, 0, 1, 2), false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, tt.task.Pending(), "status %s next %d of %d", tt.task.RunningStatus, tt.task.NextIndex, len(tt.task.RunningContent))
	}
}

// Replacing raises the epoch one above the replaced Task's, whatever the
// new Task carried, and changes nothing else of either Task.
func TestTaskReplacing(t *testing.T) {
	cur := taskWith(TaskProcessing, 1, 1, 2)
	cur.Epoch, cur.Holder = 7, "sc-crawler_2"
	next := taskWith(TaskNothing, 0, 3)
	next.Epoch, next.Holder, next.HandedOverFrom = 99, "sc-crawler_1", "sc-crawler_2"

	got := next.Replacing(cur)
	assert.Equal(t, int64(8), got.Epoch, "one above the replaced Task's, not the new Task's own")
	want := next
	want.Epoch = 8
	assert.Equal(t, want, got, "only the epoch changes")
	assert.Equal(t, int64(99), next.Epoch, "t is taken by value")
	assert.Equal(t, int64(7), cur.Epoch)

	assert.Equal(t, int64(1), EmptyTask().Replacing(Task{}).Epoch, "no Task before: epoch 1")
	assert.Equal(t, int64(9), EmptyTask().Replacing(got).Epoch, "each replacement fences the one before")
}

func TestHandOver(t *testing.T) {
	withResults := func(status TaskState, next int) Task {
		tk := taskWith(status, next, 10, 11, 12)
		tk.Cookie = map[string]string{"session": "s1"}
		tk.Authorization = map[string]string{"Authorization": "Bearer t"}
		tk.Epoch, tk.Holder = 4, "sc-crawler_2"
		tk.InProgressingID = itoa(tk.RunningContent[min(next, 2)].TaskID)
		for i := 0; i < next; i++ {
			tk.ResultDetail = append(tk.ResultDetail, ResultDetail{TaskID: 10 + i, State: TaskDone, StatusCode: 200, Epoch: 4})
			tk.RunningResult.SuccessCount++
		}
		return tk
	}

	t.Run("processing: copied whole, continues where it stopped", func(t *testing.T) {
		dead := withResults(TaskProcessing, 1)
		got, ok := HandOver(dead, "sc-crawler_2", "sc-crawler_3")
		require.True(t, ok)
		want := dead.Clone()
		want.Epoch, want.Holder, want.HandedOverFrom = 5, "sc-crawler_3", "sc-crawler_2"
		assert.Equal(t, want, got)
		assert.Equal(t, 1, got.NextIndex)
		assert.Equal(t, "11", got.InProgressingID)
		assert.True(t, got.Pending())
		// The copy shares nothing with the dead task.
		got.Cookie["session"] = "changed"
		got.ResultDetail[0].StatusCode = 500
		assert.Equal(t, "s1", dead.Cookie["session"])
		assert.Equal(t, 200, dead.ResultDetail[0].StatusCode)
	})
	t.Run("error: copied reset to run again", func(t *testing.T) {
		dead := withResults(TaskError, 2)
		dead.RunningResult.FailCount = 1
		got, ok := HandOver(dead, "sc-crawler_2", "sc-crawler_3")
		require.True(t, ok)
		assert.Equal(t, TaskNothing, got.RunningStatus)
		assert.Equal(t, 0, got.NextIndex)
		assert.Equal(t, "", got.InProgressingID)
		assert.Equal(t, RunningResult{}, got.RunningResult)
		assert.Empty(t, got.ResultDetail)
		assert.NotNil(t, got.ResultDetail)
		assert.Equal(t, dead.RunningContent, got.RunningContent)
		assert.Equal(t, dead.Cookie, got.Cookie)
		assert.Equal(t, dead.Authorization, got.Authorization)
		assert.Equal(t, int64(5), got.Epoch)
		assert.Equal(t, "sc-crawler_3", got.Holder)
		assert.Equal(t, "sc-crawler_2", got.HandedOverFrom)
		assert.True(t, got.Pending())
		assert.Equal(t, TaskError, dead.RunningStatus, "the dead task is not modified")
	})
	t.Run("nothing with content: assigned but never started", func(t *testing.T) {
		dead := withResults(TaskNothing, 0)
		got, ok := HandOver(dead, "sc-crawler_2", "sc-crawler_3")
		require.True(t, ok)
		assert.Equal(t, TaskNothing, got.RunningStatus)
		assert.Equal(t, 0, got.NextIndex)
		assert.Equal(t, int64(5), got.Epoch)
		assert.Equal(t, "sc-crawler_3", got.Holder)
		assert.True(t, got.Pending())
	})
	for _, tc := range []struct {
		name string
		dead Task
	}{
		{"nothing without content", EmptyTask()},
		{"done", withResults(TaskDone, 3)},
		{"done early", withResults(TaskDone, 1)},
		{"terminate", withResults(TaskTerminate, 1)},
	} {
		t.Run(tc.name+": nothing handed over", func(t *testing.T) {
			got, ok := HandOver(tc.dead, "sc-crawler_2", "sc-crawler_3")
			assert.False(t, ok)
			assert.Equal(t, Task{}, got)
		})
	}
}

func TestTaskRecordExactlyOnce(t *testing.T) {
	tk := taskWith(TaskProcessing, 0, 1, 2, 3)
	tk.Epoch = 7
	tk.InProgressingID = "1"

	t1, ok := tk.Record(ResultDetail{TaskID: 1, State: TaskDone, StatusCode: 200}, 0)
	require.True(t, ok)
	assert.Equal(t, 1, t1.NextIndex)
	assert.Equal(t, "2", t1.InProgressingID)
	assert.Equal(t, RunningResult{SuccessCount: 1}, t1.RunningResult)
	require.Len(t, t1.ResultDetail, 1)
	assert.Equal(t, int64(7), t1.ResultDetail[0].Epoch, "the result carries the task's epoch")
	assert.Equal(t, TaskProcessing, t1.RunningStatus)
	assert.Equal(t, 0, tk.NextIndex, "Record does not modify its receiver")
	assert.Empty(t, tk.ResultDetail)

	// The same task_id again is refused and changes nothing.
	again, ok := t1.Record(ResultDetail{TaskID: 1, State: TaskDone, StatusCode: 200}, 0)
	assert.False(t, ok)
	assert.Equal(t, t1, again)
	// A result for a later request is refused too (order is fixed).
	_, ok = t1.Record(ResultDetail{TaskID: 3, State: TaskDone}, 0)
	assert.False(t, ok)

	t2, ok := t1.Record(ResultDetail{TaskID: 2, State: TaskError, StatusCode: 500, ErrorMsg: "HTTP 500"}, 0)
	require.True(t, ok)
	assert.Equal(t, RunningResult{SuccessCount: 1, FailCount: 1}, t2.RunningResult)
	assert.Equal(t, "3", t2.InProgressingID)

	t3, ok := t2.Record(ResultDetail{TaskID: 3, State: TaskError, ErrorMsg: "timeout"}, 0)
	require.True(t, ok)
	assert.Equal(t, TaskDone, t3.RunningStatus, "done after the last request")
	assert.Equal(t, 3, t3.NextIndex)
	assert.False(t, t3.Pending())
	assert.Equal(t, RunningResult{SuccessCount: 1, FailCount: 2}, t3.RunningResult)
	ids := []int{}
	for _, d := range t3.ResultDetail {
		ids = append(ids, d.TaskID)
	}
	assert.Equal(t, []int{1, 2, 3}, ids)
	require.NoError(t, t3.Validate())

	// Nothing more can be recorded once done.
	for _, id := range []int{1, 2, 3, 4} {
		_, ok := t3.Record(ResultDetail{TaskID: id, State: TaskDone}, 0)
		assert.False(t, ok, "task_id %d after done", id)
	}
}

func TestTaskRecordMaxDetails(t *testing.T) {
	tk := taskWith(TaskProcessing, 0, 1, 2, 3, 4, 5)
	var ok bool
	for id := 1; id <= 5; id++ {
		tk, ok = tk.Record(ResultDetail{TaskID: id, State: TaskDone}, 2)
		require.True(t, ok)
		assert.LessOrEqual(t, len(tk.ResultDetail), 2)
	}
	require.Len(t, tk.ResultDetail, 2)
	assert.Equal(t, 4, tk.ResultDetail[0].TaskID, "the newest results are kept")
	assert.Equal(t, 5, tk.ResultDetail[1].TaskID)
	assert.Equal(t, 5, tk.RunningResult.SuccessCount, "counters count every result, not only the kept ones")
	assert.Equal(t, TaskDone, tk.RunningStatus)

	// 0 means unbounded.
	tk = taskWith(TaskProcessing, 0, 1, 2, 3)
	for id := 1; id <= 3; id++ {
		tk, _ = tk.Record(ResultDetail{TaskID: id, State: TaskDone}, 0)
	}
	assert.Len(t, tk.ResultDetail, 3)
}

func TestTaskCloneIsDeep(t *testing.T) {
	tk := taskWith(TaskProcessing, 0, 1)
	tk.Cookie["a"] = "1"
	tk.ResultDetail = []ResultDetail{{TaskID: 1}}
	c := tk.Clone()
	c.RunningContent[0].URL = "http://changed/"
	c.Cookie["a"] = "2"
	c.Authorization["x"] = "y"
	c.ResultDetail[0].TaskID = 9
	assert.Equal(t, "http://example.test/1", tk.RunningContent[0].URL)
	assert.Equal(t, "1", tk.Cookie["a"])
	assert.Empty(t, tk.Authorization)
	assert.Equal(t, 1, tk.ResultDetail[0].TaskID)
	// nil collections become empty ones (the JSON keeps [] and {}).
	z := Task{}.Clone()
	assert.NotNil(t, z.RunningContent)
	assert.NotNil(t, z.ResultDetail)
	assert.NotNil(t, z.Cookie)
	assert.NotNil(t, z.Authorization)
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// SecretFields names a Task's credentials, never their values: cookie and
// authorization entries, credential-like headers and parameters, a URL's
// user:password and credential-like query parameters; a Task without any
// has none.
func TestTaskSecretFields(t *testing.T) {
	tk := EmptyTask()
	tk.RunningContent = []Request{
		{TaskID: 1, URL: "http://127.0.0.1:8000/a?page=2", Method: "GET",
			Header:     map[string]string{"Accept": "text/html", "User-Agent": "x", "Content-Type": "application/json"},
			Parameters: map[string]string{"q": "shoes", "page": "2", "sort": "price", "author": "Tolkien", "keyword": "ring"}},
	}
	assert.Empty(t, tk.SecretFields())

	tk.Cookie = map[string]string{"session": "c-value"}
	tk.Authorization = map[string]string{"Bearer": "a-value"}
	tk.RunningContent = append(tk.RunningContent,
		Request{TaskID: 2, URL: "https://user:p-value@example.org/x?access_token=q-value&page=1", Method: "GET",
			Header:     map[string]string{"X-Api-Key": "h1", "Authorization": "h2", "Cookie": "h3", "X-Auth": "h4", "Accept": "*/*"},
			Parameters: map[string]string{"api_key": "p1", "password": "p2", "sig": "p3", "q": "ok"}})
	got := tk.SecretFields()
	assert.Equal(t, []string{
		`Task.cookie["session"]`, `Task.authorization["Bearer"]`,
		`Task.running_content[1].header["Authorization"]`, `Task.running_content[1].header["Cookie"]`,
		`Task.running_content[1].header["X-Api-Key"]`, `Task.running_content[1].header["X-Auth"]`,
		`Task.running_content[1].parameters["api_key"]`, `Task.running_content[1].parameters["password"]`,
		`Task.running_content[1].parameters["sig"]`,
		`Task.running_content[1].url (user:password)`, `Task.running_content[1].url query["access_token"]`,
	}, got)
	for _, f := range got {
		assert.NotContains(t, f, "value")
	}
}
