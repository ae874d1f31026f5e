package activities

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
	f := EngineFetcher{Engine: crawl.NewEngine(), Options: crawl.DefaultOptions()}
	tk := roles.EmptyTask()
	tk.Authorization = map[string]string{"Bearer": "tok"}
	ctx := context.Background()

	r := f.Fetch(ctx, roles.Request{URL: srv.URL + "/a", Method: "POST", Body: []byte(`"x=1"`)}, tk)
	require.NoError(t, r.Err)
	assert.Equal(t, 200, r.StatusCode)
	assert.Equal(t, "Hello", r.Response)
	assert.Equal(t, "POST", gotMethod)
	assert.Equal(t, "x=1", gotBody)
	assert.Equal(t, "Bearer tok", gotAuth)

	r = f.Fetch(ctx, roles.Request{URL: srv.URL + "/missing"}, tk)
	assert.NoError(t, r.Err, "an HTTP status is not a fetch error")
	assert.Equal(t, 404, r.StatusCode)

	r = f.Fetch(ctx, roles.Request{URL: srv.URL + "/private/x"}, tk)
	require.Error(t, r.Err)
	assert.Contains(t, r.Err.Error(), "robots.txt")

	r = f.Fetch(ctx, roles.Request{URL: "http://127.0.0.1:1/"}, tk)
	assert.Error(t, r.Err, "a refused connection is an error")
}
