package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/batoncrawl/baton/activities/metadata"
	"github.com/batoncrawl/baton/roles"
)

// stepClock is a fake clock: each After fires at once and moves time on by
// its duration, until the frames-th frame, where it stops the watch.
type stepClock struct {
	now    time.Time
	frames int
	calls  int
	stop   context.CancelFunc
}

func (c *stepClock) Now() time.Time { return c.now }

func (c *stepClock) After(d time.Duration) <-chan time.Time {
	c.calls++
	if c.calls >= c.frames {
		c.stop()
		return nil // never fires: the watch ends on ctx
	}
	c.now = c.now.Add(d)
	ch := make(chan time.Time, 1)
	ch <- c.now
	return ch
}

var t0 = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

// memCluster is a group of two crawlers, 1 runner with a Task half done
// and 2 the standby backup, on the in-memory store.
func memCluster(t *testing.T) *metadata.Cluster {
	t.Helper()
	ctx := context.Background()
	c := metadata.NewCluster(metadata.NewMemory(), "", "g")
	tm := roles.FastTimers()
	put := func(p string, v any) {
		t.Helper()
		if _, err := c.Put(ctx, p, v, metadata.AnyVersion); err != nil {
			t.Fatalf("put %s: %v", p, err)
		}
	}
	put(c.GroupPath(), roles.GroupState{TotalCrawler: 2, TotalRunner: 1, TotalBackup: 1, StandbyID: "2",
		CurrentCrawler: []string{"sc-crawler_1", "sc-crawler_2"}, CurrentRunner: []string{"sc-crawler_1"},
		CurrentBackup: []string{"sc-crawler_2"}, FailCrawler: []string{}, FailRunner: []string{}, FailBackup: []string{}})
	put(c.NodePath("sc-crawler_1"), roles.NodeState{Group: "g", Role: roles.RoleRunner})
	put(c.NodePath("sc-crawler_2"), roles.NodeState{Group: "g", Role: roles.RoleBackup})
	hb := roles.NewHeartbeat(t0.Add(-1500*time.Millisecond), tm)
	hb.HealthyState = roles.HeartHealthy
	put(c.HeartbeatPath("sc-crawler_1"), hb)
	put(c.HeartbeatPath("sc-crawler_2"), hb)
	task := roles.EmptyTask()
	task.RunningContent = []roles.Request{{TaskID: 0, URL: "http://example.test/a", Method: "GET"}, {TaskID: 1, URL: "http://example.test/b", Method: "GET"}}
	task.RunningStatus, task.NextIndex, task.Holder, task.Epoch = roles.TaskProcessing, 1, "sc-crawler_1", 3
	task.RunningResult.SuccessCount = 1
	put(c.TaskPath("sc-crawler_1"), task)
	put(c.TaskPath("sc-crawler_2"), roles.EmptyTask())
	return c
}

func watchFrames(t *testing.T, c *metadata.Cluster, tty bool, frames int) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	clk := &stepClock{now: t0, frames: frames, stop: cancel}
	var out bytes.Buffer
	if err := watchCluster(ctx, &out, c, time.Second, tty, clk); err != nil {
		t.Fatalf("watchCluster: %v", err)
	}
	if clk.calls != frames {
		t.Fatalf("waited %d times, want %d", clk.calls, frames)
	}
	return out.String()
}

func TestWatchClusterPrintsPlainFramesWhenNotATerminal(t *testing.T) {
	out := watchFrames(t, memCluster(t), false, 2)
	if strings.Contains(out, "\x1b") {
		t.Errorf("ANSI codes in non-terminal output:\n%q", out)
	}
	frames := strings.Split(out, "\n\nEvery ")
	if len(frames) != 2 {
		t.Fatalf("%d frames, want 2:\n%s", len(frames), out)
	}
	for i, want := range []struct{ at, age string }{{"2024-05-01T12:00:00Z", "1.5s"}, {"2024-05-01T12:00:01Z", "2.5s"}} {
		f := frames[i]
		for _, s := range []string{"baton cluster    " + want.at, "group g: 1 runners, 1 backups, standby_id \"2\"", "INSTANCE",
			"sc-crawler_1", "runner", "processing", "1/2 (ok 1, failed 0)", "sc-crawler_1/3", "sc-crawler_2", "backup-runner", want.age} {
			if !strings.Contains(f, s) {
				t.Errorf("frame %d lacks %q:\n%s", i+1, s, f)
			}
		}
	}
}

func TestWatchClusterRedrawsOnATerminal(t *testing.T) {
	out := watchFrames(t, memCluster(t), true, 2)
	if n := strings.Count(out, clearScreen); n != 2 {
		t.Fatalf("%d screen clears, want one per frame (2):\n%q", n, out)
	}
	if !strings.HasPrefix(out, clearScreen+"Every 1s: baton cluster") {
		t.Fatalf("a frame starts with the clear and the header:\n%q", out)
	}
}

func TestWatchClusterShowsErrorsAndGoesOn(t *testing.T) {
	c := metadata.NewCluster(metadata.NewMemory(), "", "nogroup")
	out := watchFrames(t, c, false, 3)
	if n := strings.Count(out, "error: no group nogroup"); n != 3 {
		t.Fatalf("%d error frames, want 3:\n%s", n, out)
	}
}

func TestClusterIntervalMustBePositive(t *testing.T) {
	if code := execute([]string{"cluster", "--watch", "--interval", "0s"}, io.Discard, io.Discard); code != 2 {
		t.Fatalf("exit code %d, want 2 (bad usage)", code)
	}
}

// --watch --output json: one JSON document a line, each the whole cluster
// (or the error), and the watch goes on.
func TestWatchClusterJSONLines(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	clk := &stepClock{now: t0, frames: 2, stop: cancel}
	var out bytes.Buffer
	if err := watchClusterJSON(ctx, &out, memCluster(t), time.Second, clk); err != nil {
		t.Fatalf("watchClusterJSON: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2:\n%s", len(lines), out.String())
	}
	for i, line := range lines {
		var v clusterView
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("line %d is not a cluster document: %v\n%s", i+1, err, line)
		}
		if v.Group != "g" || len(v.Instances) != 2 || v.Instances[0].Name != "sc-crawler_1" || v.Instances[0].Role != "runner" ||
			v.Instances[0].Task == nil || v.Instances[0].Task.NextIndex != 1 || v.Instances[0].Task.Requests != 2 ||
			v.Instances[1].Role != "backup-runner" || v.State.StandbyID != "2" {
			t.Errorf("line %d: %+v", i+1, v)
		}
		if want := int64(1500 + 1000*i); v.Instances[0].HeartbeatAgeMS == nil || *v.Instances[0].HeartbeatAgeMS != want {
			t.Errorf("line %d: heartbeat age %v, want %d ms", i+1, v.Instances[0].HeartbeatAgeMS, want)
		}
	}

	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	clk = &stepClock{now: t0, frames: 2, stop: cancel}
	out.Reset()
	if err := watchClusterJSON(ctx, &out, metadata.NewCluster(metadata.NewMemory(), "", "nogroup"), time.Second, clk); err != nil {
		t.Fatalf("watchClusterJSON: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var e struct{ Error string }
		if err := json.Unmarshal([]byte(line), &e); err != nil || !strings.Contains(e.Error, "group nogroup") {
			t.Errorf("want an error line about the group, got %q (%v)", line, err)
		}
	}
}

// An instance is live until backups could declare it dead; a death
// heartbeat or an old one is not live; a Backup Runner counts (it takes
// over a dead Runner's work).
func TestLiveInstances(t *testing.T) {
	c := memCluster(t) // heartbeats 1.5 s old at t0, fast timers (dead after 0.5 s + 2 × 0.1 s)
	r := &runnerCheck{c: c}
	ctx := context.Background()
	n, _, err := r.live(ctx, t0.Add(-1400*time.Millisecond))
	if err != nil || n != 2 {
		t.Fatalf("fresh heartbeats: %d live (%v), want 2", n, err)
	}
	if n, _, _ := r.live(ctx, t0.Add(-800*time.Millisecond)); n != 2 {
		t.Fatalf("0.7 s old heartbeats (late, not yet dead): %d live, want 2", n)
	}
	if n, _, _ := r.live(ctx, t0); n != 0 {
		t.Fatalf("1.5 s old heartbeats: %d live, want 0", n)
	}
	hb := roles.NewHeartbeat(t0, roles.FastTimers())
	hb.HealthyState = roles.HeartApparentDeath
	if _, err := c.Put(ctx, c.HeartbeatPath("sc-crawler_1"), hb, metadata.AnyVersion); err != nil {
		t.Fatal(err)
	}
	hb.HealthyState = roles.HeartHealthy
	if _, err := c.Put(ctx, c.HeartbeatPath("sc-crawler_2"), hb, metadata.AnyVersion); err != nil {
		t.Fatal(err)
	}
	if n, _, _ := r.live(ctx, t0); n != 1 {
		t.Fatalf("a stopped runner and a fresh backup: %d live, want 1", n)
	}
	empty := &runnerCheck{c: metadata.NewCluster(metadata.NewMemory(), "", "nogroup")}
	if n, _, err := empty.live(ctx, t0); n != 0 || err != nil {
		t.Fatalf("a group that never formed: %d live (%v), want 0 and no error", n, err)
	}
}
