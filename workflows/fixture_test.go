package workflows

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	sdktest "go.temporal.io/sdk/testsuite"

	"github.com/batoncrawl/baton/activities/cluster"
	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/failover"
	"github.com/batoncrawl/baton/activities/heartbeat"
	"github.com/batoncrawl/baton/activities/membership"
	"github.com/batoncrawl/baton/activities/metadata"
	"github.com/batoncrawl/baton/activities/runner"
	"github.com/batoncrawl/baton/activities/scale"
	"github.com/batoncrawl/baton/roles"
)

// Test fixtures shared by the workflow tests: a group of crawlers
// registered and elected by the REAL activities on an in-memory store, a
// controllable clock for the activities (Deps.Clock), a fake Fetcher,
// and a Temporal test environment that records the activities it starts.

const testGroup = "sc-crawler-cluster"

// t0 is the wall-clock instant the fixtures' heartbeats are written at.
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// testTimers are short so that the real long-running activities (which
// loop on real tickers) finish in milliseconds: a check every
// millisecond, dead after 3 late checks, reset after 10 healthy ones.
func testTimers() roles.Timers {
	return roles.Timers{
		UpdateTime: 10 * time.Millisecond, UpdateTimeout: 2 * time.Second, HeartRhythmTimeout: 3,
		ResetTimeout: 10, CheckTask: 10 * time.Millisecond, CheckCrawlerState: time.Millisecond,
		CheckStandbyID: 10 * time.Millisecond,
	}
}

func crawler(i int) string { return fmt.Sprintf("sc-crawler_%d", i) }

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// testCluster is a group on a Memory store.
type testCluster struct {
	t              *testing.T
	store          *metadata.Memory
	c              *metadata.Cluster
	runner, backup int
	timers         roles.Timers
	capacity       int
}

// newCluster registers crawler 1..runner+backup and elects them with the
// real Register and Elect activities; every heartbeat is written at t0.
func newCluster(t *testing.T, runner, backup int) *testCluster {
	t.Helper()
	s := metadata.NewMemory()
	cl := &testCluster{t: t, store: s, c: metadata.NewCluster(s, "", testGroup), runner: runner, backup: backup, timers: testTimers()}
	setup := cl.acts(func() time.Time { return t0 })
	ctx := context.Background()
	for i := 1; i <= runner+backup; i++ {
		_, err := setup.Register(ctx, cl.member(i))
		require.NoError(t, err)
	}
	for i := 1; i <= runner+backup; i++ {
		_, err := setup.Elect(ctx, cl.member(i))
		require.NoError(t, err)
	}
	return cl
}

// registerOnly registers the given crawlers without electing anyone.
func registerOnly(t *testing.T, runner, backup int, names ...int) *testCluster {
	t.Helper()
	s := metadata.NewMemory()
	cl := &testCluster{t: t, store: s, c: metadata.NewCluster(s, "", testGroup), runner: runner, backup: backup, timers: testTimers()}
	setup := cl.acts(func() time.Time { return t0 })
	for _, i := range names {
		_, err := setup.Register(context.Background(), cl.member(i))
		require.NoError(t, err)
	}
	return cl
}

func (cl *testCluster) member(i int) cluster.Member {
	return cluster.Member{Group: testGroup, Name: crawler(i), Runner: cl.runner, Backup: cl.backup,
		Timers: cl.timers, Capacity: cl.capacity}
}

// acts returns real activities on the cluster's store with clock now.
func (cl *testCluster) acts(now func() time.Time) *activitySet {
	return newActivitySet(&cluster.Deps{Store: cl.store, Clock: now, Log: quietLogger()}, &fakeFetcher{})
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

// activitySet is the activities of one worker process: every
// capability's, over one Deps, as the worker wires them.
type activitySet struct {
	*cluster.Deps
	*membershipActs
	*heartbeatActs
	*failoverActs
	*runnerActs
	*scaleActs
}

func newActivitySet(d *cluster.Deps, f crawl.Fetcher) *activitySet {
	a := NewActivities(d, f)
	return &activitySet{Deps: d, membershipActs: a.Membership, heartbeatActs: a.Heartbeat,
		failoverActs: a.Failover, runnerActs: a.Runner, scaleActs: a.Scale}
}

// register registers every capability's activities with r (a test
// environment or a worker), as the worker does.
func (s *activitySet) register(r interface{ RegisterActivity(any) }) {
	for _, a := range []any{s.membershipActs, s.heartbeatActs, s.failoverActs, s.runnerActs, s.scaleActs} {
		r.RegisterActivity(a)
	}
}

func (cl *testCluster) group() roles.GroupState {
	cl.t.Helper()
	g, _, err := cl.c.GetGroup(context.Background())
	require.NoError(cl.t, err)
	return g
}

func (cl *testCluster) node(i int) roles.NodeState {
	cl.t.Helper()
	n, _, err := cl.c.GetNode(context.Background(), crawler(i))
	require.NoError(cl.t, err)
	return n
}

func (cl *testCluster) task(i int) roles.Task {
	cl.t.Helper()
	tk, _, err := cl.c.GetTask(context.Background(), crawler(i))
	require.NoError(cl.t, err)
	return tk
}

func (cl *testCluster) heartbeat(i int) roles.Heartbeat {
	cl.t.Helper()
	hb, _, err := cl.c.GetHeartbeat(context.Background(), crawler(i))
	require.NoError(cl.t, err)
	return hb
}

func (cl *testCluster) putTask(i int, tk roles.Task) {
	cl.t.Helper()
	_, err := cl.c.Put(context.Background(), cl.c.TaskPath(crawler(i)), tk, metadata.AnyVersion)
	require.NoError(cl.t, err)
}

// beatAt writes crawler i's heartbeat as of at (Healthy).
func (cl *testCluster) beatAt(i int, at time.Time) {
	cl.t.Helper()
	hb := roles.NewHeartbeat(at, cl.timers)
	hb.HealthyState = roles.HeartHealthy
	_, err := cl.c.Put(context.Background(), cl.c.HeartbeatPath(crawler(i)), hb, metadata.AnyVersion)
	require.NoError(cl.t, err)
}

// fakeFetcher answers every request with 200 without any network.
type fakeFetcher struct {
	mu   sync.Mutex
	urls []string
}

func (f *fakeFetcher) Fetch(_ context.Context, req roles.Request, _ crawl.Auth, depth int, _ crawl.Options) crawl.Page {
	f.mu.Lock()
	f.urls = append(f.urls, req.URL)
	f.mu.Unlock()
	return crawl.Page{URL: req.URL, StatusCode: 200, FinalURL: req.URL, Bytes: 2, Title: "ok", Depth: depth}
}

func (f *fakeFetcher) FetchSitemap(ctx context.Context, req roles.Request, auth crawl.Auth, opts crawl.Options) crawl.Page {
	return f.Fetch(ctx, req, auth, 0, opts)
}

// requests returns n GET requests with task_id 1..n.
func requests(n int) []roles.Request {
	out := make([]roles.Request, n)
	for i := range out {
		out[i] = roles.Request{TaskID: i + 1, URL: fmt.Sprintf("http://127.0.0.1:1/page/%d", i+1), Method: "GET"}
	}
	return out
}

// processingTask is a Task that ran done of its n requests and was held
// by holder at epoch.
func processingTask(n, done int, holder string, epoch int64) roles.Task {
	tk := roles.EmptyTask()
	tk.RunningContent = requests(n)
	tk.Cookie = map[string]string{"session": "abc"}
	tk.RunningStatus = roles.TaskProcessing
	tk.Holder, tk.Epoch = holder, epoch
	for i := 0; i < done; i++ {
		next, ok := tk.Record(roles.ResultDetail{TaskID: i + 1, State: roles.TaskDone, StatusCode: 200}, 0)
		if !ok {
			panic("record")
		}
		tk = next
	}
	return tk
}

// clock is a settable clock for Deps.Clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock(at time.Time) *clock { return &clock{now: at} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// recorder records the activities the test environment starts (every
// attempt) in order.
type recorder struct {
	mu    sync.Mutex
	names []string
	calls []recordedCall
	// local lists the activities run as local activities, in order.
	local []string
}

// locals returns the names of the local activities started, in order.
func (r *recorder) locals() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.local)
}

type recordedCall struct {
	Name    string
	Attempt int32
	At      time.Time // workflow clock
	Args    converter.EncodedValues
}

func (r *recorder) started() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.names)
}

func (r *recorder) count(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, s := range r.names {
		if s == name {
			n++
		}
	}
	return n
}

// without returns the started activities without the given names.
func (r *recorder) without(names ...string) []string {
	return slices.DeleteFunc(r.started(), func(s string) bool { return slices.Contains(names, s) })
}

func (r *recorder) callsOf(name string) []recordedCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []recordedCall
	for _, c := range r.calls {
		if c.Name == name {
			out = append(out, c)
		}
	}
	return out
}

// newEnv returns a workflow test environment with every Baton workflow
// registered and a recorder of started cluster.
func newEnv(t *testing.T) (*sdktest.TestWorkflowEnvironment, *recorder) {
	var s sdktest.WorkflowTestSuite
	if !testing.Verbose() {
		s.SetLogger(log.NewStructuredLogger(quietLogger()))
	}
	env := s.NewTestWorkflowEnvironment()
	env.SetTestTimeout(30 * time.Second) // wall clock idle bound: real activities run in goroutines
	Register(env)
	rec := &recorder{}
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, args converter.EncodedValues) {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		rec.names = append(rec.names, info.ActivityType.Name)
		rec.calls = append(rec.calls, recordedCall{Name: info.ActivityType.Name, Attempt: info.Attempt, At: env.Now(), Args: args})
	})
	// The Lifecycle's short steps run as local activities (no Args
	// recorded: nothing reads them).
	env.SetOnLocalActivityStartedListener(func(info *activity.Info, _ context.Context, _ []any) {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		rec.names = append(rec.names, info.ActivityType.Name)
		rec.local = append(rec.local, info.ActivityType.Name)
		rec.calls = append(rec.calls, recordedCall{Name: info.ActivityType.Name, Attempt: info.Attempt, At: env.Now()})
	})
	return env, rec
}

// roleResult returns the workflow's RoleResult, failing on an error.
func roleResult(t *testing.T, env *sdktest.TestWorkflowEnvironment) RoleResult {
	t.Helper()
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var res RoleResult
	require.NoError(t, env.GetWorkflowResult(&res))
	return res
}

// fencedErr is what RunTask fails with when its holder was fenced.
func fencedErr() error {
	return temporal.NewNonRetryableApplicationError("fenced: test", cluster.ErrTypeFenced, nil)
}

// crashErr is a retryable failure: the worker died in the middle of a step.
func crashErr() error {
	return temporal.NewApplicationError("worker crashed", "TestCrash")
}

// lostErr is what Activate and HandOver fail with when another instance
// holds the claim.
func lostErr() error {
	return temporal.NewNonRetryableApplicationError("claim lost: test", cluster.ErrTypeLost, nil)
}

// fatalErr is a non-retryable failure.
func fatalErr() error {
	return temporal.NewNonRetryableApplicationError("fatal: test", "TestFatal", nil)
}

// corruptErr is what an activity fails with on a corrupted znode: a
// *metadata.CorruptError, which Temporal retries.
func corruptErr(path string) error {
	return &metadata.CorruptError{Path: path, Err: &roles.FieldError{Object: "Task", Field: "running_status", Msg: `unknown status "sleeping"`}}
}

func hasErrType(err error, typ string) bool {
	var ae *temporal.ApplicationError
	return errors.As(err, &ae) && ae.Type() == typ
}

// workflowName is the registered name of a workflow function.
func workflowName(wf any) string {
	name := runtime.FuncForPC(reflect.ValueOf(wf).Pointer()).Name()
	return name[strings.LastIndex(name, ".")+1:]
}

func (r *recorder) counts() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for _, s := range r.names {
		out[s]++
	}
	return out
}

// assertOrder checks that the first occurrences of names in got come in
// the given order.
func assertOrder(t *testing.T, got []string, names ...string) {
	t.Helper()
	last := -1
	for _, n := range names {
		i := slices.Index(got, n)
		if !assert.GreaterOrEqual(t, i, 0, "%s not started: %v", n, got) {
			return
		}
		assert.Greater(t, i, last, "%s out of order in %v", n, got)
		last = i
	}
}
