package activities_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/cluster"
	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/metadata"
	"github.com/batoncrawl/baton/activities/runner"
	"github.com/batoncrawl/baton/roles"
)

// A page with a 3 MiB <title> cannot poison the Task znode (ZooKeeper
// refuses a znode over 1 MiB, and the write would be retried for ever):
// the result is recorded, with the title cut, and the Task stays within
// runner.DefaultMaxTaskBytes.
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
	a := f.acts(crawl.NewEngine())
	a.Options = o
	res, err := a.RunTask(context.Background(), cluster.RunTaskInput{Member: f.member(1)})
	require.NoError(t, err)
	assert.Equal(t, roles.RunningResult{SuccessCount: 2}, res.Result)
	tk := f.task(1)
	assert.LessOrEqual(t, len(metadata.Encode(tk)), runner.DefaultMaxTaskBytes)
	require.Len(t, tk.ResultDetail, 2)
	for _, d := range tk.ResultDetail {
		assert.Equal(t, roles.TaskDone, d.State)
		assert.LessOrEqual(t, len(d.Response), crawl.MaxTitleBytes)
		assert.True(t, strings.HasPrefix(d.Response, "TTTT"), "%.20q", d.Response)
	}
}

// hugeFetcher answers every request with a 3 MiB title (a Fetcher that
// does not bound it as the engine does).
type hugeFetcher struct{ noSitemaps }

func (hugeFetcher) Fetch(_ context.Context, req roles.Request, _ crawl.Auth, _ int, _ crawl.Options) crawl.Page {
	return crawl.Page{StatusCode: 200, Title: strings.Repeat("r", 3<<20), Bytes: 3 << 20}
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
	res, err := a.RunTask(context.Background(), cluster.RunTaskInput{Member: f.member(1)})
	require.NoError(t, err)
	assert.Equal(t, roles.RunningResult{SuccessCount: 40}, res.Result)
	tk := f.task(1)
	assert.LessOrEqual(t, len(metadata.Encode(tk)), 16<<10)
	ids := taskIDs(tk)
	require.NotEmpty(t, ids)
	assert.Less(t, len(ids), 40, "older details dropped")
	assert.Equal(t, 39, ids[len(ids)-1], "the newest details are kept")
	for _, d := range tk.ResultDetail {
		assert.LessOrEqual(t, len(d.Response), runner.MaxDetailResponse)
	}
}
