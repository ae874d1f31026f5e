package testsuite_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/batoncrawl/baton/activities/crawl/demosite"
	"github.com/batoncrawl/baton/testsuite"
	"github.com/batoncrawl/baton/workflows"
)

// With --payload-key-file on the workers and the CLI, the job's URLs and
// options are nowhere in clear in its Temporal history (read without the
// key), the CLI still reads the job's progress (it has the key), and
// `baton codec-server` decodes a payload of the history for the Web UI,
// for the Web UI's origin only.
func TestPayloadsEncrypted(t *testing.T) {
	site := demosite.New(demosite.Config{Pages: 20, Seed: 2})
	srv := httptest.NewServer(site)
	t.Cleanup(srv.Close)
	c := testsuite.NewCluster(t, 1, 0, testsuite.FastTimers, testsuite.WithPayloadKey())
	c.Start(1)
	c.WaitElected(electTimeout)
	marker := "/page/0.html?payload-marker=1"
	p := startCrawl(c, "sealed", srv.URL+marker, "--select", "price=.price", "--timers", "fast")
	require.NoError(t, p.Wait(2*time.Minute), p.Logs())
	require.Equal(t, 0, p.ExitCode(), p.Logs())

	out, code := baton(c, "status", "sealed")
	require.Equal(t, 0, code, out)
	assert.Regexp(t, `STATE\s+completed`, out, "the CLI decodes with the key")

	tc := c.Temporal.Client(t) // no codec: what Temporal stores and shows
	it := tc.GetWorkflowHistory(context.Background(), workflows.JobWorkflowID(c.Group, "sealed"), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var hist strings.Builder
	var firstInput []byte
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		hist.WriteString(ev.String())
		if a := ev.GetWorkflowExecutionStartedEventAttributes(); a != nil && firstInput == nil {
			firstInput, err = protojson.Marshal(a.GetInput())
			require.NoError(t, err)
		}
	}
	require.NotEmpty(t, firstInput)
	for _, clear := range []string{"payload-marker", ".price", srv.URL} {
		assert.NotContains(t, hist.String(), clear, "%q in clear in the history", clear)
	}
	assert.Contains(t, hist.String(), "binary/encrypted")

	// The codec server decodes the workflow's input for the Web UI.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close()
	cs := testsuite.StartProcess(t, testsuite.ProcessSpec{Name: "codec-server", Path: c.Starter,
		Args: append(c.StarterArgs(), "codec-server", "--addr", addr, "--web-ui-origin", "http://127.0.0.1:8233")})
	var resp *http.Response
	testsuite.Eventually(t, 30*time.Second, "codec server answers", func() (bool, error) {
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/decode", bytes.NewReader(firstInput))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Origin", "http://127.0.0.1:8233")
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, nil
		}
		resp = r
		return true, nil
	})
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s\n%s", body, cs.Logs())
	assert.Equal(t, "http://127.0.0.1:8233", resp.Header.Get("Access-Control-Allow-Origin"))
	assert.NotContains(t, string(body), "binary/encrypted", "decoded")

	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/decode", bytes.NewReader(firstInput))
	req.Header.Set("Origin", "http://evil.test")
	r, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	r.Body.Close()
	assert.Equal(t, http.StatusForbidden, r.StatusCode, "another origin may not decode")
}
