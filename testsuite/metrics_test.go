package testsuite_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/batoncrawl/baton/testsuite"
)

// scrape GETs a worker's /metrics.
func scrape(url string) (string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(b), nil
}

// A real worker serves the Temporal SDK's metrics and Baton's at
// --metrics-addr; after a Task ran, its pages are counted.
func TestWorkerServesMetrics(t *testing.T) {
	addr := fmt.Sprintf("127.0.0.1:%d", testsuite.FreePort(t))
	c := testsuite.NewCluster(t, 1, 0, testsuite.FastTimers, testsuite.WithWorkerArgs("--metrics-addr", addr))
	site := testsuite.NewSite(t, 0)
	p := c.Start(1)
	c.WaitElected(electTimeout)

	const n = 5
	urls := append(site.URLs("p", n-1), site.URL+"/missing/1")
	c.Assign(1, urls)
	c.WaitTaskDone(taskTimeout, 1)

	url := "http://" + addr + "/metrics"
	want := []string{
		`baton_pages_total{class="2xx",crawl_job=""} 4`,
		`baton_pages_total{class="4xx",crawl_job=""} 1`,
		`baton_fetch_duration_seconds_count{crawl_job=""} 5`,
		`baton_tasks_in_flight 0`,
		"baton_page_bytes_total ",
		"baton_detection_seconds_count 0",
		`baton_failovers_total{kind="runner"} 0`,
		"temporal_request_total{",
		"temporal_activity_execution_latency_seconds_bucket{",
		`activity_type="RunTask"`,
		"go_goroutines ",
	}
	var out string
	testsuite.Eventually(t, 30*time.Second, "/metrics to show the Task", func() (bool, error) {
		var err error
		if out, err = scrape(url); err != nil {
			return false, err
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				return false, fmt.Errorf("no %q yet", w)
			}
		}
		return true, nil
	})
	if strings.Contains(p.Logs(), "temporal metric not exported") {
		t.Errorf("the worker could not export some Temporal metrics:\n%s", p.LogTail(40))
	}
}
