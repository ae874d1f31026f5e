package activities

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/metadata"
	"github.com/batoncrawl/baton/roles"
)

// A page with a 3 MiB <title> cannot poison the Task znode (ZooKeeper
// refuses a znode over 1 MiB, and the write would be retried for ever):
// the result is recorded, with the title cut, and the Task stays within
// DefaultMaxTaskBytes.
func TestRunTaskHugeTitleFitsTheZnode(t *testing.T) {
	title := strings.Repeat("T", 3<<20)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, "<html><head><title>%s</title></head></html>", title)
	}))
	defer srv.Close()
	f := newClusterFixture(t, 1, 1)
	f.start()
	f.assign(1, []roles.Request{{TaskID: 1, URL: srv.URL + "/a"}, {TaskID: 2, URL: srv.URL + "/b"}})
	o := crawl.DefaultOptions()
	o.IgnoreRobots = true
	res, err := f.acts(EngineFetcher{Engine: crawl.NewEngine(), Options: o}).RunTask(context.Background(), RunTaskInput{Member: f.member(1)})
	require.NoError(t, err)
	assert.Equal(t, roles.RunningResult{SuccessCount: 2}, res.Result)
	tk := f.task(1)
	assert.LessOrEqual(t, len(metadata.Encode(tk)), DefaultMaxTaskBytes)
	require.Len(t, tk.ResultDetail, 2)
	for _, d := range tk.ResultDetail {
		assert.Equal(t, roles.TaskDone, d.State)
		assert.LessOrEqual(t, len(d.Response), crawl.MaxTitleBytes)
		assert.True(t, strings.HasPrefix(d.Response, "TTTT"), "%.20q", d.Response)
	}
}

// hugeFetcher answers every request with a 3 MiB excerpt and error.
type hugeFetcher struct{}

func (hugeFetcher) Fetch(_ context.Context, req roles.Request, _ roles.Task) FetchResult {
	return FetchResult{StatusCode: 200, Response: strings.Repeat("r", 3<<20), Bytes: 3 << 20}
}

// Whatever a Fetcher returns, a Runner's Task stays within its cap: each
// detail's strings are bounded, and with --max-result-detail 0 the
// oldest details make room (running_result still counts every result).
func TestRunTaskBoundsResultDetails(t *testing.T) {
	f := newClusterFixture(t, 1, 1)
	f.start()
	f.assign(1, requests(40))
	a := f.acts(hugeFetcher{})
	a.MaxResultDetail = 0
	a.MaxTaskBytes = 16 << 10
	res, err := a.RunTask(context.Background(), RunTaskInput{Member: f.member(1)})
	require.NoError(t, err)
	assert.Equal(t, roles.RunningResult{SuccessCount: 40}, res.Result)
	tk := f.task(1)
	assert.LessOrEqual(t, len(metadata.Encode(tk)), 16<<10)
	ids := taskIDs(tk)
	require.NotEmpty(t, ids)
	assert.Less(t, len(ids), 40, "older details dropped")
	assert.Equal(t, 39, ids[len(ids)-1], "the newest details are kept")
	for _, d := range tk.ResultDetail {
		assert.LessOrEqual(t, len(d.Response), maxDetailResponse)
	}
}

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
