package roles

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The znode decoders read what any ZooKeeper client may have written. The
// fuzz targets check, for any input, that a decoder either returns a
// *FieldError wrapping ErrInvalid that names the object and a field, or a
// value that validates and survives encode→decode unchanged. The seed
// corpora (testdata/fuzz/FuzzXxx) run with every `go test`.

// checkDecoded asserts the properties shared by every znode decoder.
func checkDecoded[T any](t *testing.T, obj string, data []byte, dec func([]byte) (T, error), validate func(T) error) {
	t.Helper()
	v, err := dec(data)
	if err != nil {
		var fe *FieldError
		require.ErrorAs(t, err, &fe, "a decode error is a *FieldError")
		require.ErrorIs(t, err, ErrInvalid)
		require.Equal(t, obj, fe.Object, "the error names the object: %v", err)
		require.NotEmpty(t, fe.Field, "the error names a field: %v", err)
		require.NotEmpty(t, fe.Msg, "the error says what is wrong: %v", err)
		require.True(t, strings.HasPrefix(err.Error(), obj+"."), "message %q starts with the object", err)
		return
	}
	require.NoError(t, validate(v), "a decoded value validates")
	enc, err := json.Marshal(v)
	require.NoError(t, err)
	again, err := dec(enc)
	require.NoError(t, err, "the encoding of a decoded value decodes: %s", enc)
	enc2, err := json.Marshal(again)
	require.NoError(t, err)
	// Raw JSON (a request's body) is compacted by the first encoding, so
	// the values are compared through their encodings, then exactly.
	require.Equal(t, string(enc), string(enc2), "decode→encode→decode keeps the value")
	third, err := dec(enc2)
	require.NoError(t, err)
	require.Equal(t, again, third, "decode→encode is a fixed point")
}

func addJSON(f *testing.F, vs ...any) {
	for _, v := range vs {
		b, err := json.Marshal(v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

func addStrings(f *testing.F, ss ...string) {
	for _, s := range ss {
		f.Add([]byte(s))
	}
}

// common garbage every target starts from.
var garbage = []string{"", "null", "[]", "{}", `"x"`, "1", "{", `{"a":1}x`, "\xff\xfe", `{"group":1}`}

func FuzzDecodeNodeState(f *testing.F) {
	addJSON(f, NodeState{Group: DefaultGroup, Role: RoleRunner},
		NodeState{Group: "g", Role: RoleDeadRunner, TakenOverBy: "g_2"})
	addStrings(f, garbage...)
	addStrings(f, `{"group":"g","role":"boss"}`, `{"group":"","role":"runner"}`, `{"group":"g","role":null}`)
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecoded(t, "NodeState", data, DecodeNodeState, NodeState.Validate)
	})
}

func FuzzDecodeMemberState(f *testing.F) {
	addJSON(f, MemberState{Role: RoleRunner}, MemberState{Role: RoleRunner, Surplus: true},
		MemberState{Role: RoleBackup, Standby: true})
	addStrings(f, garbage...)
	addStrings(f, `{"role":"initial"}`, `{"role":"runner","standby":true}`, `{"role":"backup-runner","surplus":true}`,
		`{"role":"runner","surplus":"yes"}`)
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecoded(t, "MemberState", data, DecodeMemberState, MemberState.Validate)
	})
}

func FuzzDecodeGroupState(f *testing.F) {
	g := NewGroupState(2, 1)
	g.CurrentRunner = []string{"sc-crawler_0", "sc-crawler_1"}
	g.CurrentBackup = []string{"sc-crawler_2"}
	g.StandbyID = "2"
	addJSON(f, NewGroupState(2, 1), g)
	addStrings(f, garbage...)
	addStrings(f, `{"total_crawler":-1}`, `{"standby_id":"01"}`, `{"current_runner":["a_1","a_1"]}`,
		`{"current_runner":["bad name"]}`, `{"total_runner":1e99}`)
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecoded(t, "GroupState", data, DecodeGroupState, GroupState.Validate)
	})
}

func FuzzDecodeTask(f *testing.F) {
	tk := EmptyTask()
	tk.RunningContent = []Request{{TaskID: 1, URL: "http://127.0.0.1:8000/a", Method: "POST",
		Parameters: map[string]string{"q": "1"}, Header: map[string]string{"X-A": "b"}, Body: json.RawMessage(`{"k":"v"}`)}}
	tk.ResultDetail = []ResultDetail{{TaskID: 1, State: TaskDone, StatusCode: 200, Epoch: 3}}
	tk.Epoch, tk.Holder = 3, "g_1"
	job := EmptyTask()
	job.RunningStatus = TaskProcessing
	job.Job = &JobRef{ID: "j", Batch: "j-b000001", Size: 10}
	addJSON(f, EmptyTask(), tk, job)
	addStrings(f, garbage...)
	addStrings(f, `{"running_status":"nothing","next_index":5}`, `{"running_status":"nothing","epoch":-1}`,
		`{"running_status":"nothing","running_content":[{"task_id":1},{"task_id":1}]}`,
		`{"running_status":"nothing","running_content":[{"body":[1, 2]}]}`, `{"running_status":"nothing","job":null}`)
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecoded(t, "Task", data, DecodeTask, Task.Validate)
	})
}

func FuzzDecodeHeartbeat(f *testing.F) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)
	hb := NewHeartbeat(now, DefaultTimers())
	old := hb
	old.TimeFormat, old.HeartRhythmTime = "2006-01-02 15:04:05", "2026-01-02 03:04:05"
	addJSON(f, hb, old)
	addStrings(f, garbage...)
	addStrings(f, `{"heart_rhythm_time":"x","update_timeout":"1s"}`, `{"update_timeout":"-1s"}`,
		`{"heart_rhythm_timeout":"0"}`, `{"time_format":"2006","heart_rhythm_time":"2026","update_timeout":"9999999999h"}`)
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecoded(t, "Heartbeat", data, DecodeHeartbeat, Heartbeat.Validate)
		if h, err := DecodeHeartbeat(data); err == nil {
			_, err := h.Age(time.Now())
			require.NoError(t, err, "a valid heartbeat has an age")
			d, err := h.Timeout()
			require.NoError(t, err)
			require.Positive(t, d)
		}
	})
}

func TestDecodeNullDocument(t *testing.T) {
	for obj, dec := range map[string]func([]byte) error{
		"NodeState":  func(b []byte) error { _, err := DecodeNodeState(b); return err },
		"GroupState": func(b []byte) error { _, err := DecodeGroupState(b); return err },
		"Task":       func(b []byte) error { _, err := DecodeTask(b); return err },
		"Heartbeat":  func(b []byte) error { _, err := DecodeHeartbeat(b); return err },
	} {
		err := dec([]byte(" null\n"))
		require.ErrorIs(t, err, ErrInvalid, obj)
		require.EqualError(t, err, obj+".(document): is null, want a JSON object")
	}
}

func TestValidateRequestsChecksAuth(t *testing.T) {
	tk := EmptyTask()
	tk.RunningContent = []Request{{TaskID: 1, URL: "http://127.0.0.1/"}}
	require.NoError(t, tk.ValidateRequests())
	tk.Cookie = map[string]string{"ok": "1", "a;b": "2"}
	require.EqualError(t, tk.ValidateRequests(), `Task.cookie["a;b"]: http: invalid Cookie.Name`)
	tk.Cookie = map[string]string{"ok": "1"}
	tk.Authorization = map[string]string{"X-Key": "k\nHost: evil.test"}
	require.EqualError(t, tk.ValidateRequests(), `Task.authorization["X-Key"]: the value contains a control character`)
	tk.Authorization = map[string]string{"bearer": "token", "X-Api-Key": "k"}
	require.NoError(t, tk.ValidateRequests())
}

func FuzzDecodeCrawlers(f *testing.F) {
	addJSON(f, Crawlers{List: []CrawlerInfo{{Name: BuiltinCrawler, Version: "v1"}}},
		Crawlers{List: []CrawlerInfo{{Name: "shop", Version: "1.0.0", Labels: []string{"", "detail"},
			Options: []CrawlerOption{{Key: "max", Kind: "int", Default: "3"}}}}})
	addStrings(f, garbage...)
	addStrings(f, `{"crawlers":[{"name":""}]}`, `{"crawlers":null}`, `{"crawlers":[{"name":"x","options":[{"key":1}]}]}`)
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecoded(t, "Crawlers", data, DecodeCrawlers, Crawlers.Validate)
	})
}
