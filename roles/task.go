package roles

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// Request is one item of Task.running_content.
type Request struct {
	TaskID     int               `json:"task_id"`
	URL        string            `json:"url"`
	Method     string            `json:"method"`
	Parameters map[string]string `json:"parameters,omitempty"`
	Header     map[string]string `json:"header,omitempty"`
	// Body is sent as is when it is a JSON string, and JSON-encoded otherwise.
	Body json.RawMessage `json:"body,omitempty"`
	// Depth is Baton's: the link depth of the URL in a crawl job (seeds 0).
	Depth int `json:"depth,omitempty"`
}

// JobRef is Baton's: it ties a Task to a batch of a crawl job. The batch's
// URLs, their progress and the results are in the job store (the data
// plane); the Task znode is only this reference, its holder and epoch, and
// bounded counters. Options is no longer written (the job's spec is in the
// store); it is read from Tasks written by earlier versions.
type JobRef struct {
	ID      string          `json:"id"`
	Batch   string          `json:"batch"`
	Size    int             `json:"size,omitempty"`
	Options json.RawMessage `json:"options,omitempty"`
}

// RunningResult counts the requests of a Task that finished.
type RunningResult struct {
	SuccessCount int `json:"success_count"`
	FailCount    int `json:"fail_count"`
}

// ResultDetail is the recorded result of one request. Epoch is Baton's: the
// Task epoch under which the result was recorded.
type ResultDetail struct {
	TaskID     int       `json:"task_id"`
	State      TaskState `json:"state"`
	StatusCode int       `json:"status_code"`
	Response   string    `json:"response"`
	ErrorMsg   string    `json:"error_msg"`
	Epoch      int64     `json:"epoch"`
	URL        string    `json:"url,omitempty"`
	Bytes      int64     `json:"bytes,omitempty"`
	DurationMS int64     `json:"duration_ms,omitempty"`
}

// Task is the work of one instance (znode <root>/node/<name>/task).
//
// The reference's fields are kept as they are. Baton adds:
//   - Epoch: raised on every change of holder (hand-over); a write carrying
//     an older epoch is refused, which fences a stale runner.
//   - Holder: the instance that runs this Task now.
//   - NextIndex: index in running_content of the first unfinished request;
//     a request's result is recorded in the same write that advances it, so
//     it is recorded exactly once.
//   - HandedOverFrom: the dead instance this Task was taken from.
type Task struct {
	RunningContent  []Request         `json:"running_content"`
	Cookie          map[string]string `json:"cookie"`
	Authorization   map[string]string `json:"authorization"`
	InProgressingID string            `json:"in_progressing_id"`
	RunningResult   RunningResult     `json:"running_result"`
	RunningStatus   TaskState         `json:"running_status"`
	ResultDetail    []ResultDetail    `json:"result_detail"`

	Epoch          int64   `json:"epoch"`
	Holder         string  `json:"holder,omitempty"`
	NextIndex      int     `json:"next_index"`
	HandedOverFrom string  `json:"handed_over_from,omitempty"`
	Job            *JobRef `json:"job,omitempty"`
}

// EmptyTask returns the Task an instance registers with.
func EmptyTask() Task {
	return Task{
		RunningContent: []Request{}, Cookie: map[string]string{}, Authorization: map[string]string{},
		InProgressingID: "", RunningStatus: TaskNothing, ResultDetail: []ResultDetail{},
	}
}

// DecodeTask parses and validates a Task document.
func DecodeTask(data []byte) (Task, error) {
	var t Task
	if err := decode("Task", data, &t); err != nil {
		return t, err
	}
	return t, t.Validate()
}

// Validate checks the Task's structure and names the first bad field. It does
// not reject requests with a bad URL or method: those are recorded as failed
// requests when the Task runs (see Request.Validate), so one bad item does not
// lose the others.
func (t Task) Validate() error {
	if !t.RunningStatus.Valid() {
		return fieldErr("Task", "running_status", "unknown task state %q (want nothing, processing, done, terminate or error)", string(t.RunningStatus))
	}
	if t.NextIndex < 0 || t.NextIndex > len(t.RunningContent) {
		return fieldErr("Task", "next_index", "is %d, must be within 0..%d", t.NextIndex, len(t.RunningContent))
	}
	if t.Epoch < 0 {
		return fieldErr("Task", "epoch", "is %d, must be >= 0", t.Epoch)
	}
	seen := map[int]bool{}
	for i, r := range t.RunningContent {
		if seen[r.TaskID] {
			return fieldErr("Task", fmt.Sprintf("running_content[%d].task_id", i), "duplicate task_id %d", r.TaskID)
		}
		seen[r.TaskID] = true
	}
	return nil
}

// ValidateRequests checks every request, as a starter does before it writes
// a Task, and names the first bad field.
func (t Task) ValidateRequests() error {
	if err := t.Validate(); err != nil {
		return err
	}
	if field, msg := CheckAuth(t.Cookie, t.Authorization); field != "" {
		return fieldErr("Task", field, "%s", msg)
	}
	for i, r := range t.RunningContent {
		if err := r.Validate(); err != nil {
			var fe *FieldError
			if ok := asFieldError(err, &fe); ok {
				// The path is relative to the Task: "Task.running_content[1].url".
				fe.Object, fe.Field = "Task", fmt.Sprintf("running_content[%d].%s", i, fe.Field)
				return fe
			}
			return err
		}
	}
	return nil
}

func asFieldError(err error, target **FieldError) bool {
	fe, ok := err.(*FieldError)
	if ok {
		*target = fe
	}
	return ok
}

// Validate checks one request: an absolute http(s) URL and a known method.
func (r Request) Validate() error {
	u, err := url.Parse(r.URL)
	switch {
	case r.URL == "":
		return fieldErr("Request", "url", "is empty")
	case err != nil:
		return fieldErr("Request", "url", "%q is not a URL: %v", r.URL, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return fieldErr("Request", "url", "%q: scheme must be http or https", r.URL)
	case u.Hostname() == "": // "http://:8080/" would dial this machine
		return fieldErr("Request", "url", "%q has no host", r.URL)
	}
	m := strings.ToUpper(r.Method)
	if m == "" {
		m = http.MethodGet
	}
	if !slices.Contains([]string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}, m) {
		return fieldErr("Request", "method", "unknown HTTP method %q", r.Method)
	}
	return nil
}

// Pending reports whether the Task has requests left to run. A crawl
// job's Task carries no requests (its batch is in the job store): it is
// pending until it is marked done, terminate or error.
func (t Task) Pending() bool {
	switch t.RunningStatus {
	case TaskNothing, TaskProcessing:
		return t.Job != nil || t.NextIndex < len(t.RunningContent)
	}
	return false
}

// Replacing returns t made to replace cur in the same Task znode: its
// epoch is one above cur's (1 when there was no Task: cur is the zero
// Task), the rest as t has it. This is the fencing rule of every writer
// that replaces a Task outright (an assignment by `baton task assign`, a
// Task reset when its instance registers again): from the write on, cur's
// holder is fenced, since the writes it makes at cur's epoch are refused.
// A hand-over raises the epoch the same way (HandOver).
func (t Task) Replacing(cur Task) Task {
	t.Epoch = cur.Epoch + 1
	return t
}

// HandOver returns what a new holder takes from a dead holder's Task, and
// whether there is anything to take, following the reference: a processing
// Task is copied whole and continues where it stopped; an error Task is
// copied reset so it runs again; nothing, done and terminate Tasks are not
// handed over. The epoch is raised past the dead holder's.
func HandOver(dead Task, from, to string) (Task, bool) {
	switch dead.RunningStatus {
	case TaskProcessing:
		t := dead.Clone()
		t.Epoch, t.Holder, t.HandedOverFrom = dead.Epoch+1, to, from
		return t, true
	case TaskNothing:
		if !dead.Pending() { // assigned but never started counts as processing
			return Task{}, false
		}
		t := dead.Clone()
		t.Epoch, t.Holder, t.HandedOverFrom = dead.Epoch+1, to, from
		return t, true
	case TaskError:
		t := dead.Clone()
		t.RunningStatus, t.NextIndex, t.InProgressingID = TaskNothing, 0, ""
		t.RunningResult, t.ResultDetail = RunningResult{}, []ResultDetail{}
		t.Epoch, t.Holder, t.HandedOverFrom = dead.Epoch+1, to, from
		return t, true
	}
	return Task{}, false
}

// Record returns t with the result of running_content[t.NextIndex] recorded
// and NextIndex advanced; the Task becomes done after the last request.
// ok is false when the result does not belong to the next request (it was
// recorded already), so a result is never counted twice.
func (t Task) Record(d ResultDetail, maxDetails int) (Task, bool) {
	if t.NextIndex >= len(t.RunningContent) || t.RunningContent[t.NextIndex].TaskID != d.TaskID {
		return t, false
	}
	t = t.Clone()
	d.Epoch = t.Epoch
	if d.State == TaskDone {
		t.RunningResult.SuccessCount++
	} else {
		t.RunningResult.FailCount++
	}
	t.ResultDetail = append(t.ResultDetail, d)
	if maxDetails > 0 && len(t.ResultDetail) > maxDetails {
		t.ResultDetail = t.ResultDetail[len(t.ResultDetail)-maxDetails:]
	}
	t.NextIndex++
	if t.NextIndex == len(t.RunningContent) {
		t.RunningStatus = TaskDone
	} else {
		t.InProgressingID = itoa(t.RunningContent[t.NextIndex].TaskID)
	}
	return t, true
}

// Clone returns a deep copy (maps and slices are not shared).
func (t Task) Clone() Task {
	t.RunningContent = slices.Clone(t.RunningContent)
	if t.RunningContent == nil {
		t.RunningContent = []Request{}
	}
	t.ResultDetail = slices.Clone(t.ResultDetail)
	if t.ResultDetail == nil {
		t.ResultDetail = []ResultDetail{}
	}
	if t.Job != nil {
		j := *t.Job
		t.Job = &j
	}
	t.Cookie = cloneMap(t.Cookie)
	t.Authorization = cloneMap(t.Authorization)
	return t
}

func cloneMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
