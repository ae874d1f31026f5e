package activities_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/cluster"
	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/roles"
)

// received is what the test server saw of one request.
type received struct {
	Method, Path, Query, Body string
	Header                    http.Header
	Cookies                   map[string]string
}

type site struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []received
}

func newSite(t *testing.T) *site {
	s := &site{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rec := received{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Body: string(body),
			Header: r.Header.Clone(), Cookies: map[string]string{}}
		for _, c := range r.Cookies() {
			rec.Cookies[c.Name] = c.Value
		}
		s.mu.Lock()
		s.reqs = append(s.reqs, rec)
		s.mu.Unlock()
		switch r.URL.Path {
		case "/missing":
			http.NotFound(w, r)
		case "/boom":
			http.Error(w, "kaput", http.StatusInternalServerError)
		default:
			_, _ = io.WriteString(w, "page "+r.URL.Path)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *site) received() []received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]received(nil), s.reqs...)
}

func TestRunTaskHonoursEveryRequestField(t *testing.T) {
	srv := newSite(t)
	f := newClusterFixture(t, 1, 1)
	f.start()
	ctx := context.Background()

	tk := f.assign(1, []roles.Request{
		{TaskID: 10, URL: srv.URL + "/search?lang=en", Method: "GET",
			Parameters: map[string]string{"q": "go lang", "page": "2"}, Header: map[string]string{"X-Trace": "t-1", "Accept": "text/html"}},
		{TaskID: 11, URL: srv.URL + "/items", Method: "post", Body: json.RawMessage(`{"name":"baton","n":1}`)},
		{TaskID: 12, URL: srv.URL + "/raw", Method: "PUT", Body: json.RawMessage(`"plain text body"`),
			Header: map[string]string{"Content-Type": "text/plain"}},
		{TaskID: 13, URL: srv.URL + "/missing", Method: "GET"},
		{TaskID: 14, URL: srv.URL + "/boom", Method: "DELETE"},
		{TaskID: 15, URL: "ftp://example.test/file", Method: "GET"},
		{TaskID: 16, URL: srv.URL + "/after", Method: ""},
	})
	_ = tk
	// Cookies and authorization are Task-wide.
	cur := f.task(1)
	cur.Cookie = map[string]string{"session": "abc123", "lang": "en"}
	cur.Authorization = map[string]string{"Authorization": "Bearer s3cret"}
	_, err := f.c().Put(ctx, f.c().TaskPath(name(1)), cur, -1)
	require.NoError(t, err)

	res, err := f.acts(newHTTPFetcher()).RunTask(ctx, cluster.RunTaskInput{Member: f.member(1)})
	require.NoError(t, err)
	assert.Equal(t, 7, res.Ran)
	assert.Equal(t, roles.TaskDone, res.Status)
	assert.Equal(t, roles.RunningResult{SuccessCount: 4, FailCount: 3}, res.Result)

	got := srv.received()
	require.Len(t, got, 6, "the invalid request is not sent")
	// 10: method, merged query, headers, cookies, authorization
	assert.Equal(t, "GET", got[0].Method)
	assert.Equal(t, "/search", got[0].Path)
	assert.Equal(t, "lang=en&page=2&q=go+lang", got[0].Query)
	assert.Equal(t, "t-1", got[0].Header.Get("X-Trace"))
	assert.Equal(t, "text/html", got[0].Header.Get("Accept"))
	assert.Equal(t, map[string]string{"session": "abc123", "lang": "en"}, got[0].Cookies)
	assert.Equal(t, "Bearer s3cret", got[0].Header.Get("Authorization"))
	assert.Empty(t, got[0].Body)
	// 11: lower-case method, JSON body
	assert.Equal(t, "POST", got[1].Method)
	assert.JSONEq(t, `{"name":"baton","n":1}`, got[1].Body)
	assert.Equal(t, "application/json", got[1].Header.Get("Content-Type"))
	assert.Equal(t, "Bearer s3cret", got[1].Header.Get("Authorization"), "authorization goes with every request")
	// 12: a JSON string body is sent as is, with the request's content type
	assert.Equal(t, "PUT", got[2].Method)
	assert.Equal(t, "plain text body", got[2].Body)
	assert.Equal(t, "text/plain", got[2].Header.Get("Content-Type"))
	assert.Equal(t, "DELETE", got[4].Method)
	assert.Equal(t, "GET", got[5].Method, "an empty method means GET")
	assert.Equal(t, "/after", got[5].Path, "the task goes on after an invalid request")

	final := f.task(1)
	require.Len(t, final.ResultDetail, 7)
	codes, states := []int{}, []roles.TaskState{}
	for _, d := range final.ResultDetail {
		codes = append(codes, d.StatusCode)
		states = append(states, d.State)
	}
	assert.Equal(t, []int{200, 200, 200, 404, 500, 0, 200}, codes, "real status codes")
	E, D := roles.TaskError, roles.TaskDone
	assert.Equal(t, []roles.TaskState{D, D, D, E, E, E, D}, states)
	assert.Equal(t, "HTTP 404", final.ResultDetail[3].ErrorMsg)
	assert.Equal(t, "HTTP 500", final.ResultDetail[4].ErrorMsg)
	assert.Contains(t, final.ResultDetail[4].Response, "kaput")
	assert.Equal(t, "page /search", final.ResultDetail[0].Response)
	assert.Equal(t, int64(len("page /search")), final.ResultDetail[0].Bytes)
	bad := final.ResultDetail[5]
	assert.Equal(t, 15, bad.TaskID)
	assert.Contains(t, bad.ErrorMsg, "node "+name(1))
	assert.Contains(t, bad.ErrorMsg, "running_content[5]")
	assert.Contains(t, bad.ErrorMsg, "url")
	assert.Equal(t, "ftp://example.test/file", bad.URL)
	for i, d := range final.ResultDetail {
		assert.Equal(t, final.Epoch, d.Epoch, "detail %d", i)
	}
	assert.Equal(t, 7, final.NextIndex)
	assert.Equal(t, roles.TaskDone, final.RunningStatus)
	assert.Equal(t, name(1), final.Holder)
	assert.Equal(t, "16", final.InProgressingID)
	assert.Equal(t, roles.RunningResult{SuccessCount: 4, FailCount: 3}, final.RunningResult)
}

func TestRunTaskAuthorizationSchemes(t *testing.T) {
	srv := newSite(t)
	for _, tc := range []struct {
		auth   map[string]string
		header string
		want   string
	}{
		{map[string]string{"bearer": "tok"}, "Authorization", "bearer tok"},
		{map[string]string{"Basic": "dXNlcjpwdw=="}, "Authorization", "Basic dXNlcjpwdw=="},
		{map[string]string{"X-Api-Key": "k1"}, "X-Api-Key", "k1"},
	} {
		tk := roles.EmptyTask()
		tk.Authorization = tc.auth
		r := newHTTPFetcher().Fetch(context.Background(), roles.Request{TaskID: 1, URL: srv.URL + "/a"}, crawl.AuthOf(tk), 0, crawl.Options{})
		require.Empty(t, r.Error)
		assert.Equal(t, 200, r.StatusCode)
		got := srv.received()
		assert.Equal(t, tc.want, got[len(got)-1].Header.Get(tc.header))
	}
}

// httpFetcher (httpfetcher_test.go) bounds the body, the request time and
// a failed connection, so that the tests fetching with it cannot hang.
func TestHTTPFetcherBoundsBodyAndTime(t *testing.T) {
	big := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, strings.Repeat("x", 1000))
	}))
	defer big.Close()
	f := newHTTPFetcher()
	f.MaxBody, f.ExcerptBytes = 100, 10
	r := f.Fetch(context.Background(), roles.Request{TaskID: 1, URL: big.URL}, crawl.Auth{}, 0, crawl.Options{})
	require.NotEmpty(t, r.Error)
	assert.Contains(t, r.Error, "100 bytes")
	assert.Equal(t, 200, r.StatusCode)
	assert.Len(t, r.Title, 10)

	block := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-block:
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	defer close(block)
	f = newHTTPFetcher()
	f.Timeout = 50 * time.Millisecond
	r = f.Fetch(context.Background(), roles.Request{TaskID: 1, URL: slow.URL}, crawl.Auth{}, 0, crawl.Options{})
	require.NotEmpty(t, r.Error, "the request time is bounded")
	assert.Zero(t, r.StatusCode)

	r = newHTTPFetcher().Fetch(context.Background(), roles.Request{TaskID: 1, URL: "http://127.0.0.1:1/"}, crawl.Auth{}, 0, crawl.Options{})
	require.NotEmpty(t, r.Error, "a connection failure is reported, not panicked")
}

func TestRunTaskRecordsConnectionFailures(t *testing.T) {
	srv := newSite(t)
	f := newClusterFixture(t, 1, 1)
	f.start()
	f.assign(1, []roles.Request{
		{TaskID: 1, URL: "http://127.0.0.1:1/refused"},
		{TaskID: 2, URL: srv.URL + "/ok"},
	})
	res, err := f.acts(newHTTPFetcher()).RunTask(context.Background(), cluster.RunTaskInput{Member: f.member(1)})
	require.NoError(t, err)
	assert.Equal(t, roles.RunningResult{SuccessCount: 1, FailCount: 1}, res.Result)
	d := f.task(1).ResultDetail
	assert.Equal(t, roles.TaskError, d[0].State)
	assert.NotEmpty(t, d[0].ErrorMsg)
	assert.Equal(t, roles.TaskDone, d[1].State)
}

func TestRunTaskCapsResultDetail(t *testing.T) {
	f := newClusterFixture(t, 1, 1)
	f.start()
	f.assign(1, requests(5))
	a := f.acts(&recordingFetcher{})
	a.MaxResultDetail = 2
	res, err := a.RunTask(context.Background(), cluster.RunTaskInput{Member: f.member(1)})
	require.NoError(t, err)
	assert.Equal(t, roles.RunningResult{SuccessCount: 5}, res.Result)
	assert.Equal(t, []int{3, 4}, taskIDs(f.task(1)))
}

func TestRunTaskWithNothingToDo(t *testing.T) {
	f := newClusterFixture(t, 1, 1)
	f.start()
	ctx := context.Background()
	before := f.task(1)
	rf := &recordingFetcher{}
	res, err := f.acts(rf).RunTask(ctx, cluster.RunTaskInput{Member: f.member(1)})
	require.NoError(t, err)
	assert.Equal(t, 0, res.Ran)
	assert.Equal(t, roles.TaskNothing, res.Status)
	assert.Empty(t, rf.ids())
	assert.Equal(t, before, f.task(1), "nothing written")

	// A finished Task is not run again.
	f.assign(1, requests(2))
	_, err = f.acts(rf).RunTask(ctx, cluster.RunTaskInput{Member: f.member(1)})
	require.NoError(t, err)
	res, err = f.acts(rf).RunTask(ctx, cluster.RunTaskInput{Member: f.member(1)})
	require.NoError(t, err)
	assert.Equal(t, 0, res.Ran)
	assert.Equal(t, roles.TaskDone, res.Status)
	assert.Equal(t, []int{0, 1}, rf.ids())
}

func TestRunTaskOnlyForRunners(t *testing.T) {
	f := newClusterFixture(t, 1, 1)
	f.start()
	f.assign(2, requests(1))
	_, err := f.acts(&recordingFetcher{}).RunTask(context.Background(), cluster.RunTaskInput{Member: f.member(2)})
	require.Error(t, err)
	assert.True(t, cluster.IsFenced(err), "a backup does not run tasks: %v", err)
	assert.Equal(t, roles.TaskNothing, f.task(2).RunningStatus)
}

func TestRunTaskWithoutFetcher(t *testing.T) {
	f := newClusterFixture(t, 1, 1)
	f.start()
	f.assign(1, requests(1))
	assert.NotPanics(t, func() {
		_, err := f.acts(nil).RunTask(context.Background(), cluster.RunTaskInput{Member: f.member(1)})
		require.Error(t, err)
	})
}

func TestWaitTaskIsWokenByTheWatch(t *testing.T) {
	f := newClusterFixture(t, 1, 1)
	f.start()
	ctx := context.Background()
	a := f.acts(nil)
	done := goRun(func() (cluster.WaitTaskResult, error) { return a.WaitTask(ctx, f.member(1)) })
	f.spy.waitCount(t, f.spy.watch, f.c().TaskPath(name(1)), 1, "WaitTask watches its Task")
	notReturned(t, done, "WaitTask without a task")
	assigned := time.Now()
	f.assign(1, requests(1))
	w, err := await(t, done, "WaitTask")
	require.NoError(t, err)
	assert.Equal(t, cluster.WaitTaskResult{Pending: true, Role: roles.RoleRunner}, w)
	assert.Less(t, time.Since(assigned), time.Second, "woken by the watch, not by the 2 s re-read")
}

func TestWaitTaskReturnsAtOnceWhenPending(t *testing.T) {
	f := newClusterFixture(t, 1, 1)
	f.start()
	f.assign(1, requests(1))
	w, err := f.acts(nil).WaitTask(context.Background(), f.member(1))
	require.NoError(t, err)
	assert.True(t, w.Pending)
}

func TestWaitTaskStopsWhenMarkedDead(t *testing.T) {
	f := newClusterFixture(t, 1, 1)
	f.start()
	ctx := context.Background()
	done := goRun(func() (cluster.WaitTaskResult, error) { return f.acts(nil).WaitTask(ctx, f.member(1)) })
	f.spy.waitCount(t, f.spy.watch, f.c().NodePath(name(1)), 1, "WaitTask watches its NodeState")
	f.spy.waitCount(t, f.spy.watch, f.c().TaskPath(name(1)), 1, "WaitTask watches its Task")
	_, err := f.acts(nil).Discover(ctx, peer(f.member(2), 1, roles.RoleRunner))
	require.NoError(t, err)
	w, err := await(t, done, "WaitTask")
	require.NoError(t, err)
	assert.Equal(t, cluster.WaitTaskResult{Fenced: true, Role: roles.RoleDeadRunner}, w)
}

func TestWaitTaskIgnoresATaskHeldByAnother(t *testing.T) {
	f := newClusterFixture(t, 2, 1)
	f.start()
	ctx := context.Background()
	tk := f.assign(1, requests(1))
	tk.Holder = name(3)
	_, err := f.c().Put(ctx, f.c().TaskPath(name(1)), tk, -1)
	require.NoError(t, err)
	done := goRun(func() (cluster.WaitTaskResult, error) { return f.acts(nil).WaitTask(ctx, f.member(1)) })
	f.spy.waitCount(t, f.spy.watch, f.c().TaskPath(name(1)), 1, "WaitTask waits")
	notReturned(t, done, "WaitTask on a Task held by another")
	f.assign(1, requests(2)) // the starter assigns a new Task
	w, err := await(t, done, "WaitTask")
	require.NoError(t, err)
	assert.True(t, w.Pending)
}

func TestWaitTaskHonoursContext(t *testing.T) {
	f := newClusterFixture(t, 1, 1)
	f.start()
	ctx, cancel := context.WithCancel(context.Background())
	done := goRun(func() (cluster.WaitTaskResult, error) { return f.acts(nil).WaitTask(ctx, f.member(1)) })
	f.spy.waitCount(t, f.spy.watch, f.c().TaskPath(name(1)), 1, "WaitTask waits")
	cancel()
	_, err := await(t, done, "WaitTask")
	require.ErrorIs(t, err, context.Canceled)
}
