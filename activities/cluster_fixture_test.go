package activities_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/batoncrawl/baton/activities/cluster"
	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/failover"
	"github.com/batoncrawl/baton/activities/heartbeat"
	"github.com/batoncrawl/baton/activities/membership"
	"github.com/batoncrawl/baton/activities/metadata"
	"github.com/batoncrawl/baton/activities/runner"
	"github.com/batoncrawl/baton/activities/scale"
	"github.com/batoncrawl/baton/roles"
	"github.com/batoncrawl/baton/workflows"
)

// waitLimit bounds every wait for an asynchronous condition.
const waitLimit = 10 * time.Second

const group = "sc-crawler-cluster"

func name(i int) string { return fmt.Sprintf("sc-crawler_%d", i) }

// fakeClock is the Deps.Clock of a test.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// spyStore wraps a Store and reports every GetW and Get, so a test can
// wait until an activity is blocked on a watch before changing anything.
type spyStore struct {
	metadata.Store
	mu    sync.Mutex
	cond  *sync.Cond
	gets  map[string]int
	watch map[string]int
}

func newSpy(s metadata.Store) *spyStore {
	sp := &spyStore{Store: s, gets: map[string]int{}, watch: map[string]int{}}
	sp.cond = sync.NewCond(&sp.mu)
	return sp
}

func (s *spyStore) Get(ctx context.Context, p string) ([]byte, int32, error) {
	d, v, err := s.Store.Get(ctx, p)
	s.mu.Lock()
	s.gets[p]++
	s.cond.Broadcast()
	s.mu.Unlock()
	return d, v, err
}

func (s *spyStore) GetW(ctx context.Context, p string) ([]byte, int32, <-chan struct{}, error) {
	d, v, ch, err := s.Store.GetW(ctx, p)
	s.mu.Lock()
	s.watch[p]++
	s.cond.Broadcast()
	s.mu.Unlock()
	return d, v, ch, err
}

func (s *spyStore) count(m map[string]int, p string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return m[p]
}

// waitCount waits (bounded) until the counter of p in m reaches n.
func (s *spyStore) waitCount(t *testing.T, m map[string]int, p string, n int, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		s.mu.Lock()
		for m[p] < n {
			s.cond.Wait()
		}
		s.mu.Unlock()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(waitLimit):
		s.mu.Lock()
		s.cond.Broadcast() // let the goroutine re-check; it exits at the next event
		s.mu.Unlock()
		t.Fatalf("%s: %s reached %d, want %d", what, p, s.count(m, p), n)
	}
}

// clusterFixture is a group of crawlers on one in-memory store.
type clusterFixture struct {
	t              *testing.T
	mem            *metadata.Memory
	spy            *spyStore
	clock          *fakeClock
	runner, backup int
	timers         roles.Timers
}

func testTimers() roles.Timers {
	tm := roles.FastTimers()
	tm.UpdateTime = 5 * time.Millisecond
	tm.UpdateTimeout = 500 * time.Millisecond
	tm.HeartRhythmTimeout = 2
	tm.CheckCrawlerState = time.Millisecond
	return tm
}

var t0 = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

func newClusterFixture(t *testing.T, runner, backup int) *clusterFixture {
	mem := metadata.NewMemory()
	return &clusterFixture{t: t, mem: mem, spy: newSpy(mem), clock: &fakeClock{now: t0},
		runner: runner, backup: backup, timers: testTimers()}
}

func (f *clusterFixture) member(i int) cluster.Member {
	return cluster.Member{Group: group, Name: name(i), Runner: f.runner, Backup: f.backup, Timers: f.timers, Capacity: 2}
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// acts returns the activities of every capability, as one worker process
// would have them.
func (f *clusterFixture) acts(fetcher crawl.Fetcher) *acts {
	return newActs(&cluster.Deps{Store: f.spy, Clock: f.clock.Now, Log: quiet()}, fetcher)
}

// The Activities of each capability, under names that can be embedded
// side by side.
type (
	membershipActs = membership.Activities
	heartbeatActs  = heartbeat.Activities
	failoverActs   = failover.Activities
	runnerActs     = runner.Activities
	scaleActs      = scale.Activities
)

// acts is the activities of one worker process: every capability's, over
// one Deps, wired as the worker wires them. Its fields are the Deps' and
// the capabilities' own (Fetcher, Closer, ...), its methods every
// activity and the Deps' helpers.
type acts struct {
	*cluster.Deps
	*membershipActs
	*heartbeatActs
	*failoverActs
	*runnerActs
	*scaleActs
}

func newActs(d *cluster.Deps, fetcher crawl.Fetcher) *acts {
	a := workflows.NewActivities(d, fetcher)
	// RunTask waits a second for the Runner's next Task here, not
	// runner.DefaultLinger: the tests call it and wait for its end.
	a.Runner.Linger = time.Second
	return &acts{Deps: d, membershipActs: a.Membership, heartbeatActs: a.Heartbeat,
		failoverActs: a.Failover, runnerActs: a.Runner, scaleActs: a.Scale}
}

func (f *clusterFixture) c() *metadata.Cluster { return metadata.NewCluster(f.mem, "", group) }

// start registers members 1..n, waits for them and elects them in order.
func (f *clusterFixture) start(order ...int) {
	f.t.Helper()
	if len(order) == 0 {
		for i := 1; i <= f.runner+f.backup; i++ {
			order = append(order, i)
		}
	}
	ctx := context.Background()
	a := f.acts(nil)
	for _, i := range order {
		_, err := a.Register(ctx, f.member(i))
		require.NoError(f.t, err)
	}
	for _, i := range order {
		_, err := a.WaitMembers(ctx, f.member(i))
		require.NoError(f.t, err)
	}
	for _, i := range order {
		_, err := a.Elect(ctx, f.member(i))
		require.NoError(f.t, err)
	}
}

// group returns GroupState without its mode (all_runner), which the
// tests built with gs compare the reference's fields of; modeOf reads it.
func (f *clusterFixture) group() roles.GroupState {
	f.t.Helper()
	g, _, err := f.c().GetGroup(context.Background())
	require.NoError(f.t, err)
	g.AllRunner = nil
	return g
}

func (f *clusterFixture) modeOf() *bool {
	f.t.Helper()
	g, _, err := f.c().GetGroup(context.Background())
	require.NoError(f.t, err)
	return g.AllRunner
}

func (f *clusterFixture) node(i int) roles.NodeState {
	f.t.Helper()
	n, _, err := f.c().GetNode(context.Background(), name(i))
	require.NoError(f.t, err)
	return n
}

func (f *clusterFixture) task(i int) roles.Task {
	f.t.Helper()
	tk, _, err := f.c().GetTask(context.Background(), name(i))
	require.NoError(f.t, err)
	return tk
}

func (f *clusterFixture) heartbeat(i int) roles.Heartbeat {
	f.t.Helper()
	h, _, err := f.c().GetHeartbeat(context.Background(), name(i))
	require.NoError(f.t, err)
	return h
}

// beat writes member i's heartbeat as taken at `at`.
func (f *clusterFixture) beat(i int, at time.Time, state roles.HeartState) {
	f.t.Helper()
	h := roles.NewHeartbeat(at, f.timers)
	h.HealthyState = state
	_, err := f.c().Put(context.Background(), f.c().HeartbeatPath(name(i)), h, metadata.AnyVersion)
	require.NoError(f.t, err)
}

// corrupt overwrites a znode with raw bytes.
func (f *clusterFixture) corrupt(path, doc string) {
	f.t.Helper()
	_, err := f.mem.Set(context.Background(), path, []byte(doc), metadata.AnyVersion)
	require.NoError(f.t, err)
}

func requests(n int) []roles.Request {
	out := make([]roles.Request, n)
	for i := range out {
		out[i] = roles.Request{TaskID: i, URL: fmt.Sprintf("http://example.test/page/%d", i), Method: "GET"}
	}
	return out
}

// assign writes a Task to member i as the starter does: compare-and-set
// at the current version, epoch raised.
func (f *clusterFixture) assign(i int, reqs []roles.Request) roles.Task {
	f.t.Helper()
	ctx := context.Background()
	c := f.c()
	cur, v, err := c.GetTask(ctx, name(i))
	require.NoError(f.t, err)
	tk := roles.EmptyTask()
	tk.RunningContent = reqs
	tk = tk.Replacing(cur)
	require.NoError(f.t, tk.Validate())
	_, err = f.mem.Set(ctx, c.TaskPath(name(i)), metadata.Encode(tk), v)
	require.NoError(f.t, err)
	return tk
}

func gs(totalCrawler, totalRunner, totalBackup int, standby string, cc, cr, cb, fc, fr, fb []string) roles.GroupState {
	nz := func(l []string) []string {
		if l == nil {
			return []string{}
		}
		return l
	}
	return roles.GroupState{TotalCrawler: totalCrawler, TotalRunner: totalRunner, TotalBackup: totalBackup, StandbyID: standby,
		CurrentCrawler: nz(cc), CurrentRunner: nz(cr), CurrentBackup: nz(cb),
		FailCrawler: nz(fc), FailRunner: nz(fr), FailBackup: nz(fb)}
}

func names(idx ...int) []string {
	out := make([]string, len(idx))
	for i, x := range idx {
		out[i] = name(x)
	}
	return out
}

// noSitemaps is the FetchSitemap of the tests' crawl.Fetchers: a Runner
// never fetches a sitemap.
type noSitemaps struct{}

func (noSitemaps) FetchSitemap(_ context.Context, req roles.Request, _ crawl.Auth, _ crawl.Options) crawl.Page {
	return crawl.Page{URL: req.URL, Sitemap: true, Error: "no sitemaps in this test"}
}

// recordingFetcher answers every request at once and records what it saw.
type recordingFetcher struct {
	noSitemaps
	mu   sync.Mutex
	seen []roles.Request
}

func (r *recordingFetcher) Fetch(_ context.Context, req roles.Request, _ crawl.Auth, _ int, _ crawl.Options) crawl.Page {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = append(r.seen, req)
	return crawl.Page{StatusCode: 200, Title: "ok", Bytes: 2}
}

func (r *recordingFetcher) ids() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := []int{}
	for _, q := range r.seen {
		out = append(out, q.TaskID)
	}
	return out
}

// gateFetcher blocks every request until the test lets it go, so a test
// can interleave a runner with a fail-over deterministically.
type gateFetcher struct {
	noSitemaps
	entered chan roles.Request
	release chan crawl.Page
}

func newGate() *gateFetcher {
	return &gateFetcher{entered: make(chan roles.Request), release: make(chan crawl.Page)}
}

func (g *gateFetcher) Fetch(ctx context.Context, req roles.Request, _ crawl.Auth, _ int, _ crawl.Options) crawl.Page {
	select {
	case g.entered <- req:
	case <-ctx.Done():
		return crawl.Page{Error: ctx.Err().Error()}
	}
	select {
	case r := <-g.release:
		return r
	case <-ctx.Done():
		return crawl.Page{Error: ctx.Err().Error()}
	}
}

// next waits for the fetcher to be called and returns the request.
func (g *gateFetcher) next(t *testing.T) roles.Request {
	t.Helper()
	select {
	case r := <-g.entered:
		return r
	case <-time.After(waitLimit):
		t.Fatal("fetcher not called")
		return roles.Request{}
	}
}

func (g *gateFetcher) ok(t *testing.T) {
	t.Helper()
	select {
	case g.release <- crawl.Page{StatusCode: 200, Title: "gated"}:
	case <-time.After(waitLimit):
		t.Fatal("fetcher not waiting")
	}
}

// requireCorrupt asserts err reports a corrupted znode at path whose field
// error names obj.field, and is retryable.
func requireCorrupt(t *testing.T, err error, path, objField string) {
	t.Helper()
	require.Error(t, err)
	var ce *metadata.CorruptError
	require.True(t, errors.As(err, &ce), "%v (%T) is not a *metadata.CorruptError", err, err)
	assert.Equal(t, path, ce.Path)
	assert.ErrorIs(t, err, roles.ErrInvalid)
	assert.Contains(t, err.Error(), path)
	assert.Contains(t, err.Error(), objField)
	assert.False(t, nonRetryable(err), "a corrupted znode is retried, so the activity goes on once an operator has repaired it: %v", err)
}

// nonRetryable reports whether Temporal would not retry the activity that
// failed with err. A plain Go error is retried.
func nonRetryable(err error) bool {
	var ae *temporal.ApplicationError
	return errors.As(err, &ae) && ae.NonRetryable()
}

func errType(err error) string {
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) {
		return ae.Type()
	}
	return ""
}

// result is the outcome of an activity run in a goroutine.
type result[T any] struct {
	v   T
	err error
}

func goRun[T any](fn func() (T, error)) <-chan result[T] {
	ch := make(chan result[T], 1)
	go func() {
		v, err := fn()
		ch <- result[T]{v, err}
	}()
	return ch
}

func await[T any](t *testing.T, ch <-chan result[T], what string) (T, error) {
	t.Helper()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-time.After(waitLimit):
		t.Fatalf("%s did not return within %v", what, waitLimit)
		var zero T
		return zero, nil
	}
}

func notReturned[T any](t *testing.T, ch <-chan result[T], what string) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("%s returned early: %+v, %v", what, r.v, r.err)
	default:
	}
}
