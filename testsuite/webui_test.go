//go:build linux

package testsuite_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"image/png"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"

	"github.com/batoncrawl/baton/testsuite"
	"github.com/batoncrawl/baton/workflows"
)

// findChromium returns the headless browser: $BATON_CHROMIUM, else
// chromium on $PATH (Debian's package, installed by `make deps`).
func findChromium(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("BATON_CHROMIUM"); bin != "" {
		if _, err := os.Stat(bin); err == nil {
			return bin
		}
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if bin, err := exec.LookPath(name); err == nil {
			return bin
		}
	}
	if os.Getenv(testsuite.EnvAllowSkip) == "1" {
		t.Skipf("chromium not installed; skipping because %s=1", testsuite.EnvAllowSkip)
	}
	t.Fatalf("chromium not installed (nor $BATON_CHROMIUM): run make deps (deployments/scripts/install-chromium.sh), "+
		"or set %s=1 to skip tests that need it", testsuite.EnvAllowSkip)
	return ""
}

// chromium runs headless Chromium on pageURL with extra arguments (e.g.
// --dump-dom or --screenshot=FILE) and returns its stdout. The page gets
// 15 s of virtual time to render (the Web UI is a single-page app that
// loads its data with XHRs). The browser and its helpers are killed
// after 90 s of real time.
func chromium(t *testing.T, bin, pageURL string, args ...string) string {
	t.Helper()
	dir := t.TempDir()
	all := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
		"--user-data-dir=" + filepath.Join(dir, "profile"), "--virtual-time-budget=15000"}, args...)
	all = append(all, pageURL)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, all...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // helpers left behind
	}
	if err != nil {
		tail := stderr.String()
		if len(tail) > 4000 {
			tail = tail[len(tail)-4000:]
		}
		t.Fatalf("chromium %s: %v\n%s", pageURL, err, tail)
	}
	return stdout.String()
}

// uiSite is a tiny site: a home page linking to three pages.
func uiSite(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/":
			fmt.Fprint(w, `<html><title>home</title><h1>Home</h1><a href="/p/1">1</a> <a href="/p/2">2</a> <a href="/p/3">3</a></html>`)
		case "/p/1", "/p/2", "/p/3":
			fmt.Fprintf(w, `<html><title>%s</title><h1>Page %s</h1><a href="/">home</a></html>`, r.URL.Path, r.URL.Path)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// memo decodes a workflow's memo.
func memo(t *testing.T, c *testsuite.Cluster, wid string) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, err := c.Temporal.Client(t).DescribeWorkflowExecution(ctx, wid, "")
	require.NoError(t, err, wid)
	out := map[string]any{}
	for k, p := range d.GetWorkflowExecutionInfo().GetMemo().GetFields() {
		var v any
		require.NoError(t, converter.GetDefaultDataConverter().FromPayload(p, &v), "memo %s of %s", k, wid)
		out[k] = v
	}
	return out
}

// TestWebUIListsJob runs Baton like production and looks at it the way an
// operator does: a 1-runner cluster with ZooKeeper digest credentials
// (ACL'd znodes), the Temporal dev server with its Web UI, a crawl job
// submitted with the starter binary; then headless Chromium opens the Web
// UI's workflow list filtered with BatonJob="uitest" and the page lists the
// job's workflow. It also checks the memos the UI shows (the job's
// description and final counters, the instances' cluster/crawler/role),
// and takes a screenshot of the list (into the test's temporary directory,
// or to $BATON_WEBUI_SCREENSHOT to keep it).
func TestWebUIListsJob(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: skipped in -short mode")
	}
	browser := findChromium(t)
	secret := make([]byte, 12)
	_, _ = rand.Read(secret)
	auth := "baton-ui:" + hex.EncodeToString(secret)
	c := testsuite.NewCluster(t, 1, 0, testsuite.FastTimers, testsuite.WithWebUI(), testsuite.WithZooKeeperAuth(auth))
	ui := c.Temporal.UIAddress()
	require.NotEmpty(t, ui, "the dev server runs with its Web UI")
	site := uiSite(t)
	c.StartAll()
	c.WaitElected(electTimeout)

	starter := func(env []string, args ...string) (string, int) {
		all := append([]string{"--zk-hosts", c.ZKHosts(), "--zk-root", c.Root, "--group", c.Group,
			"--temporal-address", c.Temporal.Address(), "--data-dir", c.DataDir, "--ui-url", ui}, args...)
		cmd := exec.Command(c.Starter, all...)
		cmd.Env = append(os.Environ(), env...)
		out, _ := cmd.CombinedOutput()
		return string(out), cmd.ProcessState.ExitCode()
	}
	withAuth := []string{"BATON_ZK_AUTH=" + auth}

	// The job, submitted and awaited through the CLI.
	const job = "uitest"
	wid := workflows.JobWorkflowID(c.Group, job)
	out, code := starter(withAuth, "crawl", "--id", job, "--wait", "--follow", "--depth", "2",
		"--select", "heading=h1", "--timers", "fast", site.URL+"/")
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "job "+job+" completed: 4 pages")
	assert.Contains(t, out, ui+"/namespaces/default/workflows/"+url.PathEscape(wid), "the Web UI link")
	assert.NotContains(t, out, auth)

	// The cluster's metadata is ACL'd: the CLI reads it with the
	// credentials from the environment, not without them; nor can a plain
	// ZooKeeper client.
	out, code = starter(withAuth, "cluster")
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, testsuite.Name(1))
	out, code = starter(nil, "cluster")
	assert.Equal(t, 1, code, out)
	assert.Contains(t, out, "not authenticated")
	anon, _, err := zk.Connect([]string{c.ZKHosts()}, 10*time.Second, zk.WithLogInfo(false))
	require.NoError(t, err)
	defer anon.Close()
	_, _, err = anon.Get(c.Meta.GroupPath())
	assert.ErrorIs(t, err, zk.ErrNoAuth)

	// The memos.
	jm := memo(t, c, wid)
	assert.Equal(t, []any{site.URL + "/"}, jm["seeds"])
	assert.Equal(t, true, jm["follow"])
	assert.EqualValues(t, 2, jm["depth"])
	assert.EqualValues(t, 1000, jm["max_pages"])
	assert.Equal(t, map[string]any{"heading": "h1"}, jm["selectors"])
	assert.Equal(t, workflows.JobCompleted, jm["state"], "progress upserted at the end")
	assert.EqualValues(t, 4, jm["pages_done"])
	assert.EqualValues(t, 0, jm["pages_failed"])
	name := testsuite.Name(1)
	assert.Equal(t, map[string]any{"cluster": c.Group, "crawler": name, "role": "lifecycle"},
		memo(t, c, workflows.LifecycleID(c.Group, name)))
	assert.Equal(t, map[string]any{"cluster": c.Group, "crawler": name, "role": "runner"},
		memo(t, c, workflows.LifecycleID(c.Group, name)+"/runner"))

	// The filter the README gives finds the job (what the UI lists).
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	query := fmt.Sprintf(`BatonJob = %q`, job)
	resp, err := c.Temporal.Client(t).ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query})
	require.NoError(t, err)
	require.Len(t, resp.Executions, 1)
	assert.Equal(t, wid, resp.Executions[0].Execution.WorkflowId)

	// The Web UI's list, filtered by the job: the browser renders the
	// single-page app and the job's workflow ID is in the table.
	listURL := ui + "/namespaces/default/workflows?query=" + url.QueryEscape(query)
	var dom string
	testsuite.Eventually(t, 3*time.Minute, "the Web UI to list "+wid, func() (bool, error) {
		dom = chromium(t, browser, listURL, "--dump-dom")
		if !strings.Contains(dom, wid) {
			return false, fmt.Errorf("%d bytes of DOM without %s", len(dom), wid)
		}
		return true, nil
	})
	assert.Contains(t, dom, `data-testid="workflows-summary-table-body-cell"`, "the ID is a cell of the workflows table")
	assert.NotContains(t, dom, workflows.LifecycleID(c.Group, name), "the filter keeps the instances' workflows out")

	// The job's Memo tab shows its description and final counters.
	memoURL := fmt.Sprintf("%s/namespaces/default/workflows/%s/%s/memo", ui, url.PathEscape(wid), resp.Executions[0].Execution.RunId)
	dom = chromium(t, browser, memoURL, "--dump-dom")
	for _, key := range []string{"seeds", "selectors", "pages_done", "pages_failed", "state"} {
		assert.Contains(t, dom, `"`+key+`"`, "the Memo tab shows %s", key)
	}

	shot := os.Getenv("BATON_WEBUI_SCREENSHOT")
	if shot == "" {
		shot = filepath.Join(t.TempDir(), "webui.png")
	}
	chromium(t, browser, listURL, "--screenshot="+shot, "--window-size=1400,900", "--hide-scrollbars")
	f, err := os.Open(shot)
	require.NoError(t, err)
	defer f.Close()
	cfg, err := png.DecodeConfig(f)
	require.NoError(t, err, "the screenshot is a PNG")
	assert.Equal(t, 1400, cfg.Width)
	t.Logf("Web UI list of job %s: %s (screenshot %s)", job, listURL, shot)
}
