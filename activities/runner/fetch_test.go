package runner

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/cluster"
	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/roles"
)

// The worker runs plain Tasks through the crawl engine: the status code is
// reported as it is, a fetch failure as an error, the request's fields and
// the Task's authorization are sent, and robots.txt is obeyed.
func TestEngineFetcher(t *testing.T) {
	var gotMethod, gotBody, gotAuth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/robots.txt":
			_, _ = io.WriteString(w, "User-agent: *\nDisallow: /private/\n")
		case "/missing":
			http.NotFound(w, r)
		default:
			b, _ := io.ReadAll(r.Body)
			gotMethod, gotBody, gotAuth = r.Method, string(b), r.Header.Get("Authorization")
			_, _ = io.WriteString(w, "<html><title>Hello</title></html>")
		}
	}))
	defer srv.Close()
	a := &Activities{Deps: &cluster.Deps{}, Fetcher: crawl.NewEngine(), Options: crawl.DefaultOptions()}
	tk := roles.EmptyTask()
	tk.Authorization = map[string]string{"Bearer": "tok"}
	tk.RunningContent = []roles.Request{
		{TaskID: 1, URL: srv.URL + "/a", Method: "POST", Body: []byte(`"x=1"`)},
		{TaskID: 2, URL: srv.URL + "/missing"},
		{TaskID: 3, URL: srv.URL + "/private/x"},
		{TaskID: 4, URL: "http://127.0.0.1:1/"},
	}
	ctx := context.Background()
	fetch := func(i int) roles.ResultDetail {
		t.Helper()
		f := a.fetchRequest(ctx, "sc-crawler_1", tk, i)
		require.NoError(t, f.err)
		return f.d
	}

	r := fetch(0)
	assert.Empty(t, r.ErrorMsg)
	assert.Equal(t, roles.TaskDone, r.State)
	assert.Equal(t, 200, r.StatusCode)
	assert.Equal(t, "Hello", r.Response)
	assert.Equal(t, "POST", gotMethod)
	assert.Equal(t, "x=1", gotBody)
	assert.Equal(t, "Bearer tok", gotAuth)

	r = fetch(1)
	assert.Equal(t, "HTTP 404", r.ErrorMsg, "an HTTP status is not a fetch error: the Runner judges it")
	assert.Equal(t, roles.TaskError, r.State)
	assert.Equal(t, 404, r.StatusCode)

	r = fetch(2)
	require.Equal(t, roles.TaskError, r.State)
	assert.Contains(t, r.ErrorMsg, "robots.txt")

	r = fetch(3)
	assert.Equal(t, roles.TaskError, r.State, "a refused connection is an error")
	assert.NotEmpty(t, r.ErrorMsg)
}

// detailOf tells an HTTP error status, which the Runner judges, from the
// Fetcher's own errors, which it records as they are.
func TestDetailOf(t *testing.T) {
	req := roles.Request{TaskID: 7, URL: "http://a.test/"}
	for _, tc := range []struct {
		name  string
		page  crawl.Page
		state roles.TaskState
		msg   string
	}{
		{"ok", crawl.Page{StatusCode: 200, Title: "t", Bytes: 5, DurationMS: 12}, roles.TaskDone, ""},
		{"status judged by the Runner", crawl.Page{StatusCode: 503, Error: "HTTP 503"}, roles.TaskError, "HTTP 503"},
		{"status without an error", crawl.Page{StatusCode: 404}, roles.TaskError, "HTTP 404"},
		{"the fetch's own error", crawl.Page{StatusCode: 200, Error: "body exceeds 10485760 bytes"}, roles.TaskError, "body exceeds 10485760 bytes"},
		{"no response", crawl.Page{Error: "timeout after 15s"}, roles.TaskError, "timeout after 15s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := detailOf(req, tc.page)
			assert.Equal(t, tc.state, d.State)
			assert.Equal(t, tc.msg, d.ErrorMsg)
			assert.Equal(t, tc.page.StatusCode, d.StatusCode)
			assert.Equal(t, tc.page.Title, d.Response)
			assert.Equal(t, tc.page.Bytes, d.Bytes)
			assert.Equal(t, tc.page.DurationMS, d.DurationMS)
			assert.Equal(t, 7, d.TaskID)
			assert.Equal(t, req.URL, d.URL)
		})
	}
}
