package activities_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/cluster"
	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/activities/telemetry/prommetrics"
	"github.com/batoncrawl/baton/roles"
)

// metered gives the fixture's activities Baton's metrics on a registry of
// their own.
func metered(t *testing.T, a *acts) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := prommetrics.New(reg)
	require.NoError(t, err)
	a.Metrics = m
	return reg
}

// sample returns the value of the series name{labels} (a histogram's
// sample count), and whether it exists.
func sample(t *testing.T, reg *prometheus.Registry, name string, labels ...string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				if !hasLabel(m, labels[i], labels[i+1]) {
					continue next
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue(), true
			case m.Gauge != nil:
				return m.Gauge.GetValue(), true
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount()), true
			}
		}
	}
	return 0, false
}

func hasLabel(m *dto.Metric, k, v string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == k && l.GetValue() == v {
			return true
		}
	}
	return false
}

func value(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	v, ok := sample(t, reg, name, labels...)
	require.True(t, ok, "no series %s%v", name, labels)
	return v
}

// statusFetcher answers each request with the status its path ends in
// ("/s/404"), 200 otherwise, and fails requests to "/down".
type statusFetcher struct{ noSitemaps }

func (statusFetcher) Fetch(_ context.Context, req roles.Request, _ crawl.Auth, _ int, _ crawl.Options) crawl.Page {
	switch {
	case strings.HasSuffix(req.URL, "/down"):
		return crawl.Page{Error: context.DeadlineExceeded.Error(), DurationMS: time.Second.Milliseconds()}
	case strings.Contains(req.URL, "/s/"):
		code, _ := strconv.Atoi(req.URL[strings.LastIndex(req.URL, "/")+1:])
		return crawl.Page{StatusCode: code, Bytes: 3, DurationMS: 10}
	}
	return crawl.Page{StatusCode: 200, Bytes: 100, DurationMS: 20}
}

func TestRunTaskCountsPages(t *testing.T) {
	f := newClusterFixture(t, 1, 1)
	f.start()
	a := f.acts(statusFetcher{})
	reg := metered(t, a)
	f.assign(1, []roles.Request{
		{TaskID: 0, URL: "http://example.test/a", Method: "GET"},
		{TaskID: 1, URL: "http://example.test/b", Method: "GET"},
		{TaskID: 2, URL: "http://example.test/s/301", Method: "GET"},
		{TaskID: 3, URL: "http://example.test/s/404", Method: "GET"},
		{TaskID: 4, URL: "http://example.test/s/503", Method: "GET"},
		{TaskID: 5, URL: "http://example.test/down", Method: "GET"},
		{TaskID: 6, URL: "ftp://example.test/file", Method: "GET"}, // invalid: failed without a fetch
	})

	res, err := a.RunTask(context.Background(), cluster.RunTaskInput{Member: f.member(1)})
	require.NoError(t, err)
	require.Equal(t, 7, res.Ran)

	for class, want := range map[string]float64{"2xx": 2, "3xx": 1, "4xx": 1, "5xx": 1, "error": 2} {
		assert.Equal(t, want, value(t, reg, "baton_pages_total", "class", class), "class %s", class)
	}
	assert.Equal(t, float64(2*100+3*3), value(t, reg, "baton_page_bytes_total"))
	assert.Equal(t, float64(6), value(t, reg, "baton_fetch_duration_seconds"), "fetches timed (not the invalid request)")
	assert.Equal(t, float64(0), value(t, reg, "baton_tasks_in_flight"), "the finished Task left")
}

func TestRunTaskCountsTaskInFlight(t *testing.T) {
	f := newClusterFixture(t, 1, 1)
	f.start()
	gate := newGate()
	a := f.acts(gate)
	reg := metered(t, a)
	f.assign(1, requests(2))
	done := goRun(func() (cluster.RunTaskResult, error) {
		return a.RunTask(context.Background(), cluster.RunTaskInput{Member: f.member(1)})
	})
	gate.next(t)
	assert.Equal(t, float64(1), value(t, reg, "baton_tasks_in_flight"))
	gate.ok(t)
	gate.next(t)
	gate.ok(t)
	_, err := await(t, done, "RunTask")
	require.NoError(t, err)
	assert.Equal(t, float64(0), value(t, reg, "baton_tasks_in_flight"))
	assert.Equal(t, float64(2), value(t, reg, "baton_pages_total", "class", "2xx"))
}

func TestFailoverMetrics(t *testing.T) {
	f := newClusterFixture(t, 2, 1)
	f.start()
	now := t0.Add(time.Minute)
	f.clock.Set(now)
	f.beat(1, now.Add(-200*time.Millisecond), roles.HeartHealthy)
	f.beat(2, now, roles.HeartHealthy)
	a := f.acts(nil)
	reg := metered(t, a)

	// While watching, each runner's heartbeat age is exported.
	ctx, cancel := context.WithCancel(context.Background())
	watching := goRun(func() (cluster.WatchResult, error) {
		return a.WatchRunners(ctx, cluster.WatchInput{Member: f.member(3), Free: 1})
	})
	deadline := time.Now().Add(waitLimit)
	for {
		if v, ok := sample(t, reg, "baton_peer_heartbeat_age_seconds", "peer", name(1)); ok {
			assert.InDelta(t, 0.2, v, 1e-9)
			break
		}
		require.True(t, time.Now().Before(deadline), "no heartbeat age exported for %s", name(1))
		time.Sleep(time.Millisecond)
	}
	assert.Equal(t, float64(0), value(t, reg, "baton_peer_heartbeat_age_seconds", "peer", name(2)))
	cancel()
	_, err := await(t, watching, "WatchRunners")
	require.ErrorIs(t, err, context.Canceled)
	_, ok := sample(t, reg, "baton_peer_heartbeat_age_seconds", "peer", name(1))
	assert.False(t, ok, "a watch that ended exports no ages")

	// Runner 2 dies: detected after its heartbeat age, claimed once.
	f.beat(2, now.Add(-3*time.Second), roles.HeartHealthy)
	w, err := a.WatchRunners(context.Background(), cluster.WatchInput{Member: f.member(3), Free: 1})
	require.NoError(t, err)
	require.Equal(t, name(2), w.Dead)
	assert.Equal(t, float64(1), value(t, reg, "baton_detection_seconds"))
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == "baton_detection_seconds" {
			assert.InDelta(t, 3.0, mf.GetMetric()[0].GetHistogram().GetSampleSum(), 1e-9)
		}
	}
	in := cluster.PeerInput{Member: f.member(3), Dead: w.Dead, DeadRole: w.DeadRole}
	d, err := a.Discover(context.Background(), in)
	require.NoError(t, err)
	require.True(t, d.Claimed)
	_, err = a.Discover(context.Background(), in) // a retry claims nothing new
	require.NoError(t, err)
	assert.Equal(t, float64(1), value(t, reg, "baton_failovers_total", "kind", "runner"))
	assert.Equal(t, float64(0), value(t, reg, "baton_failovers_total", "kind", "backup"))
}

// syncBuffer is a bytes.Buffer safe for the concurrent writes of a logger.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// lines decodes the JSON log lines written so far.
func (s *syncBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(s.b.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m), "log line %q", l)
		out = append(out, m)
	}
	return out
}

// jsonLogs gives a the logger a worker of instance i has, in JSON, into a
// buffer.
func jsonLogs(a *acts, i int) *syncBuffer {
	buf := &syncBuffer{}
	a.Log = slog.New(slog.NewJSONHandler(buf, nil)).With("instance", name(i), "group", group)
	return buf
}

func TestRunTaskLogsCarryInstanceRoleJobAndTask(t *testing.T) {
	f := newClusterFixture(t, 1, 1)
	f.start()
	a := f.acts(nil)
	fb := &fakeBatches{outcome: jobs.BatchOutcome{Success: 2, Ran: 2}}
	a.Batches = fb
	logs := jsonLogs(a, 1)
	ctx := context.Background()
	tk := f.assignBatch(1, "job-1", "job-1-b000000", 2)

	_, err := a.RunTask(ctx, cluster.RunTaskInput{Member: f.member(1)})
	require.NoError(t, err)

	var run []map[string]any
	for _, l := range logs.lines(t) {
		for _, k := range []string{"instance", "role"} {
			assert.Contains(t, l, k, "line %v", l)
		}
		if l["msg"] == "running task" || l["msg"] == "task finished" {
			run = append(run, l)
		}
	}
	require.Len(t, run, 2, "RunTask's lines")
	for _, l := range run {
		assert.Equal(t, name(1), l["instance"])
		assert.Equal(t, "runner", l["role"])
		assert.Equal(t, "job-1", l["job"])
		assert.Equal(t, "job-1-b000000", l["batch"])
		assert.Equal(t, name(1)+"@"+jsonNumber(tk.Epoch), l["task"])
		assert.Equal(t, name(1), l["task_owner"])
		assert.EqualValues(t, tk.Epoch, l["epoch"])
	}
}

func jsonNumber(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

func TestActivityLogsCarryTheirRole(t *testing.T) {
	f := newClusterFixture(t, 2, 1)
	f.start()
	now := t0.Add(time.Minute)
	f.clock.Set(now)
	f.beat(1, now, roles.HeartHealthy)
	f.beat(2, now.Add(-10*time.Second), roles.HeartHealthy)
	a := f.acts(nil)
	logs := jsonLogs(a, 3)
	ctx := context.Background()

	w, err := a.WatchRunners(ctx, cluster.WatchInput{Member: f.member(3), Free: 1})
	require.NoError(t, err)
	in := cluster.PeerInput{Member: f.member(3), Dead: w.Dead, DeadRole: w.DeadRole}
	_, err = a.Discover(ctx, in)
	require.NoError(t, err)
	_, err = a.Activate(ctx, in)
	require.NoError(t, err)

	roleOf := map[string]string{}
	for _, l := range logs.lines(t) {
		msg, _ := l["msg"].(string)
		role, _ := l["role"].(string)
		roleOf[msg] = role
		assert.Equal(t, name(3), l["instance"])
	}
	assert.Equal(t, map[string]string{
		"peer declared dead":   "backup-runner",
		"discovered dead peer": "backup-runner",
		"activated":            "runner", // it took the dead runner's place
	}, roleOf)
}

func TestLogRoleFallsBackToTheLastOneSeen(t *testing.T) {
	a := newActs(&cluster.Deps{}, nil)
	logs := jsonLogs(a, 1)
	ctx := context.Background()
	a.Logger(ctx).Info("before")
	a.Seen(roles.RoleBackup)
	a.Logger(ctx).Info("after")
	a.Logger(cluster.LogWith(ctx, roles.RoleRunner, "job", "j")).Info("explicit")
	a.Logger(cluster.LogWith(cluster.LogWith(ctx, roles.RoleRunner, "job", "j"), "", "task", "x")).Info("nested")
	got := logs.lines(t)
	require.Len(t, got, 4)
	assert.Equal(t, "unknown", got[0]["role"])
	assert.Equal(t, "backup-runner", got[1]["role"])
	assert.Equal(t, "runner", got[2]["role"])
	assert.Equal(t, "j", got[2]["job"])
	assert.Equal(t, "runner", got[3]["role"])
	assert.Equal(t, "j", got[3]["job"])
	assert.Equal(t, "x", got[3]["task"])
}
