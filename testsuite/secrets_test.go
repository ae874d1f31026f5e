package testsuite_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/batoncrawl/baton/testsuite"
	"github.com/batoncrawl/baton/workflows"
)

// TestCrawlSecretsStaySecret submits a job with cookies, authorization and
// headers (from the command line and from files) to a real cluster. The site
// receives every one of them; none of their values is in the job's workflow
// history (every event, read through the Temporal client), in ZooKeeper
// (every znode under the cluster's root), in the store's files, in a
// worker's log or in the CLI's output.
func TestCrawlSecretsStaySecret(t *testing.T) {
	secrets := []string{"cookie-value-7f3a", "file-cookie-91bc", "bearer-token-5d2e", "api-key-c0ffee", "trace-value-a11ce"}
	var mu sync.Mutex
	var got []string
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r) // robots.txt requests carry the job's headers, not its cookies or authorization
			return
		}
		mu.Lock()
		got = append(got, r.Header.Get("Cookie")+" | "+r.Header.Get("Authorization")+" | "+r.Header.Get("X-Api-Key")+" | "+r.Header.Get("X-Trace"))
		mu.Unlock()
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte(`<html><title>ok</title><a href="/b">b</a></html>`))
	}))
	t.Cleanup(site.Close)

	c := testsuite.NewCluster(t, 1, 0, testsuite.FastTimers)
	c.StartAll()
	c.WaitElected(90 * time.Second)
	dir := t.TempDir()
	cookieFile := filepath.Join(dir, "cookies")
	headerFile := filepath.Join(dir, "headers")
	require.NoError(t, os.WriteFile(cookieFile, []byte("pref="+secrets[1]+"\n"), 0o600))
	require.NoError(t, os.WriteFile(headerFile, []byte("X-Api-Key: "+secrets[3]+"\n"), 0o600))
	r := runCLI(t, c.Starter, nil, append(c.StarterArgs(), "crawl", "--id", "secret-job", "--follow", "--wait",
		"--cookie", "session="+secrets[0], "--cookie-file", cookieFile, "--authorization", "Bearer="+secrets[2],
		"--header-file", headerFile, "--header", "X-Trace: "+secrets[4], site.URL+"/a")...)
	require.Equal(t, 0, r.code, r.stderr)
	r2 := runCLI(t, c.Starter, nil, append(c.StarterArgs(), "status", "secret-job", "--output", "json")...)
	require.Equal(t, 0, r2.code, r2.stderr)
	r3 := runCLI(t, c.Starter, nil, append(c.StarterArgs(), "results", "secret-job")...)
	require.Equal(t, 0, r3.code, r3.stderr)

	mu.Lock()
	require.NotEmpty(t, got)
	for _, h := range got {
		for _, s := range secrets {
			assert.Contains(t, h, s, "a request of the job lacks a secret: %s", h)
		}
	}
	mu.Unlock()

	where := secretPlaces(t, c, "secret-job", r.stdout+r.stderr+r2.stdout+r2.stderr+r3.stdout+r3.stderr)

	// A CLI with another key than the group's workers is refused before it
	// submits anything (no Runner could open what it sealed).
	other := filepath.Join(dir, "other.key")
	require.NoError(t, os.WriteFile(other, []byte(strings.Repeat("ab", 32)+"\n"), 0o600))
	r4 := runCLI(t, c.Starter, nil, append(c.StarterArgs(), "crawl", "--id", "other-key", "--secrets-key-file", other,
		"--cookie", "session="+secrets[0], site.URL+"/a")...)
	assert.Equal(t, 2, r4.code, r4.stderr)
	assert.Contains(t, r4.stderr, "another secrets key")
	where["CLI output"] += r4.stdout + r4.stderr
	for name, text := range where {
		for _, s := range secrets {
			assert.NotContains(t, text, s, "a secret value in the %s", name)
		}
	}
}

// secretPlaces gathers where a secret must never be: the CLI's output
// (cli), the job's workflow history (every event, read through the
// Temporal client), every znode under the cluster's root, the store's
// files and the first worker's log.
func secretPlaces(t *testing.T, c *testsuite.Cluster, job, cli string) map[string]string {
	t.Helper()
	where := map[string]string{"CLI output": cli}
	tc := c.Temporal.Client(t)
	var hist strings.Builder
	it := tc.GetWorkflowHistory(context.Background(), workflows.JobWorkflowID(c.Group, job), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	events := 0
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		hist.WriteString(ev.String())
		events++
	}
	require.NotZero(t, events)
	where["workflow history"] = hist.String()
	conn, _, err := zk.Connect(strings.Split(c.ZKHosts(), ","), 10*time.Second, zk.WithLogInfo(false))
	require.NoError(t, err)
	defer conn.Close()
	var znodes strings.Builder
	var walk func(p string)
	walk = func(p string) {
		data, _, err := conn.Get(p)
		if err == nil {
			znodes.Write(data)
		}
		kids, _, err := conn.Children(p)
		if err != nil {
			return
		}
		for _, k := range kids {
			walk(strings.TrimSuffix(p, "/") + "/" + k)
		}
	}
	walk(c.Root)
	require.NotZero(t, znodes.Len())
	where["ZooKeeper"] = znodes.String()
	require.NoError(t, filepath.Walk(c.DataDir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() && !strings.HasSuffix(p, ".key") {
			data, _ := os.ReadFile(p)
			where["store file "+p] = string(data)
		}
		return nil
	}))
	where["worker log"] = c.Process(1).Logs()
	return where
}
