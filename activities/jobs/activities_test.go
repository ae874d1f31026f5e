package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/activities/jobs/sqlstore"
	"github.com/batoncrawl/baton/activities/metadata"
	"github.com/batoncrawl/baton/activities/telemetry"
	"github.com/batoncrawl/baton/activities/telemetry/prommetrics"
	"github.com/batoncrawl/baton/roles"
)

// waitLimit bounds every wait for an asynchronous condition.
const waitLimit = 10 * time.Second

const testGroup = "sc-crawler-cluster"

var t0 = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

func nodeName(i int) string { return fmt.Sprintf("sc-crawler_%d", i) }

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// testTimers are short where the tests wait in real time (JobAwait polls
// every 2*check_crawler_state) and a few seconds where the fake clock
// decides: a heartbeat is late after update_timeout (2 s), a holder is an
// orphan after 2*DetectionBound + 2 s = 6.03 s, JobAwait's deadline is 5 s.
func testTimers() roles.Timers {
	return roles.Timers{
		UpdateTime: 100 * time.Millisecond, UpdateTimeout: 2 * time.Second, HeartRhythmTimeout: 3,
		ResetTimeout: 10, CheckTask: 2 * time.Second, CheckCrawlerState: 5 * time.Millisecond,
		CheckStandbyID: 2 * time.Second,
	}
}

// orphanAfter is JobAwait's bound for testTimers.
func orphanAfter() time.Duration { return 2*testTimers().DetectionBound() + 2*time.Second }

// fakeClock is Activities.Now.
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

// spyMeta counts the watches set per znode, so a test knows JobAwait went
// round its loop; failSet, when set, makes a Set of that path fail once.
type spyMeta struct {
	metadata.Store
	mu      sync.Mutex
	watches map[string]int
	failSet map[string]error
}

func (s *spyMeta) GetW(ctx context.Context, p string) ([]byte, int32, <-chan struct{}, error) {
	d, v, ch, err := s.Store.GetW(ctx, p)
	s.mu.Lock()
	s.watches[p]++
	s.mu.Unlock()
	return d, v, ch, err
}

func (s *spyMeta) Set(ctx context.Context, p string, data []byte, v int32) (int32, error) {
	s.mu.Lock()
	err, ok := s.failSet[p]
	delete(s.failSet, p)
	s.mu.Unlock()
	if ok {
		return 0, err
	}
	return s.Store.Set(ctx, p, data, v)
}

func (s *spyMeta) watched(p string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.watches[p]
}

// fixture is a group of runners and backups registered in an in-memory
// metadata store, with a real SQLite job store and the job activities on
// both, under a fake clock.
type fixture struct {
	t       *testing.T
	ctx     context.Context
	mem     *metadata.Memory
	meta    *spyMeta
	c       *metadata.Cluster
	clock   *fakeClock
	timers  roles.Timers
	store   *sqlstore.Store
	a       *jobs.Activities
	runners []string
	backups []string
}

func openStore(t *testing.T) *sqlstore.Store {
	t.Helper()
	st, err := sqlstore.OpenSQLite(testCtx(t), t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// newFixture registers runners sc-crawler_1..n and backups n+1..n+m with
// their GroupState, NodeState, empty Task and a fresh healthy Heartbeat.
func newFixture(t *testing.T, n, m int) *fixture {
	t.Helper()
	mem := metadata.NewMemory()
	f := &fixture{
		t: t, ctx: testCtx(t), mem: mem,
		meta:  &spyMeta{Store: mem, watches: map[string]int{}, failSet: map[string]error{}},
		c:     metadata.NewCluster(mem, "", testGroup),
		clock: &fakeClock{now: t0}, timers: testTimers(), store: openStore(t),
	}
	f.a = &jobs.Activities{Store: f.store, Meta: f.meta, Now: f.clock.Now, Log: quiet()}
	g := roles.NewGroupState(n, m)
	for i := 1; i <= n+m; i++ {
		name := nodeName(i)
		role := roles.RoleRunner
		g.CurrentCrawler = append(g.CurrentCrawler, name)
		if i <= n {
			g.CurrentRunner = append(g.CurrentRunner, name)
			f.runners = append(f.runners, name)
		} else {
			role = roles.RoleBackup
			g.CurrentBackup = append(g.CurrentBackup, name)
			f.backups = append(f.backups, name)
		}
		f.put(f.c.NodePath(name), roles.NodeState{Group: testGroup, Role: role})
		f.put(f.c.TaskPath(name), roles.EmptyTask())
		f.beat(name, t0, roles.HeartHealthy)
	}
	if m > 0 {
		g.StandbyID = strconv.Itoa(n + 1)
	}
	require.NoError(t, g.Validate())
	f.put(f.c.GroupPath(), g)
	return f
}

func (f *fixture) put(p string, v any) {
	f.t.Helper()
	_, err := f.c.Put(f.ctx, p, v, metadata.AnyVersion)
	require.NoError(f.t, err)
}

// beat writes name's heartbeat as taken at `at`.
func (f *fixture) beat(name string, at time.Time, state roles.HeartState) {
	f.t.Helper()
	h := roles.NewHeartbeat(at, f.timers)
	h.HealthyState = state
	f.put(f.c.HeartbeatPath(name), h)
}

func (f *fixture) task(name string) roles.Task {
	f.t.Helper()
	tk, _, err := f.c.GetTask(f.ctx, name)
	require.NoError(f.t, err)
	return tk
}

func (f *fixture) setTask(name string, tk roles.Task) {
	f.t.Helper()
	require.NoError(f.t, tk.Validate())
	f.put(f.c.TaskPath(name), tk)
}

func (f *fixture) setNode(name string, n roles.NodeState) {
	f.t.Helper()
	f.put(f.c.NodePath(name), n)
}

// spec is a job of seeds all on one host, with a parallelism that leaves
// a share of it to every batch and robots.txt ignored (a host whose
// robots.txt is not known is held by one batch): the host leases do not
// hold the batches these tests hand out back (see the tests of
// politeness for those that do).
func (f *fixture) spec(id string, batchSize int, seeds ...string) jobs.Spec {
	return jobs.Spec{ID: id, Group: testGroup, Seeds: seeds, BatchSize: batchSize, Timers: f.timers,
		Options: crawl.Options{Parallelism: 1024, IgnoreRobots: true}}
}

func seedURLs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("http://example.test/p%03d", i)
	}
	return out
}

// start stores the job through JobStart.
func (f *fixture) start(spec jobs.Spec) jobs.Stats {
	f.t.Helper()
	st, err := f.a.JobStart(f.ctx, spec)
	require.NoError(f.t, err)
	return st
}

func (f *fixture) assign(spec jobs.Spec, seq int, inflight ...jobs.BatchRef) jobs.AssignResult {
	f.t.Helper()
	res, err := f.a.JobAssign(f.ctx, jobs.AssignInput{Spec: spec, InFlight: inflight, Seq: seq})
	require.NoError(f.t, err)
	return res
}

func (f *fixture) batch(job, id string) jobs.BatchInfo {
	f.t.Helper()
	infos, err := f.store.Batches(f.ctx, job, []string{id})
	require.NoError(f.t, err)
	require.Len(f.t, infos, 1, "batch %s in the store", id)
	return infos[0]
}

func (f *fixture) stats(job string) jobs.Stats {
	f.t.Helper()
	st, err := f.store.Stats(f.ctx, job)
	require.NoError(f.t, err)
	return st
}

func (f *fixture) entries(job, batch string) []jobs.BatchEntry {
	f.t.Helper()
	es, err := f.store.Entries(f.ctx, job, batch)
	require.NoError(f.t, err)
	return es
}

// record finishes url of a batch as its holder does.
func (f *fixture) record(job, batch, runner string, epoch int64, url string) error {
	page := &jobs.PageRecord{Job: job, Batch: batch, Runner: runner, Epoch: epoch}
	page.URL, page.StatusCode = url, 200
	_, err := f.store.Record(f.ctx, jobs.Record{Job: job, Batch: batch, Runner: runner, Epoch: epoch, URL: url, Page: page})
	return err
}

func urlsOf(es []jobs.BatchEntry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.URL
	}
	return out
}

// awaitAsync runs JobAwait in a goroutine.
type awaitRes struct {
	res jobs.AwaitResult
	err error
}

func (f *fixture) awaitAsync(spec jobs.Spec, inflight []jobs.BatchRef) <-chan awaitRes {
	ch := make(chan awaitRes, 1)
	go func() {
		res, err := f.a.JobAwait(f.ctx, spec, inflight)
		ch <- awaitRes{res, err}
	}()
	return ch
}

func (f *fixture) awaitReturn(ch <-chan awaitRes) (jobs.AwaitResult, error) {
	f.t.Helper()
	select {
	case r := <-ch:
		return r.res, r.err
	case <-time.After(waitLimit):
		f.t.Fatalf("JobAwait did not return within %v", waitLimit)
		return jobs.AwaitResult{}, nil
	}
}

// waitRounds waits until the JobAwait of ch has watched the GroupState n
// times (it does so at the start of each round); it fails if JobAwait
// returned before.
func (f *fixture) waitRounds(ch <-chan awaitRes, n int) {
	f.t.Helper()
	p := f.c.GroupPath()
	deadline := time.Now().Add(waitLimit)
	for f.meta.watched(p) < n {
		select {
		case r := <-ch:
			f.t.Fatalf("JobAwait returned after %d rounds, want it still waiting: %+v, %v", f.meta.watched(p), r.res, r.err)
		default:
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("JobAwait watched %s %d times, want %d", p, f.meta.watched(p), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func eventually(t *testing.T, cond func() bool, format string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: "+format, args...)
		}
		time.Sleep(time.Millisecond)
	}
}

// ---- JobStart ----

func TestJobStartRejectsAnInvalidSpecNamingTheField(t *testing.T) {
	f := newFixture(t, 1, 0)
	good := f.spec("job-1", 10, "http://example.test/")
	require.NoError(t, good.Validate())
	cases := []struct {
		name  string
		mod   func(*jobs.Spec)
		field string
	}{
		{"bad id", func(s *jobs.Spec) { s.ID = "bad id/" }, "id"},
		{"no group", func(s *jobs.Spec) { s.Group = "" }, "group"},
		{"no seeds", func(s *jobs.Spec) { s.Seeds = nil }, "seeds"},
		{"bad seed", func(s *jobs.Spec) { s.Seeds = []string{"http://example.test/", "ftp://example.test/x"} }, "seeds[1]"},
		{"relative seed", func(s *jobs.Spec) { s.Seeds = []string{"/just/a/path"} }, "seeds[0]"},
		{"negative max_pages", func(s *jobs.Spec) { s.MaxPages = -1 }, "max_pages"},
		{"negative batch_size", func(s *jobs.Spec) { s.BatchSize = -1 }, "batch_size"},
		{"bad options", func(s *jobs.Spec) { s.Options.MaxDepth = -2 }, "max_depth"},
		{"bad sitemap", func(s *jobs.Spec) { s.Sitemaps = []string{"sitemap.xml"} }, "sitemaps[0]"},
		{"bad bodies", func(s *jobs.Spec) { s.Bodies = "s3" }, "bodies"},
		{"bodies dir without a path", func(s *jobs.Spec) { s.Bodies = jobs.BodiesDir }, "bodies_path"},
		{"negative seeds_stored", func(s *jobs.Spec) { s.SeedsStored = -1 }, "seeds_stored"},
		{"stored seeds not in the store", func(s *jobs.Spec) { s.Seeds, s.SeedsStored = nil, 5 }, "has no job"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := good
			spec.Seeds = slices.Clone(good.Seeds)
			tc.mod(&spec)
			_, err := f.a.JobStart(f.ctx, spec)
			require.Error(t, err)
			var ae *temporal.ApplicationError
			require.True(t, errors.As(err, &ae), "%v (%T) is not an ApplicationError", err, err)
			assert.Equal(t, jobs.ErrTypeBadJob, ae.Type())
			assert.True(t, ae.NonRetryable(), "a bad spec is not retried")
			assert.Contains(t, err.Error(), tc.field)
			_, serr := f.store.Spec(f.ctx, spec.ID)
			assert.ErrorIs(t, serr, jobs.ErrNoJob, "nothing stored")
		})
	}
}

// Sitemaps are queued as sitemap entries; a job may have only sitemaps.
func TestJobStartQueuesSitemaps(t *testing.T) {
	f := newFixture(t, 1, 0)
	spec := f.spec("job-maps", 10)
	spec.Sitemaps = []string{"http://example.test/sitemap.xml", "HTTP://Example.test:80/robots.txt"}
	st := f.start(spec)
	assert.Equal(t, 2, st.Seen)
	b, err := f.store.TakeBatch(f.ctx, spec.ID, "b", 10)
	require.NoError(t, err)
	require.Equal(t, 2, b.Size)
	for _, e := range f.entries(spec.ID, "b") {
		assert.Equal(t, jobs.SitemapDepth, e.Depth, e.URL)
		assert.Contains(t, []string{"http://example.test/sitemap.xml", "http://example.test/robots.txt"}, e.URL)
	}
}

func TestJobStartWithoutStoreIsNotABadJob(t *testing.T) {
	a := &jobs.Activities{Meta: metadata.NewMemory(), Log: quiet()}
	_, err := a.JobStart(testCtx(t), jobs.Spec{ID: "j", Group: testGroup, Seeds: []string{"http://example.test/"}, BatchSize: 1, Timers: testTimers()})
	require.Error(t, err)
	var ae *temporal.ApplicationError
	assert.False(t, errors.As(err, &ae) && ae.Type() == jobs.ErrTypeBadJob, "a missing store is the worker's problem, not the job's: %v", err)
	assert.Contains(t, err.Error(), "store")
}

func TestJobStartNormalisesAndDeduplicatesSeeds(t *testing.T) {
	f := newFixture(t, 1, 0)
	spec := f.spec("job-norm", 10,
		"HTTP://Example.TEST:80/a/../b#frag",
		"http://example.test/b",
		"http://example.test/q?b=2&a=1",
		"http://example.test/q?a=1&b=2",
		"http://EXAMPLE.test/c",
		"http://example.test/c",
	)
	st := f.start(spec)
	assert.Equal(t, jobs.Stats{Seen: 3, Queued: 3}, st)
	b, err := f.store.TakeBatch(f.ctx, spec.ID, "take-all", 10)
	require.NoError(t, err)
	require.Equal(t, 3, b.Size)
	es := f.entries(spec.ID, "take-all")
	assert.ElementsMatch(t, []string{"http://example.test/b", "http://example.test/q?a=1&b=2", "http://example.test/c"}, urlsOf(es))
	for _, e := range es {
		assert.Equal(t, 0, e.Depth, "seeds are at depth 0")
	}
	got, err := f.store.Spec(f.ctx, spec.ID)
	require.NoError(t, err)
	assert.Equal(t, spec.BatchSize, got.BatchSize)
	assert.Equal(t, spec.Timers, got.Timers)
}

func TestJobStartIsIdempotent(t *testing.T) {
	f := newFixture(t, 1, 0)
	spec := f.spec("job-idem", 2, seedURLs(5)...)
	first := f.start(spec)
	assert.Equal(t, jobs.Stats{Seen: 5, Queued: 5}, first)
	again := f.start(spec)
	assert.Equal(t, first, again, "a retried JobStart changes nothing")
	// Once the crawl has moved on, a late retry does not queue the seeds again.
	_, err := f.store.TakeBatch(f.ctx, spec.ID, "b", 5)
	require.NoError(t, err)
	late := f.start(spec)
	assert.Equal(t, jobs.Stats{Seen: 5, Queued: 0}, late)
}

// ---- JobAssign ----

// assertAssignedTask checks a runner's Task is a reference to batch,
// held and processing, at an epoch above before, and that the store holds
// the batch for the runner at the same epoch.
func (f *fixture) assertAssignedTask(spec jobs.Spec, ref jobs.BatchRef, before int64) {
	f.t.Helper()
	tk := f.task(ref.Runner)
	require.NotNil(f.t, tk.Job, "%s's Task names its batch", ref.Runner)
	assert.Equal(f.t, roles.JobRef{ID: spec.ID, Batch: ref.Batch, Size: ref.Size}, *tk.Job)
	assert.Equal(f.t, ref.Runner, tk.Holder)
	assert.Equal(f.t, roles.TaskProcessing, tk.RunningStatus)
	assert.Greater(f.t, tk.Epoch, before, "epoch raised")
	assert.Empty(f.t, tk.RunningContent, "no URL in the znode")
	assert.Zero(f.t, tk.NextIndex)
	b := f.batch(spec.ID, ref.Batch)
	assert.Equal(f.t, ref.Runner, b.Holder)
	assert.Equal(f.t, tk.Epoch, b.Epoch, "store and Task agree on the epoch")
	assert.Equal(f.t, jobs.BatchRunning, b.State)
	assert.Equal(f.t, ref.Size, b.Size)
	assert.Len(f.t, f.entries(spec.ID, ref.Batch), ref.Size)
}

func runnersOf(refs []jobs.BatchRef) []string {
	out := []string{}
	for _, r := range refs {
		out = append(out, r.Runner)
	}
	return out
}

func batchesOf(refs []jobs.BatchRef) []string {
	out := []string{}
	for _, r := range refs {
		out = append(out, r.Batch)
	}
	return out
}

func TestJobAssignGivesOneBatchToEachIdleRunner(t *testing.T) {
	f := newFixture(t, 3, 1)
	spec := f.spec("job-a", 2, seedURLs(10)...)
	f.start(spec)
	backupBefore := f.task(f.backups[0])

	res := f.assign(spec, 0)
	require.Len(t, res.Assigned, 3)
	assert.ElementsMatch(t, f.runners, runnersOf(res.Assigned), "one batch per runner, none to the backup")
	assert.Equal(t, []string{jobs.BatchID(spec.ID, 0), jobs.BatchID(spec.ID, 1), jobs.BatchID(spec.ID, 2)},
		sortedCopy(batchesOf(res.Assigned)), "batch IDs follow Seq")
	for _, ref := range res.Assigned {
		assert.Equal(t, 2, ref.Size)
		f.assertAssignedTask(spec, ref, 0)
	}
	assert.Equal(t, jobs.Stats{Seen: 10, Queued: 4}, res.Stats)
	assert.Equal(t, backupBefore, f.task(f.backups[0]), "the backup's Task is untouched")
	// Every URL handed out is in exactly one batch.
	var all []string
	for _, ref := range res.Assigned {
		all = append(all, urlsOf(f.entries(spec.ID, ref.Batch))...)
	}
	assert.Len(t, all, 6)
	assert.Len(t, sortedCopy(all), len(slices.Compact(sortedCopy(all))), "no URL in two batches")
}

func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}

func TestJobAssignSkipsStaleDeadAndBusyRunners(t *testing.T) {
	f := newFixture(t, 5, 1)
	spec := f.spec("job-skip", 1, seedURLs(10)...)
	f.start(spec)
	f.clock.Set(t0.Add(time.Second))
	r := f.runners
	f.beat(r[0], t0.Add(time.Second), roles.HeartHealthy)         // fresh
	f.beat(r[1], t0.Add(-2*time.Second), roles.HeartHealthy)      // 3 s old: late (update_timeout 2 s)
	f.beat(r[2], t0.Add(time.Second), roles.HeartHealthy)         // fresh, but a Task is pending
	f.beat(r[3], t0.Add(time.Second), roles.HeartApparentDeath)   // declared dead
	f.beat(r[4], t0.Add(time.Second), roles.HeartHealthy)         // fresh, but a job Task is pending
	f.beat(f.backups[0], t0.Add(time.Second), roles.HeartHealthy) // fresh, but a backup
	plain := roles.EmptyTask()
	plain.Epoch = 3
	plain.RunningContent = []roles.Request{{TaskID: 1, URL: "http://other.test/", Method: "GET"}}
	f.setTask(r[2], plain)
	other := roles.EmptyTask()
	other.Epoch, other.Holder, other.RunningStatus = 4, r[4], roles.TaskNothing
	other.Job = &roles.JobRef{ID: "another-job", Batch: "another-job-b000007", Size: 3}
	f.setTask(r[4], other)
	before := map[string]roles.Task{}
	for _, n := range append(slices.Clone(r), f.backups...) {
		before[n] = f.task(n)
	}

	res := f.assign(spec, 0)
	require.Len(t, res.Assigned, 1)
	assert.Equal(t, r[0], res.Assigned[0].Runner)
	f.assertAssignedTask(spec, res.Assigned[0], 0)
	for _, n := range append(r[1:], f.backups...) {
		assert.Equal(t, before[n], f.task(n), "%s gets nothing", n)
	}
	assert.Equal(t, 9, res.Stats.Queued)
}

// A batch taken for a Runner that became busy before its Task was written,
// with no other idle Runner, goes back to the frontier: the job must not
// see "nothing queued, nothing in flight" and end with those URLs lost.
func TestJobAssignRequeuesABatchNoRunnerGot(t *testing.T) {
	f := newFixture(t, 1, 0)
	spec := f.spec("job-busy", 10, seedURLs(3)...)
	f.start(spec)
	r := f.runners[0]
	f.meta.mu.Lock()
	f.meta.failSet[f.c.TaskPath(r)] = metadata.ErrBadVersion // its Task changed after it was read
	f.meta.mu.Unlock()
	res := f.assign(spec, 0)
	require.Len(t, res.Assigned, 1)
	assert.Equal(t, jobs.BatchRef{Batch: jobs.BatchID(spec.ID, 0)}, res.Assigned[0], "reported with no Runner")
	assert.Equal(t, 3, res.Stats.Queued, "its URLs are queued again")
	infos, err := f.store.Batches(f.ctx, spec.ID, []string{jobs.BatchID(spec.ID, 0)})
	require.NoError(t, err)
	require.Len(t, infos, 1)
	assert.Equal(t, jobs.BatchRequeued, infos[0].State)

	// The next round gives them to the Runner under the next batch ID.
	res = f.assign(spec, 1, res.Assigned...)
	require.Len(t, res.Assigned, 1)
	assert.Equal(t, r, res.Assigned[0].Runner)
	assert.Equal(t, jobs.BatchID(spec.ID, 1), res.Assigned[0].Batch)
	assert.Equal(t, 3, res.Assigned[0].Size)
}

// A JobAssign whose first attempt took a batch and failed before any
// Runner's Task named it, retried when no Runner is idle any more (another
// job's batch went to it meanwhile): the batch's URLs go back to the
// frontier and the batch is reported with no Runner. Otherwise the job
// sees nothing queued and nothing in flight and ends at once, its seed
// never fetched (TestPolitenessTwoJobsShareAHost under load).
func TestJobAssignRetryRequeuesWhatItsFirstAttemptTookWhenNoRunnerIsIdle(t *testing.T) {
	f := newFixture(t, 1, 0)
	spec := f.spec("job-retry-busy", 10, seedURLs(3)...)
	f.start(spec)
	r := f.runners[0]
	boom := errors.New("connection loss")
	f.meta.mu.Lock()
	f.meta.failSet[f.c.TaskPath(r)] = boom
	f.meta.mu.Unlock()
	_, err := f.a.JobAssign(f.ctx, jobs.AssignInput{Spec: spec, Seq: 0})
	require.ErrorIs(t, err, boom)
	f.meta.mu.Lock()
	delete(f.meta.failSet, f.c.TaskPath(r))
	f.meta.mu.Unlock()
	busy := roles.EmptyTask()
	busy.Epoch, busy.Holder, busy.RunningStatus = 5, r, roles.TaskProcessing
	busy.Job = &roles.JobRef{ID: "other", Batch: "other-b000000", Size: 1}
	f.setTask(r, busy)

	res := f.assign(spec, 0)
	assert.Equal(t, []jobs.BatchRef{{Batch: jobs.BatchID(spec.ID, 0)}}, res.Assigned, "reported with no Runner")
	assert.Equal(t, 3, res.Stats.Queued, "its URLs are queued again")
	assert.Equal(t, jobs.BatchRequeued, f.batch(spec.ID, jobs.BatchID(spec.ID, 0)).State)
	assert.Equal(t, busy, f.task(r), "the busy Runner's Task is left alone")

	// Once the Runner is idle again, the next round gives it the URLs.
	f.setTask(r, roles.EmptyTask())
	res = f.assign(spec, 1, res.Assigned...)
	require.Len(t, res.Assigned, 1)
	assert.Equal(t, jobs.BatchRef{Batch: jobs.BatchID(spec.ID, 1), Runner: r, Size: 3}, res.Assigned[0])
}

func TestJobAssignSkipsRunnersAlreadyInFlight(t *testing.T) {
	f := newFixture(t, 2, 0)
	spec := f.spec("job-inflight", 1, seedURLs(4)...)
	f.start(spec)
	// The workflow thinks runner 1 holds a batch (its Task was written
	// back as done already): it is not given another one.
	res := f.assign(spec, 5, jobs.BatchRef{Batch: jobs.BatchID(spec.ID, 4), Runner: f.runners[0], Size: 1})
	require.Len(t, res.Assigned, 1)
	assert.Equal(t, jobs.BatchRef{Batch: jobs.BatchID(spec.ID, 5), Runner: f.runners[1], Size: 1}, res.Assigned[0])
}

func TestJobAssignRetryWithTheSameSeqReturnsTheSameBatches(t *testing.T) {
	f := newFixture(t, 3, 0)
	spec := f.spec("job-retry", 2, seedURLs(10)...)
	f.start(spec)
	first := f.assign(spec, 0)
	require.Len(t, first.Assigned, 3)
	tasks := map[string]roles.Task{}
	for _, n := range f.runners {
		tasks[n] = f.task(n)
	}

	// The first attempt's result was lost (worker died, timeout): Temporal
	// runs JobAssign again with the same input.
	again := f.assign(spec, 0)
	assert.ElementsMatch(t, first.Assigned, again.Assigned, "a retried JobAssign must report the batches it handed out")
	assert.Equal(t, first.Stats, again.Stats, "no new URLs taken")
	for _, n := range f.runners {
		assert.Equal(t, tasks[n], f.task(n), "%s's Task not rewritten", n)
	}
	for _, ref := range first.Assigned {
		b := f.batch(spec.ID, ref.Batch)
		assert.Equal(t, ref.Runner, b.Holder)
		assert.Equal(t, tasks[ref.Runner].Epoch, b.Epoch)
	}
}

// A JobAssign that failed half-way (here the Task write of one runner) is
// retried with the same Seq: the batch already taken is not taken again and
// the runner already given one keeps it.
func TestJobAssignRetryAfterAPartialAttempt(t *testing.T) {
	f := newFixture(t, 2, 0)
	spec := f.spec("job-partial", 2, seedURLs(8)...)
	f.start(spec)
	boom := errors.New("connection loss")
	// Runner order is rotated by Seq; fail whichever Task write comes second.
	f.meta.mu.Lock()
	f.meta.failSet[f.c.TaskPath(f.runners[1])] = boom
	f.meta.mu.Unlock()
	_, err := f.a.JobAssign(f.ctx, jobs.AssignInput{Spec: spec, Seq: 0})
	require.ErrorIs(t, err, boom)
	got1 := f.task(f.runners[0])
	require.NotNil(t, got1.Job)
	require.Equal(t, jobs.BatchID(spec.ID, 0), got1.Job.Batch)

	res := f.assign(spec, 0)
	want := []jobs.BatchRef{
		{Batch: jobs.BatchID(spec.ID, 0), Runner: f.runners[0], Size: 2},
		{Batch: jobs.BatchID(spec.ID, 1), Runner: f.runners[1], Size: 2},
	}
	assert.ElementsMatch(t, want, res.Assigned)
	assert.Equal(t, jobs.Stats{Seen: 8, Queued: 4}, res.Stats, "two batches of two taken in all")
	b0 := f.batch(spec.ID, jobs.BatchID(spec.ID, 0))
	assert.Equal(t, f.runners[0], b0.Holder, "batch 0 stays with the runner whose Task names it")
	assert.Equal(t, got1.Epoch, b0.Epoch, "runner 1 is not fenced out of its own batch")
	// No batch is left in the store that no Task names (its URLs would
	// never be crawled, and the workflow does not know it).
	named := map[string]bool{}
	for _, n := range f.runners {
		if tk := f.task(n); tk.Job != nil {
			named[tk.Job.Batch] = true
		}
	}
	for _, id := range []string{jobs.BatchID(spec.ID, 0), jobs.BatchID(spec.ID, 1)} {
		if b := f.batch(spec.ID, id); b.State == jobs.BatchRunning {
			assert.True(t, named[id], "batch %s is running in the store (holder %s, epoch %d) but no runner's Task names it", id, b.Holder, b.Epoch)
		}
	}
}

func TestJobAssignSharesAShortFrontierAmongAllRunners(t *testing.T) {
	t.Run("all idle", func(t *testing.T) {
		f := newFixture(t, 3, 0)
		spec := f.spec("job-short", 100, seedURLs(3)...)
		f.start(spec)
		res := f.assign(spec, 0)
		require.Len(t, res.Assigned, 3, "3 URLs for 3 runners: one each, not all to the first")
		for _, ref := range res.Assigned {
			assert.Equal(t, 1, ref.Size)
		}
		assert.Zero(t, res.Stats.Queued)
	})
	t.Run("some busy", func(t *testing.T) {
		f := newFixture(t, 3, 0)
		spec := f.spec("job-short2", 100, seedURLs(3)...)
		f.start(spec)
		busy := roles.EmptyTask()
		busy.Epoch, busy.Holder, busy.RunningStatus = 1, f.runners[2], roles.TaskProcessing
		busy.Job = &roles.JobRef{ID: "other", Batch: "other-b000000", Size: 1}
		f.setTask(f.runners[2], busy)
		res := f.assign(spec, 0)
		require.Len(t, res.Assigned, 2)
		for _, ref := range res.Assigned {
			assert.Equal(t, 1, ref.Size, "the frontier is split over the 3 runners of the group")
		}
		assert.Equal(t, 1, res.Stats.Queued, "one URL left for the busy runner")
	})
	t.Run("long frontier", func(t *testing.T) {
		f := newFixture(t, 2, 0)
		spec := f.spec("job-long", 5, seedURLs(40)...)
		f.start(spec)
		res := f.assign(spec, 0)
		require.Len(t, res.Assigned, 2)
		for _, ref := range res.Assigned {
			assert.Equal(t, 5, ref.Size, "full batches while the frontier is long")
		}
	})
}

func TestJobAssignGivesNothingWhenTheFrontierIsEmpty(t *testing.T) {
	f := newFixture(t, 2, 0)
	spec := f.spec("job-empty", 10, "http://example.test/only")
	f.start(spec)
	res := f.assign(spec, 0)
	require.Len(t, res.Assigned, 1, "one URL, one batch")
	idle := f.runners[0]
	if res.Assigned[0].Runner == idle {
		idle = f.runners[1]
	}
	before := f.task(idle)

	again := f.assign(spec, 1, res.Assigned...)
	assert.Empty(t, again.Assigned)
	assert.Equal(t, jobs.Stats{Seen: 1, Queued: 0}, again.Stats)
	assert.Equal(t, before, f.task(idle), "no Task written for an empty batch")
	infos, err := f.store.Batches(f.ctx, spec.ID, []string{jobs.BatchID(spec.ID, 1)})
	require.NoError(t, err)
	assert.Empty(t, infos, "no empty batch stored")
}

// Between Activate and HandOver the runner taking over a dead peer is not
// idle: its Task is about to be the dead peer's, so a job must not give it
// a batch then. After the hand-over it runs the dead peer's Task.
func TestJobAssignSkipsARunnerTakingOver(t *testing.T) {
	f := newFixture(t, 2, 1)
	spec := f.spec("job-takeover", 1, seedURLs(5)...)
	f.start(spec)
	r1, dead, x := f.runners[0], f.runners[1], f.backups[0]
	// sc-crawler_2 died holding a pending Task; sc-crawler_3 claimed it
	// (taken_over_by) and was activated as a runner, but has not taken the
	// Task yet.
	deadTask := roles.EmptyTask()
	deadTask.Epoch, deadTask.Holder, deadTask.RunningStatus = 2, dead, roles.TaskProcessing
	deadTask.Job = &roles.JobRef{ID: "older-job", Batch: "older-job-b000003", Size: 4}
	f.setTask(dead, deadTask)
	f.setNode(dead, roles.NodeState{Group: testGroup, Role: roles.RoleDeadRunner, TakenOverBy: x})
	f.setNode(x, roles.NodeState{Group: testGroup, Role: roles.RoleRunner})
	g := roles.NewGroupState(2, 0)
	g.CurrentCrawler = []string{r1, x}
	g.CurrentRunner = []string{r1, x}
	g.FailCrawler = []string{dead}
	g.FailRunner = []string{dead}
	f.put(f.c.GroupPath(), g)
	f.beat(dead, t0.Add(-time.Minute), roles.HeartApparentDeath)
	xBefore := f.task(x)

	res := f.assign(spec, 0)
	require.Len(t, res.Assigned, 1)
	assert.Equal(t, r1, res.Assigned[0].Runner, "%s is busy taking over %s", x, dead)
	assert.Equal(t, xBefore, f.task(x))

	// HandOver: the dead Task is now held by x, and x's own Task runs it.
	handed, ok := roles.HandOver(deadTask, dead, x)
	require.True(t, ok)
	deadAfter := deadTask.Clone()
	deadAfter.Epoch, deadAfter.Holder = handed.Epoch, x
	f.setTask(dead, deadAfter)
	f.setTask(x, handed)
	res2 := f.assign(spec, 1, res.Assigned...)
	assert.Empty(t, res2.Assigned, "%s runs the handed-over Task", x)

	// Once x is done with it, x is idle again.
	handed.RunningStatus = roles.TaskDone
	f.setTask(x, handed)
	res3 := f.assign(spec, 1, res.Assigned...)
	require.Len(t, res3.Assigned, 1)
	assert.Equal(t, x, res3.Assigned[0].Runner)
}

// ---- JobAwait ----

// startOne starts a job of n seeds in one batch given to the only runner.
func startOne(t *testing.T, f *fixture, id string, n int) (jobs.Spec, jobs.BatchRef, roles.Task) {
	t.Helper()
	spec := f.spec(id, n, seedURLs(n)...)
	f.start(spec)
	res := f.assign(spec, 0)
	require.Len(t, res.Assigned, 1)
	ref := res.Assigned[0]
	require.Equal(t, n, ref.Size)
	return spec, ref, f.task(ref.Runner)
}

func TestJobAwaitReportsADoneBatch(t *testing.T) {
	f := newFixture(t, 1, 0)
	spec, ref, tk := startOne(t, f, "job-done", 3)
	ch := f.awaitAsync(spec, []jobs.BatchRef{ref})
	f.waitRounds(ch, 2)
	for _, e := range f.entries(spec.ID, ref.Batch) {
		require.NoError(t, f.record(spec.ID, ref.Batch, ref.Runner, tk.Epoch, e.URL))
	}
	_, err := f.store.FinishBatch(f.ctx, spec.ID, ref.Batch, tk.Epoch)
	require.NoError(t, err)
	res, err := f.awaitReturn(ch)
	require.NoError(t, err)
	assert.Equal(t, []jobs.BatchRef{ref}, res.Done)
	assert.Empty(t, res.Requeued)
	assert.Empty(t, res.Failed)
	assert.Equal(t, jobs.Stats{Seen: 3, Queued: 0, Recorded: 3}, res.Stats)
}

func TestJobAwaitReportsAFailedBatchWithTheReason(t *testing.T) {
	f := newFixture(t, 1, 0)
	spec, ref, tk := startOne(t, f, "job-fail", 2)
	ch := f.awaitAsync(spec, []jobs.BatchRef{ref})
	f.waitRounds(ch, 2)
	// The runner ends its Task as terminate at the batch's epoch: it could
	// not run it, and says why.
	tk.RunningStatus = roles.TaskTerminate
	tk.ResultDetail = []roles.ResultDetail{{State: roles.TaskTerminate, ErrorMsg: "job job-fail: its spec cannot be read", Epoch: tk.Epoch}}
	f.setTask(ref.Runner, tk)
	res, err := f.awaitReturn(ch)
	require.NoError(t, err)
	assert.Equal(t, []jobs.BatchRef{ref}, res.Failed)
	assert.Contains(t, res.Error, "its spec cannot be read")
	assert.Contains(t, res.Error, ref.Batch)
	assert.Empty(t, res.Done)
	assert.Empty(t, res.Requeued)
	b := f.batch(spec.ID, ref.Batch)
	assert.Equal(t, jobs.BatchFailed, b.State)
	assert.Contains(t, b.Error, "its spec cannot be read")

	// Reported again (the batch is failed in the store) if asked again.
	again, err := f.a.JobAwait(f.ctx, spec, []jobs.BatchRef{ref})
	require.NoError(t, err)
	assert.Equal(t, []jobs.BatchRef{ref}, again.Failed)
}

func TestJobAwaitRequeuesAnOrphanBatch(t *testing.T) {
	f := newFixture(t, 1, 0)
	spec, ref, tk := startOne(t, f, "job-orphan", 4)
	urls := urlsOf(f.entries(spec.ID, ref.Batch))
	require.NoError(t, f.record(spec.ID, ref.Batch, ref.Runner, tk.Epoch, urls[0]))
	// The holder's last heartbeat is older than the orphan bound and
	// nobody claimed it.
	f.clock.Set(t0.Add(orphanAfter() + time.Second))

	res, err := f.a.JobAwait(f.ctx, spec, []jobs.BatchRef{ref})
	require.NoError(t, err)
	assert.Equal(t, []jobs.BatchRef{ref}, res.Requeued)
	assert.Empty(t, res.Done)
	assert.Equal(t, jobs.Stats{Seen: 4, Queued: 3, Recorded: 1}, res.Stats, "the 3 unfinished URLs are queued again")

	b := f.batch(spec.ID, ref.Batch)
	assert.Equal(t, jobs.BatchRequeued, b.State)
	assert.Greater(t, b.Epoch, tk.Epoch, "the store fenced the dead holder")
	dead := f.task(ref.Runner)
	assert.Equal(t, roles.TaskTerminate, dead.RunningStatus, "the dead holder's Task is ended")
	assert.Equal(t, b.Epoch, dead.Epoch, "at the fencing epoch")
	require.NotNil(t, dead.Job)
	assert.Equal(t, ref.Batch, dead.Job.Batch)

	// The dead holder comes back and writes: refused.
	err = f.record(spec.ID, ref.Batch, ref.Runner, tk.Epoch, urls[1])
	assert.ErrorIs(t, err, jobs.ErrStale)

	// The unfinished URLs are in the frontier again, for the next batch.
	nb, err := f.store.TakeBatch(f.ctx, spec.ID, jobs.BatchID(spec.ID, 1), 10)
	require.NoError(t, err)
	assert.Equal(t, 3, nb.Size)
	assert.ElementsMatch(t, urls[1:], urlsOf(f.entries(spec.ID, nb.ID)))
}

func TestJobAwaitDoesNotRequeueABatchBeingHandedOver(t *testing.T) {
	f := newFixture(t, 1, 1)
	spec, ref, tk := startOne(t, f, "job-handover", 3)
	holder, backup := ref.Runner, f.backups[0]
	// The holder is dead, but the live backup claimed it.
	f.setNode(holder, roles.NodeState{Group: testGroup, Role: roles.RoleDeadRunner, TakenOverBy: backup})
	f.clock.Set(t0.Add(orphanAfter() + time.Second))
	f.beat(backup, f.clock.Now(), roles.HeartHealthy)

	ch := f.awaitAsync(spec, []jobs.BatchRef{ref})
	f.waitRounds(ch, 3) // two rounds seen the orphan, left it
	select {
	case r := <-ch:
		t.Fatalf("JobAwait returned early: %+v, %v", r.res, r.err)
	default:
	}
	f.clock.Set(f.clock.Now().Add(6 * time.Second)) // past JobAwait's deadline
	res, err := f.awaitReturn(ch)
	require.NoError(t, err)
	assert.Empty(t, res.Requeued)
	assert.Empty(t, res.Done)
	assert.Empty(t, res.Failed)
	b := f.batch(spec.ID, ref.Batch)
	assert.Equal(t, jobs.BatchRunning, b.State)
	assert.Equal(t, tk.Epoch, b.Epoch)
	assert.Equal(t, tk, f.task(holder), "the Task waits for the backup's hand-over")
	assert.NoError(t, f.record(spec.ID, ref.Batch, holder, tk.Epoch, urlsOf(f.entries(spec.ID, ref.Batch))[0]),
		"not fenced in the store")
}

// If the instance that claimed the dead holder died too, nobody will hand
// the batch over: it is re-queued.
func TestJobAwaitRequeuesWhenTheClaimerIsDeadToo(t *testing.T) {
	f := newFixture(t, 1, 1)
	spec, ref, _ := startOne(t, f, "job-claimer-dead", 2)
	holder, backup := ref.Runner, f.backups[0]
	f.setNode(holder, roles.NodeState{Group: testGroup, Role: roles.RoleDeadRunner, TakenOverBy: backup})
	f.setNode(backup, roles.NodeState{Group: testGroup, Role: roles.RoleDeadBackupRunner})
	f.clock.Set(t0.Add(orphanAfter() + time.Second))
	res, err := f.a.JobAwait(f.ctx, spec, []jobs.BatchRef{ref})
	require.NoError(t, err)
	assert.Equal(t, []jobs.BatchRef{ref}, res.Requeued)
	assert.Equal(t, jobs.BatchRequeued, f.batch(spec.ID, ref.Batch).State)
}

// A holder whose heartbeat is late but younger than the orphan bound is
// left alone (the backups have not decided yet).
func TestJobAwaitWaitsForTheOrphanBound(t *testing.T) {
	f := newFixture(t, 1, 0)
	spec, ref, _ := startOne(t, f, "job-late", 2)
	f.clock.Set(t0.Add(orphanAfter() - 500*time.Millisecond))
	ch := f.awaitAsync(spec, []jobs.BatchRef{ref})
	f.waitRounds(ch, 3)
	f.clock.Set(t0.Add(orphanAfter() + time.Millisecond))
	res, err := f.awaitReturn(ch)
	require.NoError(t, err)
	assert.Equal(t, []jobs.BatchRef{ref}, res.Requeued, "requeued once the bound passed, in the same call")
}

func TestJobAwaitReturnsAtItsDeadlineWithFreshStats(t *testing.T) {
	f := newFixture(t, 1, 0)
	spec, ref, tk := startOne(t, f, "job-quiet", 3)
	start := f.clock.Now()
	ch := f.awaitAsync(spec, []jobs.BatchRef{ref})
	f.waitRounds(ch, 3)
	select {
	case r := <-ch:
		t.Fatalf("JobAwait returned before its deadline: %+v, %v", r.res, r.err)
	default:
	}
	// Progress that wakes no watch: a page recorded in the store.
	require.NoError(t, f.record(spec.ID, ref.Batch, ref.Runner, tk.Epoch, urlsOf(f.entries(spec.ID, ref.Batch))[0]))
	f.clock.Set(start.Add(5*time.Second + time.Millisecond))
	res, err := f.awaitReturn(ch)
	require.NoError(t, err)
	assert.Empty(t, res.Done)
	assert.Empty(t, res.Requeued)
	assert.Empty(t, res.Failed)
	assert.False(t, res.Idle)
	assert.Equal(t, jobs.Stats{Seen: 3, Queued: 0, Recorded: 1}, res.Stats, "counters read after the last change")
}

func TestJobAwaitSaysWhenAnIdleRunnerCouldTakeWork(t *testing.T) {
	f := newFixture(t, 2, 0)
	spec := f.spec("job-idle", 1, seedURLs(3)...)
	f.start(spec)
	res := f.assign(spec, 0)
	require.Len(t, res.Assigned, 2)
	ref := res.Assigned[0]
	tk := f.task(ref.Runner)
	// One runner finishes its batch and its Task; one URL is still queued.
	es := f.entries(spec.ID, ref.Batch)
	require.NoError(t, f.record(spec.ID, ref.Batch, ref.Runner, tk.Epoch, es[0].URL))
	_, err := f.store.FinishBatch(f.ctx, spec.ID, ref.Batch, tk.Epoch)
	require.NoError(t, err)
	tk.RunningStatus = roles.TaskDone
	f.setTask(ref.Runner, tk)
	aw, err := f.a.JobAwait(f.ctx, spec, res.Assigned[1:])
	require.NoError(t, err)
	assert.True(t, aw.Idle, "%s is idle and 1 URL is queued", ref.Runner)
	assert.Equal(t, 1, aw.Stats.Queued)
}

func TestJobAwaitWithNothingInFlightAndAnEmptyFrontierReturnsAtOnce(t *testing.T) {
	f := newFixture(t, 1, 0)
	spec, ref, tk := startOne(t, f, "job-finished", 1)
	require.NoError(t, f.record(spec.ID, ref.Batch, ref.Runner, tk.Epoch, urlsOf(f.entries(spec.ID, ref.Batch))[0]))
	_, err := f.store.FinishBatch(f.ctx, spec.ID, ref.Batch, tk.Epoch)
	require.NoError(t, err)
	res, err := f.a.JobAwait(f.ctx, spec, nil)
	require.NoError(t, err)
	assert.Equal(t, jobs.Stats{Seen: 1, Recorded: 1}, res.Stats)
	// A batch that was never stored (an empty frontier) counts as done.
	ghost := jobs.BatchRef{Batch: jobs.BatchID(spec.ID, 9), Runner: ref.Runner}
	res, err = f.a.JobAwait(f.ctx, spec, []jobs.BatchRef{ghost})
	require.NoError(t, err)
	assert.Equal(t, []jobs.BatchRef{ghost}, res.Done)
}

// A job submitted without timers takes the group's (the worker's): its
// orphan bound is theirs, not the defaults'.
func TestJobAwaitUsesTheGroupsTimers(t *testing.T) {
	f := newFixture(t, 1, 0)
	f.timers = roles.Timers{} // the spec names none
	f.a.Timers = testTimers()
	spec, ref, _ := startOne(t, f, "job-group-timers", 2)
	require.Zero(t, spec.Timers)
	// Past the group's bound, well within the default profile's.
	require.Less(t, orphanAfter()+time.Second, 2*roles.DefaultTimers().DetectionBound()+2*time.Second)
	f.clock.Set(t0.Add(orphanAfter() + time.Second))
	ctx, cancel := context.WithTimeout(f.ctx, 3*time.Second)
	defer cancel()
	res, err := f.a.JobAwait(ctx, spec, []jobs.BatchRef{ref})
	require.NoError(t, err, "the orphan was not re-queued: the default timers were used")
	assert.Equal(t, []jobs.BatchRef{ref}, res.Requeued)
}

// The job's supervisor sets baton_frontier_queued_urls at each read of the
// job's counters: JobStart, JobAssign (and JobAwait).
func TestSupervisorSetsTheQueuedGauge(t *testing.T) {
	f := newFixture(t, 3, 1)
	reg := prometheus.NewRegistry()
	m, err := prommetrics.New(reg)
	require.NoError(t, err)
	f.a.Metrics = m
	spec := f.spec("job-q", 2, seedURLs(10)...)
	queued := func() float64 {
		t.Helper()
		mfs, err := reg.Gather()
		require.NoError(t, err)
		for _, mf := range mfs {
			if mf.GetName() == "baton_frontier_queued_urls" {
				for _, s := range mf.GetMetric() {
					for _, l := range s.GetLabel() {
						if l.GetName() == telemetry.LabelJob && l.GetValue() == spec.ID {
							return s.GetGauge().GetValue()
						}
					}
				}
			}
		}
		t.Fatal("no baton_frontier_queued_urls series of the job")
		return 0
	}
	f.start(spec)
	assert.Equal(t, 10.0, queued())
	f.assign(spec, 0)
	assert.Equal(t, 4.0, queued(), "3 batches of 2 handed out")
}

// TestJobAssignStartGivesEveryIdleRunnerABatch: a new job's first
// JobAssign gives the seed to one Runner and a start batch (empty: it
// pulls the first links itself, BatchRunner) to each Runner still idle,
// so that every Runner crawls from the first links on (before: they
// waited for the links to be recorded and handed out, tens of
// milliseconds). It lingers until every batch ended (a one-page job
// completes in that call), not only the first.
func TestJobAssignStartGivesEveryIdleRunnerABatch(t *testing.T) {
	f := newFixture(t, 3, 0)
	// It lingers until every batch ended, however slow the machine.
	f.a.StartLinger = waitLimit
	spec := f.spec("job-start", 0, "http://example.test/")
	done := make(chan jobs.AssignResult, 1)
	go func() {
		res, err := f.a.JobAssign(f.ctx, jobs.AssignInput{Spec: spec, Start: true})
		assert.NoError(t, err)
		done <- res
	}()
	tasks := map[string]roles.Task{}
	require.Eventually(t, func() bool {
		for _, r := range f.runners {
			if t := f.task(r); t.Job != nil {
				tasks[r] = t
			}
		}
		return len(tasks) == 3
	}, waitLimit, time.Millisecond, "every Runner's Task names a batch")
	sizes := []int{}
	for _, tk := range tasks {
		sizes = append(sizes, tk.Job.Size)
	}
	assert.ElementsMatch(t, []int{1, 0, 0}, sizes, "the seed's batch and two start batches")
	// The batches end as their Runners would end them (the start batches
	// first, empty; then the seed's page, without links): the Task
	// written done after the batch.
	order := slices.SortedFunc(maps.Keys(tasks), func(a, b string) int { return tasks[a].Job.Size - tasks[b].Job.Size })
	for _, r := range order {
		tk := tasks[r]
		if tk.Job.Size > 0 {
			require.NoError(t, f.record(spec.ID, tk.Job.Batch, r, tk.Epoch, "http://example.test/"))
		}
		_, err := f.store.FinishBatch(f.ctx, spec.ID, tk.Job.Batch, tk.Epoch)
		require.NoError(t, err)
		tk.RunningStatus = roles.TaskDone
		f.setTask(r, tk)
	}
	var res jobs.AssignResult
	select {
	case res = <-done:
	case <-time.After(waitLimit):
		t.Fatalf("JobAssign did not return within %v", waitLimit)
	}
	require.Len(t, res.Assigned, 3)
	assert.ElementsMatch(t, f.runners, runnersOf(res.Assigned))
	assert.ElementsMatch(t, res.Assigned, res.Done, "it lingered until every batch ended")
	assert.Equal(t, jobs.Stats{Seen: 1, Recorded: 1}, res.Stats)
}
