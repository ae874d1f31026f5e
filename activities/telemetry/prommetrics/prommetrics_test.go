package prommetrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/batoncrawl/baton/activities/telemetry"
)

// scrape returns the registry's /metrics page in the text format.
func scrape(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestScrapeHasEverySeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.Page("shop", 200, false, 1000, 20*time.Millisecond)
	m.Page("shop", 200, false, 500, 30*time.Millisecond)
	m.Page("shop", 301, false, 0, time.Millisecond)
	m.Page("shop", 404, true, 9, time.Millisecond)
	m.Page("news", 503, true, 5, time.Millisecond)
	m.Page("", 0, true, 0, 15*time.Second)
	m.PageError("news")
	m.Retries("shop", 3)
	m.Retries("shop", 1) // no retry
	m.Retries("", 2)
	m.RobotsRefusal("news")
	m.Queued("shop", 42)
	m.Failover(telemetry.KindRunner)
	m.Failover(telemetry.KindRunner)
	m.Failover(telemetry.KindBackup)
	m.Detected(1200 * time.Millisecond)
	m.PeerAge("sc-crawler_1", 250*time.Millisecond)
	m.PeerAge("sc-crawler_2", 3*time.Second)
	m.ForgetPeer("sc-crawler_2")
	done := m.TaskStarted()
	m.TaskStarted()
	done()

	out := scrape(t, reg)
	for _, want := range []string{
		`baton_pages_total{class="2xx",crawl_job="shop"} 2`,
		`baton_pages_total{class="3xx",crawl_job="shop"} 1`,
		`baton_pages_total{class="4xx",crawl_job="shop"} 1`,
		`baton_pages_total{class="5xx",crawl_job="news"} 1`,
		`baton_pages_total{class="error",crawl_job=""} 1`,
		`baton_pages_total{class="error",crawl_job="news"} 1`,
		`baton_page_bytes_total{crawl_job="shop"} 1509`,
		`baton_page_bytes_total{crawl_job="news"} 5`,
		`baton_fetch_duration_seconds_count{crawl_job="shop"} 4`,
		`baton_fetch_duration_seconds_count{crawl_job=""} 1`,
		`baton_fetch_duration_seconds_bucket{crawl_job="shop",le="0.025"} 3`,
		`baton_retries_total{crawl_job="shop"} 2`,
		`baton_retries_total{crawl_job=""} 1`,
		`baton_robots_refusals_total{crawl_job="news"} 1`,
		`baton_frontier_queued_urls{crawl_job="shop"} 42`,
		`baton_failovers_total{kind="runner"} 2`,
		`baton_failovers_total{kind="backup"} 1`,
		`baton_detection_seconds_count 1`,
		`baton_detection_seconds_sum 1.2`,
		`baton_peer_heartbeat_age_seconds{peer="sc-crawler_1"} 0.25`,
		`baton_tasks_in_flight 1`,
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("scrape lacks %q", want)
		}
	}
	if strings.Contains(out, `peer="sc-crawler_2"`) {
		t.Error("a forgotten peer is still exported")
	}
	if t.Failed() {
		t.Logf("scrape:\n%s", out)
	}
}

// The fail-over kinds and the gauges are there from the start; no
// series is made up for no job (every worker exported empty
// crawl_job="" series of pages, bytes and fetch time it never fetched).
func TestSeriesBeforeFirstObservation(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := New(reg); err != nil {
		t.Fatal(err)
	}
	out := scrape(t, reg)
	for _, want := range []string{`baton_failovers_total{kind="backup"} 0`, `baton_tasks_in_flight 0`} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("scrape lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "crawl_job=") {
		t.Errorf("job series before any page:\n%s", out)
	}
}

// A job's series are exported while it is active here and dropped once it
// has been idle for the grace period; a queued gauge not refreshed within
// QueuedTTL is dropped sooner (another worker supervises the job now).
// Every past job stayed a series of every Runner before.
func TestJobSeriesDroppedAfterGrace(t *testing.T) {
	reg := prometheus.NewRegistry()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m, err := NewWith(reg, telemetry.Options{JobGrace: 10 * time.Minute, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	m.Page("old", 200, false, 10, time.Millisecond)
	m.Retries("old", 2)
	m.RobotsRefusal("old")
	m.Queued("old", 5)
	m.Page("", 200, false, 10, time.Millisecond) // a Task's page
	now = now.Add(time.Minute)
	out := scrape(t, reg)
	for _, want := range []string{`crawl_job="old"`, `crawl_job=""`} {
		if !strings.Contains(out, want) {
			t.Errorf("an active job's series are gone: %s", want)
		}
	}
	if strings.Contains(out, "baton_frontier_queued_urls{") {
		t.Errorf("a queued gauge not refreshed for %v is still exported", time.Minute)
	}
	now = now.Add(5 * time.Minute)
	m.Page("new", 200, false, 10, time.Millisecond)
	m.Queued("new", 7)
	now = now.Add(5*time.Minute + time.Second) // "old" and the Task idle for 11 min, "new" for 5
	out = scrape(t, reg)
	if strings.Contains(out, `crawl_job="old"`) || strings.Contains(out, `crawl_job=""`) {
		t.Errorf("idle jobs' series still exported:\n%s", out)
	}
	if !strings.Contains(out, `baton_pages_total{class="2xx",crawl_job="new"} 1`+"\n") {
		t.Errorf("the active job's series are gone:\n%s", out)
	}
	// A job active again starts its series again.
	m.Page("old", 200, false, 10, time.Millisecond)
	if out = scrape(t, reg); !strings.Contains(out, `baton_pages_total{class="2xx",crawl_job="old"} 1`+"\n") {
		t.Errorf("a job active again:\n%s", out)
	}
}

func TestRegisterTwiceFails(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := New(reg); err != nil {
		t.Fatal(err)
	}
	if _, err := New(reg); err == nil {
		t.Fatal("second New on the same registry succeeded")
	}
}
