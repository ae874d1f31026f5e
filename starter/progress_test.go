package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/batoncrawl/baton/activities/cmdline/exitcode"
	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/activities/metadata"
	"github.com/batoncrawl/baton/roles"
	"github.com/batoncrawl/baton/workflows"
)

func progressOf(state string, seen, queued, recorded int) workflows.JobProgress {
	return workflows.JobProgress{ID: "j", JobState: workflows.JobState{State: state,
		Stats: jobs.Stats{Seen: seen, Queued: queued, Recorded: recorded}}}
}

// A job that follows links grows as it goes: crawl --wait shows no share
// of it until its size is fixed (max_pages seen), then a share that never
// goes back, and 100 % when it completed, refused pages and all. The
// bar must never read 18 % → 5 % → 94 % and end at 95 %.
func TestProgressShareNeverGoesBack(t *testing.T) {
	m := &progressModel{growing: true, maxPages: 200}
	now := time.Now()
	var shown []int
	for i, p := range []workflows.JobProgress{
		progressOf(workflows.JobRunning, 11, 9, 2),
		progressOf(workflows.JobRunning, 40, 38, 2),
		progressOf(workflows.JobRunning, 150, 20, 120),
		progressOf(workflows.JobRunning, 200, 10, 188),
		progressOf(workflows.JobRunning, 200, 0, 190),
		progressOf(workflows.JobCompleted, 200, 0, 190), // 10 refused by robots.txt
	} {
		m.observe(now.Add(time.Duration(i)*time.Second), p)
		if pc, ok := m.percent(); ok {
			shown = append(shown, pc)
		} else {
			assert.Less(t, i, 3, "the size is known once max_pages URLs were seen")
			assert.NotContains(t, m.describe(p), "%", "no share of a job still growing")
		}
	}
	assert.Equal(t, []int{94, 95, 100}, shown)
	assert.IsNonDecreasing(t, shown)

	// Seeds only: the size is known from the start.
	m = &progressModel{}
	m.observe(now, progressOf(workflows.JobRunning, 50, 40, 10))
	pc, ok := m.percent()
	assert.True(t, ok)
	assert.Equal(t, 20, pc)
	assert.Contains(t, m.describe(progressOf(workflows.JobRunning, 50, 40, 10)), "done 10 of 50 (20%)")
	m.observe(now.Add(time.Second), progressOf(workflows.JobRunning, 50, 40, 8)) // a re-run took failed pages out
	pc, _ = m.percent()
	assert.Equal(t, 20, pc, "never goes back")
}

// The rate is taken over the last rateWindow: group commits make the
// count jump every few polls, and the rate between two polls swung
// between 14 and 166 pages/s; over the window it stays near the real one.
func TestProgressRateIsSteady(t *testing.T) {
	m := &progressModel{growing: true}
	now := time.Now()
	recorded := 0
	var rates []float64
	for i := range 100 { // polls 300 ms apart, a commit of 50 pages every third poll: 55.6 pages/s
		if i%3 == 2 {
			recorded += 50
		}
		at := now.Add(time.Duration(i) * 300 * time.Millisecond)
		m.observe(at, progressOf(workflows.JobRunning, recorded+100, 100, recorded))
		if r, ok := m.rate(); ok && at.Sub(now) >= 5*time.Second {
			rates = append(rates, r)
		}
	}
	require.NotEmpty(t, rates)
	for _, r := range rates {
		assert.InDelta(t, 55.6, r, 55.6*0.15, "rate %v", r)
	}
	m = &progressModel{}
	m.observe(now, progressOf(workflows.JobRunning, 10, 10, 0))
	m.observe(now.Add(time.Second), progressOf(workflows.JobRunning, 10, 5, 5))
	_, ok := m.rate()
	assert.False(t, ok, "no rate before rateMinSpan")
}

// After a fail-over the job's counters are not read again until its
// JobAwait runs on another worker: the answers repeat a count read
// seconds ago. The rate stays what the pages were recorded at, instead
// of falling as if none were recorded meanwhile.
func TestProgressRateIgnoresCountsNotReadAgain(t *testing.T) {
	m := &progressModel{growing: true}
	start := time.Now()
	const perSecond = 100
	read := func(at time.Time) workflows.JobProgress {
		n := int(at.Sub(start).Seconds() * perSecond)
		p := progressOf(workflows.JobRunning, n+100, 100, n)
		p.StatsAt = at
		return p
	}
	var last workflows.JobProgress
	for i := range 60 { // polls 300 ms apart; the job reads its counters every 0.6 s but in a 4 s stall
		now := start.Add(time.Duration(i) * 300 * time.Millisecond)
		stalled := now.Sub(start) >= 9*time.Second && now.Sub(start) < 13*time.Second
		if i%2 == 0 && !stalled {
			last = read(now)
		}
		m.observe(now, last)
		if r, ok := m.rate(); ok && now.Sub(start) >= 3*time.Second {
			assert.InDelta(t, perSecond, r, perSecond*0.15, "rate %v at %v", r, now.Sub(start))
		}
	}
}

// fakeTemporal is the part of a Temporal client crawl --wait uses: the
// progress query (answered after queryDelay, or never within its 2 s
// when queryDelay is longer, as when no worker answers), the job's result
// (when result is closed) and the health check.
type fakeTemporal struct {
	client.Client
	queryDelay time.Duration
	mu         sync.Mutex
	progress   workflows.JobProgress
	result     chan struct{}
}

type encoded struct{ v any }

func (e encoded) HasValue() bool { return true }
func (e encoded) Get(p any) error {
	b, err := json.Marshal(e.v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, p)
}

func (f *fakeTemporal) QueryWorkflow(ctx context.Context, _, _, _ string, _ ...any) (converter.EncodedValue, error) {
	select {
	case <-time.After(f.queryDelay):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return encoded{f.progress}, nil
}

func (f *fakeTemporal) CheckHealth(context.Context, *client.CheckHealthRequest) (*client.CheckHealthResponse, error) {
	return &client.CheckHealthResponse{}, nil
}

func (f *fakeTemporal) GetWorkflow(_ context.Context, _, _ string) client.WorkflowRun {
	return fakeRun{f: f}
}

type fakeRun struct {
	client.WorkflowRun
	f *fakeTemporal
}

func (r fakeRun) GetID() string    { return "wid" }
func (r fakeRun) GetRunID() string { return "run" }
func (r fakeRun) Get(ctx context.Context, p any) error {
	select {
	case <-r.f.result:
	case <-ctx.Done():
		return ctx.Err()
	}
	r.f.mu.Lock()
	defer r.f.mu.Unlock()
	return encoded{r.f.progress}.Get(p)
}
func (r fakeRun) GetWithOptions(ctx context.Context, p any, _ client.WorkflowRunGetOptions) error {
	return r.Get(ctx, p)
}

// liveGroup is memCluster with fresh heartbeats: its runner and backup
// are live now.
func liveGroup(t *testing.T) *metadata.Cluster {
	t.Helper()
	c := memCluster(t)
	hb := roles.NewHeartbeat(time.Now(), roles.FastTimers())
	hb.HealthyState = roles.HeartHealthy
	for _, n := range []string{"sc-crawler_1", "sc-crawler_2"} {
		_, err := c.Put(context.Background(), c.HeartbeatPath(n), hb, metadata.AnyVersion)
		require.NoError(t, err)
	}
	return c
}

// --wait-for-runners 1s gives up 1 s after the group was seen without a
// live Runner, however long the progress query takes (no worker answers
// it then: it waits out its 2 s); it gave up after 7–12 s for 5 s.
func TestWaitForRunnersGivesUpOnTime(t *testing.T) {
	f := &fakeTemporal{queryDelay: time.Hour, result: make(chan struct{})}
	co := &crawlOutput{o: new(output), waitForRunners: time.Second}
	var errw bytes.Buffer
	start := time.Now()
	_, err := co.wait(context.Background(), f, "baton-job/g/j", &runnerCheck{c: memCluster(t), close: func() {}, job: "j"}, &errw, &errw)
	took := time.Since(start)
	require.Error(t, err)
	assert.Equal(t, exitcode.NoRunner, exitcode.Of(err), err.Error())
	assert.Less(t, took, 1400*time.Millisecond, "gave up after %v", took)
	assert.GreaterOrEqual(t, took, time.Second)
	assert.Contains(t, errw.String(), "giving up in 1s")
}

// A fail-over while crawl --wait waits is said: the dead Runner, the
// Backup Runner that took its work over, and that the job goes on.
func TestWaitSaysFailover(t *testing.T) {
	c := liveGroup(t)
	f := &fakeTemporal{queryDelay: time.Millisecond, result: make(chan struct{}),
		progress: progressOf(workflows.JobRunning, 10, 5, 5)}
	co := &crawlOutput{o: new(output), waitForRunners: time.Minute}
	var errw syncBuffer
	done := make(chan error, 1)
	go func() {
		_, err := co.wait(context.Background(), f, "baton-job/g/j", &runnerCheck{c: c, close: func() {}, job: "j"}, &errw, &errw)
		done <- err
	}()
	time.Sleep(1500 * time.Millisecond) // a Runner check saw the group as it was
	ctx := context.Background()
	_, err := c.UpdateGroup(ctx, func(gs *roles.GroupState) error {
		gs.CurrentRunner, gs.CurrentBackup, gs.FailRunner, gs.FailCrawler = []string{"sc-crawler_2"}, []string{}, []string{"sc-crawler_1"}, []string{"sc-crawler_1"}
		return nil
	})
	require.NoError(t, err)
	f.mu.Lock()
	f.progress = progressOf(workflows.JobRunning, 10, 3, 6)
	f.progress.Requeued = 1
	f.mu.Unlock()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && strings.Count(errw.String(), "fail-over") < 2 {
		time.Sleep(50 * time.Millisecond)
	}
	f.mu.Lock()
	f.progress = progressOf(workflows.JobCompleted, 10, 0, 10)
	f.mu.Unlock()
	close(f.result)
	require.NoError(t, <-done)
	out := errw.String()
	assert.Contains(t, out, "fail-over: Runner sc-crawler_1 was declared dead; sc-crawler_2 took its work over: job j goes on")
	assert.Contains(t, out, "fail-over: 1 batch re-queued: its Runner died with no Backup Runner to take over; job j goes on")
}

// Ctrl-C stops the waiting, not the job: crawl --wait says so and exits
// 130; with --output json the document still names the job.
func TestInterruptedWaitSaysTheJobGoesOn(t *testing.T) {
	f := &fakeTemporal{queryDelay: time.Millisecond, result: make(chan struct{}),
		progress: progressOf(workflows.JobRunning, 10, 5, 5)}
	o := outputJSON
	co := &crawlOutput{o: &o, waitForRunners: time.Minute,
		interrupt: func(ctx context.Context) (context.Context, context.CancelFunc) {
			return context.WithTimeout(ctx, 700*time.Millisecond) // the user's Ctrl-C
		}}
	var out, errw bytes.Buffer
	cmd := &cobra.Command{}
	cmd.SetContext(context.Background())
	cmd.SetOut(&out)
	cmd.SetErr(&errw)
	err := co.report(cmd, f, submitted{ID: "j", WorkflowID: "baton-job/g/j"}, true, &runnerCheck{c: liveGroup(t), close: func() {}, job: "j"})
	require.Error(t, err)
	assert.Equal(t, exitcode.Interrupted, exitcode.Of(err))
	assert.Contains(t, err.Error(), "stopped waiting; job j goes on in the cluster (follow it: baton status j; stop it: baton cancel j)")
	var doc submitted
	require.NoError(t, json.Unmarshal(out.Bytes(), &doc), out.String())
	assert.Equal(t, "j", doc.ID)
	assert.False(t, errors.Is(err, context.Canceled))
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Once the job has ended, crawl --wait ends its ZooKeeper session (a
// write the ensemble commits) while it prints the outcome and the stats
// block, not after them: the stats block sees the close under way.
func TestWaitEndsTheRunnerSessionBeforeTheStats(t *testing.T) {
	f := &fakeTemporal{queryDelay: time.Millisecond, result: make(chan struct{}),
		progress: progressOf(workflows.JobCompleted, 1, 0, 1)}
	close(f.result)
	closing := make(chan struct{})
	live := &runnerCheck{c: liveGroup(t), close: func() { close(closing) }, job: "j"}
	o := outputTable
	sawClose := false
	co := &crawlOutput{o: &o, waitForRunners: time.Minute, stats: func(io.Writer) {
		select {
		case <-closing:
			sawClose = true
		case <-time.After(5 * time.Second):
		}
	}}
	var out, errw bytes.Buffer
	cmd := &cobra.Command{}
	cmd.SetContext(context.Background())
	cmd.SetOut(&out)
	cmd.SetErr(&errw)
	require.NoError(t, co.report(cmd, f, submitted{ID: "j", WorkflowID: "baton-job/g/j"}, true, live))
	assert.True(t, sawClose, "the ZooKeeper session was not being closed when the stats block was printed")
	live.Close() // waits for the close started; a second close would panic
}
