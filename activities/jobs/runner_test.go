package jobs_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/activities/jobs/sqlstore"
	"github.com/batoncrawl/baton/activities/telemetry"
	"github.com/batoncrawl/baton/activities/telemetry/prommetrics"
	"github.com/batoncrawl/baton/roles"
)

// fetchCall is one call of the fake fetcher.
type fetchCall struct {
	req   roles.Request
	auth  crawl.Auth
	depth int
	opts  crawl.Options
}

// fakePages is a concurrency-safe crawl.Fetcher: it answers pages[url] (a
// 200 page by default), counts calls and the peak of concurrent calls, and,
// while gate is set, blocks each call until the test sends on gate (one
// call) or closes it (all).
type fakePages struct {
	mu       sync.Mutex
	pages    map[string]crawl.Page
	calls    []fetchCall
	inFlight int
	peak     int
	gate     chan struct{}
}

func newFakePages() *fakePages { return &fakePages{pages: map[string]crawl.Page{}} }

func (f *fakePages) FetchSitemap(ctx context.Context, req roles.Request, auth crawl.Auth, opts crawl.Options) crawl.Page {
	p := f.Fetch(ctx, req, auth, 0, opts)
	p.Sitemap = true
	return p
}

func (f *fakePages) Fetch(ctx context.Context, req roles.Request, auth crawl.Auth, depth int, opts crawl.Options) crawl.Page {
	f.mu.Lock()
	f.calls = append(f.calls, fetchCall{req: req, auth: auth, depth: depth, opts: opts})
	f.inFlight++
	f.peak = max(f.peak, f.inFlight)
	gate := f.gate
	p, ok := f.pages[req.URL]
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.inFlight--
		f.mu.Unlock()
	}()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return crawl.Page{URL: req.URL, Depth: depth, Error: ctx.Err().Error()}
		}
	}
	if !ok {
		p = crawl.Page{URL: req.URL, FinalURL: req.URL, StatusCode: 200, ContentType: "text/html",
			Bytes: 100, DurationMS: 20, Title: "t " + req.URL, Attempts: 1}
	}
	p.Depth = depth
	return p
}

func (f *fakePages) count() (calls, inFlight, peak int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls), f.inFlight, f.peak
}

func (f *fakePages) perURL() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]int{}
	for _, c := range f.calls {
		out[c.req.URL]++
	}
	return out
}

func (f *fakePages) snapshot() []fetchCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// batchEnv is a job in a real SQLite store with one batch claimed by a
// runner, and a BatchRunner on the store.
type batchEnv struct {
	t      *testing.T
	ctx    context.Context
	store  *sqlstore.Store
	pages  *fakePages
	br     *jobs.BatchRunner
	spec   jobs.Spec
	batch  string
	runner string
	epoch  int64
	urls   []string
}

// newBatchEnv creates a job whose seeds are urls, takes them all into
// one batch and claims it for sc-crawler_1 at epoch 1.
func newBatchEnv(t *testing.T, conc int, urls []string, mod func(*jobs.Spec)) *batchEnv {
	t.Helper()
	e := &batchEnv{t: t, ctx: testCtx(t), store: openStore(t), pages: newFakePages(), runner: nodeName(1), epoch: 1, urls: urls}
	e.spec = jobs.Spec{ID: "job-run", Group: testGroup, Seeds: urls, BatchSize: len(urls), Timers: testTimers()}
	if mod != nil {
		mod(&e.spec)
	}
	seeds := make([]jobs.Entry, len(urls))
	for i, u := range urls {
		seeds[i] = jobs.Entry{URL: u}
	}
	_, err := e.store.CreateJob(e.ctx, e.spec, seeds)
	require.NoError(t, err)
	e.batch = jobs.BatchID(e.spec.ID, 0)
	b, err := e.store.TakeBatch(e.ctx, e.spec.ID, e.batch, len(urls))
	require.NoError(t, err)
	require.Equal(t, len(urls), b.Size)
	_, err = e.store.Claim(e.ctx, e.spec.ID, e.batch, e.runner, e.epoch)
	require.NoError(t, err)
	e.br = &jobs.BatchRunner{Store: e.store, Pages: e.pages, Concurrency: conc}
	return e
}

func (e *batchEnv) run() (jobs.BatchOutcome, error) {
	return e.runAs(e.runner, e.epoch)
}

func (e *batchEnv) runAs(runner string, epoch int64) (jobs.BatchOutcome, error) {
	return e.br.RunBatch(e.ctx, jobs.BatchRun{Job: e.spec.ID, Batch: e.batch, Runner: runner, Epoch: epoch, Log: quiet()})
}

type outcomeRes struct {
	out jobs.BatchOutcome
	err error
}

func (e *batchEnv) runAsync() <-chan outcomeRes {
	ch := make(chan outcomeRes, 1)
	go func() {
		out, err := e.run()
		ch <- outcomeRes{out, err}
	}()
	return ch
}

func (e *batchEnv) wait(ch <-chan outcomeRes) (jobs.BatchOutcome, error) {
	e.t.Helper()
	select {
	case r := <-ch:
		return r.out, r.err
	case <-time.After(waitLimit):
		e.t.Fatalf("RunBatch did not return within %v", waitLimit)
		return jobs.BatchOutcome{}, nil
	}
}

func (e *batchEnv) results() []jobs.PageRecord {
	e.t.Helper()
	var out []jobs.PageRecord
	require.NoError(e.t, e.store.Results(e.ctx, e.spec.ID, func(p jobs.PageRecord) error {
		out = append(out, p)
		return nil
	}))
	return out
}

func (e *batchEnv) info() jobs.BatchInfo {
	e.t.Helper()
	infos, err := e.store.Batches(e.ctx, e.spec.ID, []string{e.batch})
	require.NoError(e.t, err)
	require.Len(e.t, infos, 1)
	return infos[0]
}

func (e *batchEnv) entries() []jobs.BatchEntry {
	e.t.Helper()
	es, err := e.store.Entries(e.ctx, e.spec.ID, e.batch)
	require.NoError(e.t, err)
	return es
}

func (e *batchEnv) stats() jobs.Stats {
	e.t.Helper()
	st, err := e.store.Stats(e.ctx, e.spec.ID)
	require.NoError(e.t, err)
	return st
}

// record finishes url as holder at epoch, as an earlier holder did.
func (e *batchEnv) record(holder string, epoch int64, url string) {
	e.t.Helper()
	page := &jobs.PageRecord{Job: e.spec.ID, Batch: e.batch, Runner: holder, Epoch: epoch}
	page.URL, page.StatusCode = url, 200
	_, err := e.store.Record(e.ctx, jobs.Record{Job: e.spec.ID, Batch: e.batch, Runner: holder, Epoch: epoch, URL: url, Page: page})
	require.NoError(e.t, err)
}

func pageURLs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("http://example.test/page/%03d", i)
	}
	return out
}

// peakOf runs a batch of n URLs with the fetcher gated, waits until want
// calls are in flight, checks no more come, then lets them all go.
func peakOf(t *testing.T, conc, n, want int) (int, jobs.BatchOutcome) {
	t.Helper()
	e := newBatchEnv(t, conc, pageURLs(n), nil)
	e.pages.gate = make(chan struct{})
	ch := e.runAsync()
	eventually(t, func() bool { _, in, _ := e.pages.count(); return in == want }, "%d fetches in flight", want)
	time.Sleep(50 * time.Millisecond) // a (wrong) extra fetch would start now
	calls, in, _ := e.pages.count()
	assert.Equal(t, want, calls, "no fetch beyond the concurrency while all are blocked")
	assert.Equal(t, want, in)
	close(e.pages.gate)
	out, err := e.wait(ch)
	require.NoError(t, err)
	_, _, peak := e.pages.count()
	return peak, out
}

func TestRunBatchFetchesUpToConcurrencyPagesAtOnce(t *testing.T) {
	t.Run("concurrency 4", func(t *testing.T) {
		peak, out := peakOf(t, 4, 12, 4)
		assert.Equal(t, 4, peak)
		assert.Equal(t, 12, out.Ran)
	})
	t.Run("concurrency 1", func(t *testing.T) {
		peak, out := peakOf(t, 1, 5, 1)
		assert.Equal(t, 1, peak, "one page at a time")
		assert.Equal(t, 5, out.Ran)
	})
	t.Run("default concurrency", func(t *testing.T) {
		peak, out := peakOf(t, 0, jobs.DefaultConcurrency+4, jobs.DefaultConcurrency)
		assert.Equal(t, jobs.DefaultConcurrency, peak)
		assert.Equal(t, jobs.DefaultConcurrency+4, out.Ran)
	})
	t.Run("batch smaller than concurrency", func(t *testing.T) {
		peak, out := peakOf(t, 8, 3, 3)
		assert.Equal(t, 3, peak)
		assert.Equal(t, 3, out.Ran)
	})
}

func TestRunBatchRecordsEachPageOnceAndFinishesTheBatch(t *testing.T) {
	urls := pageURLs(9)
	e := newBatchEnv(t, 3, urls, func(s *jobs.Spec) {
		s.Cookie = map[string]string{"session": "abc"}
		s.Authorization = map[string]string{"Authorization": "Bearer t"}
		s.Options.UserAgent = "baton-test"
	})
	e.pages.pages[urls[2]] = crawl.Page{URL: urls[2], StatusCode: 404, Error: "HTTP 404", DurationMS: 5}
	e.pages.pages[urls[5]] = crawl.Page{URL: urls[5], Error: "timeout after 15s", DurationMS: 15000}
	out, err := e.run()
	require.NoError(t, err)
	assert.Equal(t, jobs.BatchOutcome{Success: 7, Fail: 2, Ran: 9}, out)

	per := e.pages.perURL()
	for _, u := range urls {
		assert.Equal(t, 1, per[u], "%s fetched once", u)
	}
	for _, c := range e.pages.snapshot() {
		assert.Equal(t, crawl.Auth{Cookie: e.spec.Cookie, Authorization: e.spec.Authorization}, c.auth)
		assert.Equal(t, "baton-test", c.opts.UserAgent, "the job's options reach the fetcher")
		assert.Equal(t, "GET", c.req.Method)
	}
	res := e.results()
	require.Len(t, res, 9)
	got := map[string]jobs.PageRecord{}
	for _, p := range res {
		got[p.URL] = p
		assert.Equal(t, e.spec.ID, p.Job)
		assert.Equal(t, e.batch, p.Batch)
		assert.Equal(t, e.runner, p.Runner)
		assert.Equal(t, e.epoch, p.Epoch)
	}
	assert.ElementsMatch(t, urls, slices.Collect(maps.Keys(got)))
	assert.Equal(t, "HTTP 404", got[urls[2]].Error)
	assert.Equal(t, 404, got[urls[2]].StatusCode)
	b := e.info()
	assert.Equal(t, jobs.BatchDone, b.State)
	assert.Equal(t, jobs.Stats{Seen: 9, Queued: 0, Recorded: 9, Failed: 2}, e.stats())
	for _, be := range e.entries() {
		assert.True(t, be.Done, "%s finished", be.URL)
	}

	// Run again (a retried activity): nothing fetched or recorded twice.
	again, err := e.run()
	require.NoError(t, err)
	assert.Zero(t, again.Ran)
	calls, _, _ := e.pages.count()
	assert.Equal(t, 9, calls)
	assert.Len(t, e.results(), 9)
}

func TestRunBatchFinishesADisallowedPageWithoutAResult(t *testing.T) {
	urls := pageURLs(3)
	e := newBatchEnv(t, 2, urls, nil)
	e.pages.pages[urls[1]] = crawl.Page{URL: urls[1], Error: "disallowed by robots.txt", Disallowed: true,
		Links: []string{"http://example.test/never"}}
	out, err := e.run()
	require.NoError(t, err)
	assert.Equal(t, jobs.BatchOutcome{Success: 2, Fail: 0, Ran: 3}, out)
	rec, err := e.store.Recorded(e.ctx, e.spec.ID, urls[1])
	require.NoError(t, err)
	assert.False(t, rec, "a page robots.txt refused is not a result")
	for _, be := range e.entries() {
		assert.True(t, be.Done, "%s finished", be.URL)
	}
	assert.Equal(t, jobs.BatchDone, e.info().State)
	assert.Equal(t, jobs.Stats{Seen: 3, Queued: 0, Recorded: 2}, e.stats(), "no link of a disallowed page followed")
}

func TestRunBatchQueuesLinksAtTheNextDepth(t *testing.T) {
	root := "http://example.test/"
	e := newBatchEnv(t, 2, []string{root, "http://example.test/known"}, nil)
	e.pages.pages[root] = crawl.Page{URL: root, StatusCode: 200,
		Links: []string{"http://example.test/a", "http://example.test/b", "http://example.test/known", root}}
	out, err := e.run()
	require.NoError(t, err)
	assert.Equal(t, 2, out.Success)
	assert.Equal(t, jobs.Stats{Seen: 4, Queued: 2, Recorded: 2}, e.stats(), "a and b are new; known and the root are not queued twice")

	next := jobs.BatchID(e.spec.ID, 1)
	b, err := e.store.TakeBatch(e.ctx, e.spec.ID, next, 10)
	require.NoError(t, err)
	require.Equal(t, 2, b.Size)
	es, err := e.store.Entries(e.ctx, e.spec.ID, next)
	require.NoError(t, err)
	depths := map[string]int{}
	for _, be := range es {
		depths[be.URL] = be.Depth
	}
	assert.Equal(t, map[string]int{"http://example.test/a": 1, "http://example.test/b": 1}, depths)

	// The next hop: a page at depth 1 is fetched at depth 1 and its links
	// are queued at depth 2.
	_, err = e.store.Claim(e.ctx, e.spec.ID, next, e.runner, 1)
	require.NoError(t, err)
	e.pages.pages["http://example.test/a"] = crawl.Page{URL: "http://example.test/a", StatusCode: 200, Links: []string{"http://example.test/a/deeper"}}
	_, err = e.br.RunBatch(e.ctx, jobs.BatchRun{Job: e.spec.ID, Batch: next, Runner: e.runner, Epoch: 1})
	require.NoError(t, err)
	for _, c := range e.pages.snapshot() {
		if c.req.URL == "http://example.test/a" {
			assert.Equal(t, 1, c.depth)
			assert.Equal(t, 1, c.req.Depth)
		}
	}
	third := jobs.BatchID(e.spec.ID, 2)
	_, err = e.store.TakeBatch(e.ctx, e.spec.ID, third, 10)
	require.NoError(t, err)
	es, err = e.store.Entries(e.ctx, e.spec.ID, third)
	require.NoError(t, err)
	require.Len(t, es, 1)
	assert.Equal(t, jobs.Entry{URL: "http://example.test/a/deeper", Depth: 2}, es[0].Entry)
}

func TestRunBatchResumesAHalfDoneBatch(t *testing.T) {
	urls := pageURLs(6)
	e := newBatchEnv(t, 3, urls, nil)
	// The first holder recorded three pages, then died; a backup took the
	// batch over at epoch 2.
	for _, u := range urls[:3] {
		e.record(e.runner, e.epoch, u)
	}
	next := nodeName(2)
	require.NoError(t, e.br.Claim(e.ctx, e.spec.ID, e.batch, next, 2))
	out, err := e.runAs(next, 2)
	require.NoError(t, err)
	assert.Equal(t, jobs.BatchOutcome{Success: 6, Ran: 3}, out, "counts cover every holder; Ran this call's")
	per := e.pages.perURL()
	assert.ElementsMatch(t, urls[3:], slices.Collect(maps.Keys(per)), "only unfinished URLs fetched")
	for _, n := range per {
		assert.Equal(t, 1, n)
	}
	byRunner := map[string]int{}
	for _, p := range e.results() {
		byRunner[p.Runner]++
	}
	assert.Equal(t, map[string]int{e.runner: 3, next: 3}, byRunner)
	b := e.info()
	assert.Equal(t, jobs.BatchDone, b.State)
	assert.Equal(t, next, b.Holder)
	assert.Equal(t, int64(2), b.Epoch)
}

// A batch whose row its Runner must claim as it opens it (its Task names
// a higher epoch than the store has: a hand-over whose claim did not reach
// the store) runs: its host leases, renewed before the claim and refused,
// are renewed again once it is in.
func TestRunBatchClaimsAsItOpens(t *testing.T) {
	urls := pageURLs(4)
	e := newBatchEnv(t, 2, urls, nil)
	next := nodeName(2)
	out, err := e.runAs(next, 2)
	require.NoError(t, err)
	assert.Equal(t, jobs.BatchOutcome{Success: 4, Ran: 4}, out)
	for u, n := range e.pages.perURL() {
		assert.Equal(t, 1, n, u)
	}
	b := e.info()
	assert.Equal(t, jobs.BatchDone, b.State)
	assert.Equal(t, next, b.Holder)
	assert.Equal(t, int64(2), b.Epoch)
}

func TestRunBatchIsFencedByAClaimAtAHigherEpoch(t *testing.T) {
	urls := pageURLs(6)
	e := newBatchEnv(t, 1, urls, nil)
	e.pages.gate = make(chan struct{})
	ch := e.runAsync()
	// First page: fetched and recorded by the holder.
	eventually(t, func() bool { _, in, _ := e.pages.count(); return in == 1 }, "first fetch")
	e.pages.gate <- struct{}{}
	eventually(t, func() bool { c, in, _ := e.pages.count(); return c == 2 && in == 1 }, "second fetch")
	eventually(t, func() bool { return len(e.results()) == 1 }, "first page recorded")
	// Meanwhile a backup takes the batch over.
	other := nodeName(2)
	_, err := e.store.Claim(e.ctx, e.spec.ID, e.batch, other, 2)
	require.NoError(t, err)
	e.pages.gate <- struct{}{}
	out, err := e.wait(ch)
	require.NoError(t, err, "fenced is an outcome, not an error")
	assert.True(t, out.Fenced)
	assert.Contains(t, out.Reason, "epoch")
	assert.Equal(t, 1, out.Ran)
	calls, in, _ := e.pages.count()
	// Fetching runs ahead of recording by at most one slot per request in
	// flight: the refusal comes at the next commit.
	assert.LessOrEqual(t, calls, 3, "no fetch beyond the slots in flight after the refusal")
	assert.Zero(t, in)
	res := e.results()
	require.Len(t, res, 1, "no record after the claim")
	assert.Equal(t, urls[0], res[0].URL)
	b := e.info()
	assert.Equal(t, jobs.BatchRunning, b.State, "the new holder finishes it")
	assert.Equal(t, other, b.Holder)
	assert.Equal(t, int64(2), b.Epoch)
}

func TestRunBatchFencedWhileManyFetchesAreInFlight(t *testing.T) {
	urls := pageURLs(30)
	e := newBatchEnv(t, 3, urls, nil)
	e.pages.gate = make(chan struct{})
	ch := e.runAsync()
	eventually(t, func() bool { _, in, _ := e.pages.count(); return in == 3 }, "3 fetches in flight")
	_, err := e.store.Claim(e.ctx, e.spec.ID, e.batch, nodeName(2), 5)
	require.NoError(t, err)
	close(e.pages.gate)
	out, err := e.wait(ch)
	require.NoError(t, err)
	assert.True(t, out.Fenced)
	assert.Zero(t, out.Ran)
	assert.Empty(t, e.results(), "every write of the old holder refused")
	calls, _, _ := e.pages.count()
	// Until the first commit is refused, the Runner fetches ahead of its
	// commits by up to a group and a round (9 pages fetched and not
	// committed) with its 3 slots in flight; it fetches nothing once
	// fenced, so the batch's other URLs are never fetched.
	assert.LessOrEqual(t, calls, 12, "no fetch beyond the slots and the commit queue once fenced")
	assert.Equal(t, jobs.BatchRunning, e.info().State)
}

func TestRunBatchAtAStaleEpochIsFencedWithoutFetching(t *testing.T) {
	e := newBatchEnv(t, 2, pageURLs(3), nil)
	_, err := e.store.Claim(e.ctx, e.spec.ID, e.batch, nodeName(2), 3)
	require.NoError(t, err)
	out, err := e.run() // epoch 1
	require.NoError(t, err)
	assert.True(t, out.Fenced)
	calls, _, _ := e.pages.count()
	assert.Zero(t, calls)
	// Claim at a lower epoch is not an error for the caller (it finds out
	// when it runs), and changes nothing.
	require.NoError(t, e.br.Claim(e.ctx, e.spec.ID, e.batch, e.runner, 2))
	assert.Equal(t, nodeName(2), e.info().Holder)
	assert.Equal(t, int64(3), e.info().Epoch)
}

func TestRunBatchOfAMissingJobFails(t *testing.T) {
	st := openStore(t)
	pages := newFakePages()
	br := &jobs.BatchRunner{Store: st, Pages: pages}
	out, err := br.RunBatch(testCtx(t), jobs.BatchRun{Job: "ghost-job", Batch: "ghost-job-b000000", Runner: nodeName(1), Epoch: 1})
	require.NoError(t, err, "a missing job is not retried")
	assert.False(t, out.Fenced)
	assert.Contains(t, out.Failed, "ghost-job")
	assert.Contains(t, out.Failed, st.Identity().Location, "names the store it looked in")
	assert.Contains(t, out.Failed, st.Identity().ID)
	calls, _, _ := pages.count()
	assert.Zero(t, calls)
}

func TestRunBatchOfAMissingBatchFails(t *testing.T) {
	e := newBatchEnv(t, 2, pageURLs(2), nil)
	out, err := e.br.RunBatch(e.ctx, jobs.BatchRun{Job: e.spec.ID, Batch: "no-such-batch", Runner: e.runner, Epoch: 1})
	require.NoError(t, err)
	assert.Contains(t, out.Failed, "no-such-batch")
	assert.Contains(t, out.Failed, e.store.Identity().Location)
	calls, _, _ := e.pages.count()
	assert.Zero(t, calls)
}

func TestRunBatchOfARequeuedBatchFetchesNothing(t *testing.T) {
	e := newBatchEnv(t, 2, pageURLs(2), nil)
	_, err := e.store.Requeue(e.ctx, e.spec.ID, e.batch, 2)
	require.NoError(t, err)
	out, err := e.runAs(e.runner, 3)
	require.NoError(t, err)
	assert.Zero(t, out.Ran)
	calls, _, _ := e.pages.count()
	assert.Zero(t, calls)
	assert.Equal(t, jobs.BatchRequeued, e.info().State)
}

// ---- metrics ----

func gather(t *testing.T, reg *prometheus.Registry) map[string]*dto.MetricFamily {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

// ofJob returns the series of a family whose crawl_job label is job.
func ofJob(mf *dto.MetricFamily, job string) []*dto.Metric {
	var out []*dto.Metric
	for _, m := range mf.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == telemetry.LabelJob && l.GetValue() == job {
				out = append(out, m)
			}
		}
	}
	return out
}

func pagesByClass(t *testing.T, mfs map[string]*dto.MetricFamily, job string) map[string]float64 {
	t.Helper()
	mf := mfs["baton_pages_total"]
	require.NotNil(t, mf)
	out := map[string]float64{}
	for _, m := range ofJob(mf, job) {
		for _, l := range m.GetLabel() {
			if l.GetName() == "class" {
				out[l.GetValue()] = m.GetCounter().GetValue()
			}
		}
	}
	return out
}

func TestRunBatchMetrics(t *testing.T) {
	urls := pageURLs(6)
	e := newBatchEnv(t, 3, urls, nil)
	reg := prometheus.NewRegistry()
	m, err := prommetrics.New(reg)
	require.NoError(t, err)
	e.br.Metrics = m
	e.pages.pages[urls[0]] = crawl.Page{URL: urls[0], StatusCode: 200, Bytes: 1000, DurationMS: 20}
	e.pages.pages[urls[1]] = crawl.Page{URL: urls[1], StatusCode: 301, Bytes: 10, DurationMS: 10}
	e.pages.pages[urls[2]] = crawl.Page{URL: urls[2], StatusCode: 404, Error: "HTTP 404", Bytes: 5, DurationMS: 10}
	e.pages.pages[urls[3]] = crawl.Page{URL: urls[3], StatusCode: 503, Error: "HTTP 503", DurationMS: 10}
	e.pages.pages[urls[4]] = crawl.Page{URL: urls[4], Error: "timeout after 15s", DurationMS: 15000, Attempts: 3}
	e.pages.pages[urls[5]] = crawl.Page{URL: urls[5], Error: "disallowed by robots.txt", Disallowed: true}
	out, err := e.run()
	require.NoError(t, err)
	assert.Equal(t, jobs.BatchOutcome{Success: 2, Fail: 3, Ran: 6}, out)

	mfs := gather(t, reg)
	assert.Equal(t, map[string]float64{"2xx": 1, "3xx": 1, "4xx": 1, "5xx": 1, "error": 2}, pagesByClass(t, mfs, e.spec.ID),
		"the timeout and the disallowed page are errors, all labelled with the job")
	assert.Empty(t, pagesByClass(t, mfs, ""), "no series without the job label")
	for name, want := range map[string]float64{"baton_retries_total": 2, "baton_robots_refusals_total": 1} {
		require.NotNil(t, mfs[name], name)
		ms := ofJob(mfs[name], e.spec.ID)
		require.Len(t, ms, 1, name)
		assert.Equal(t, want, ms[0].GetCounter().GetValue(), name)
	}
	h := mfs["baton_fetch_duration_seconds"]
	require.NotNil(t, h)
	hs := ofJob(h, e.spec.ID)
	require.Len(t, hs, 1)
	assert.Equal(t, uint64(5), hs[0].GetHistogram().GetSampleCount(), "a disallowed page is not timed")
	assert.InDelta(t, 15.05, hs[0].GetHistogram().GetSampleSum(), 1e-9)
	b := mfs["baton_page_bytes_total"]
	require.NotNil(t, b)
	bs := ofJob(b, e.spec.ID)
	require.Len(t, bs, 1)
	assert.Equal(t, float64(1015), bs[0].GetCounter().GetValue())
}

// A batch that pulls from a frontier with plenty queued commits rounds of
// pages even while its own queue runs short between two pulls: it had
// committed every page alone then (4,000 transactions for a 20,000-page
// crawl with 1 Runner × 24, BenchmarkPostgresCrawl). Only the root's page
// (nothing queued yet) and the pages after a pull found the frontier
// short go at once, for their links.
func TestRunBatchCommitsRoundsWhileTheFrontierHasPlenty(t *testing.T) {
	const conc, n = 8, 8 + 20*24 // the root's take, then 20 full pulls
	root := "http://example.test/"
	e := newBatchEnv(t, conc, []string{root}, func(s *jobs.Spec) { s.BatchSize = 0 })
	e.pages.pages[root] = crawl.Page{URL: root, StatusCode: 200, Links: pageURLs(n)}
	rg := &recordGroups{RunnerStore: e.store}
	e.br.Store = rg
	e.br.CommitLinger = time.Hour // only a full round, or URLs running short, starts a commit
	e.pages.gate = make(chan struct{})
	ch := e.runAsync()
	// One page at a time, each once every slot that can be busy is: the
	// batch's own queue runs short between pulls as in a crawl.
	eventually(t, func() bool { calls, _, _ := e.pages.count(); return calls == 1 }, "the root's fetch")
	e.pages.gate <- struct{}{}
	for left := n; left > 0; left-- {
		eventually(t, func() bool { _, inFlight, _ := e.pages.count(); return inFlight == min(conc, left) }, "%d fetches in flight", min(conc, left))
		e.pages.gate <- struct{}{}
	}
	out, err := e.wait(ch)
	require.NoError(t, err)
	assert.Equal(t, n+1, out.Success)
	rg.mu.Lock()
	defer rg.mu.Unlock()
	sum, small := 0, 0
	for _, g := range rg.groups {
		sum += g
		if g < conc {
			small++
		}
	}
	assert.Equal(t, n+1, sum, "every page recorded once (groups: %v)", rg.groups)
	// The root's; the first round's (its pages may finish before the
	// first pull answers); the last pages' once the frontier ran dry (its
	// last pull found nothing while a round and a half were queued or in
	// flight), and half a round to spare. Committed as they came, a page
	// alone whenever the queue was short, they were 47-51.
	assert.LessOrEqual(t, small, 1+3*conc, "groups smaller than a round (groups: %v)", rg.groups)
}

// An unbounded batch (batch size 0, the CLI's default) is a Runner's lease
// on the job: it pulls every URL its pages add to the frontier, however
// many, and ends only when the frontier is empty and nothing is in flight.
func TestRunBatchUnboundedPullsTheWholeFrontier(t *testing.T) {
	root := "http://example.test/"
	e := newBatchEnv(t, 4, []string{root}, func(s *jobs.Spec) { s.BatchSize = 0 })
	// A tree: the root links 10 pages, each of those links 10 more.
	var links []string
	for i := range 10 {
		u := fmt.Sprintf("http://example.test/%d", i)
		links = append(links, u)
		var sub []string
		for j := range 10 {
			sub = append(sub, fmt.Sprintf("http://example.test/%d/%d", i, j))
		}
		e.pages.pages[u] = crawl.Page{URL: u, StatusCode: 200, Links: sub}
	}
	e.pages.pages[root] = crawl.Page{URL: root, StatusCode: 200, Links: links}
	out, err := e.run()
	require.NoError(t, err)
	assert.Equal(t, jobs.BatchOutcome{Success: 111, Ran: 111}, out)
	assert.Equal(t, jobs.Stats{Seen: 111, Queued: 0, Recorded: 111}, e.stats())
	b := e.info()
	assert.Equal(t, jobs.BatchDone, b.State)
	assert.Equal(t, 111, b.Size, "one batch held the whole crawl")
	for u, n := range e.pages.perURL() {
		assert.Equal(t, 1, n, "%s fetched %d times", u, n)
	}
}

// A draining Runner (scaled down, or its worker leaving) stops pulling:
// it finishes what it holds, ends the batch, and the rest of the frontier
// stays queued for the others.
func TestRunBatchDrainStopsPullingAndFinishesWhatItHolds(t *testing.T) {
	root := "http://example.test/"
	e := newBatchEnv(t, 2, []string{root}, func(s *jobs.Spec) { s.BatchSize = 0 })
	var links []string
	for i := range 50 {
		links = append(links, fmt.Sprintf("http://example.test/%d", i))
	}
	e.pages.pages[root] = crawl.Page{URL: root, StatusCode: 200, Links: links}
	var asked atomic.Int32
	out, err := e.br.RunBatch(e.ctx, jobs.BatchRun{Job: e.spec.ID, Batch: e.batch, Runner: e.runner, Epoch: e.epoch, Log: quiet(),
		Drain: func() bool { return asked.Add(1) > 1 }}) // one pull, then drain
	require.NoError(t, err)
	assert.Equal(t, jobs.BatchDone, e.info().State, "the batch ends")
	st := e.stats()
	assert.Equal(t, out.Ran, st.Recorded, "everything it held is recorded")
	assert.Less(t, st.Recorded, 51, "it stopped pulling")
	assert.Equal(t, 51-st.Recorded, st.Queued, "the rest stays queued")
	un, err := e.store.Unfinished(e.ctx, e.spec.ID, e.batch)
	require.NoError(t, err)
	assert.Empty(t, un, "nothing left unfinished in the batch")
}

// pausableEnv is an unbounded batch of a job whose root links n pages,
// with the fetcher gated: the root and then `first` pages are let through,
// and conc more fetches are left blocked at the gate.
func pausableEnv(t *testing.T, conc, n, first int, poll time.Duration) (*batchEnv, <-chan outcomeRes) {
	t.Helper()
	root := "http://example.test/"
	e := newBatchEnv(t, conc, []string{root}, func(s *jobs.Spec) { s.BatchSize = 0 })
	e.br.ControlPoll = poll
	var links []string
	for i := range n {
		links = append(links, fmt.Sprintf("http://example.test/%d", i))
	}
	e.pages.pages[root] = crawl.Page{URL: root, StatusCode: 200, Links: links}
	e.pages.gate = make(chan struct{})
	ch := e.runAsync()
	for range 1 + first {
		select {
		case e.pages.gate <- struct{}{}:
		case <-time.After(waitLimit):
			t.Fatal("no fetch came to the gate")
		}
	}
	eventually(t, func() bool { calls, in, _ := e.pages.count(); return in == conc && calls == 1+first+conc },
		"%d fetches blocked at the gate", conc)
	return e, ch
}

// resumeAndFinish resumes the job, runs its next batch with the gate
// open, and checks every URL is recorded exactly once.
func (e *batchEnv) resumeAndFinish(want int) {
	e.t.Helper()
	require.NoError(e.t, e.store.SetControl(e.ctx, e.spec.ID, jobs.ControlRunning))
	e.pages.mu.Lock()
	e.pages.gate = nil
	e.pages.mu.Unlock()
	next := jobs.BatchID(e.spec.ID, 1)
	_, err := e.store.TakeBatch(e.ctx, e.spec.ID, next, 4)
	require.NoError(e.t, err)
	_, err = e.store.Claim(e.ctx, e.spec.ID, next, e.runner, 1)
	require.NoError(e.t, err)
	_, err = e.br.RunBatch(e.ctx, jobs.BatchRun{Job: e.spec.ID, Batch: next, Runner: e.runner, Epoch: 1, Log: quiet()})
	require.NoError(e.t, err)
	assert.Equal(e.t, jobs.Stats{Seen: want, Queued: 0, Recorded: want}, e.stats())
	seen := map[string]int{}
	for _, p := range e.results() {
		seen[p.URL]++
	}
	assert.Len(e.t, seen, want)
	for u, n := range seen {
		assert.Equal(e.t, 1, n, "%s recorded %d times", u, n)
	}
}

// A pause reaches the Runner that holds an unbounded lease: it starts no
// fetch once it reads the job's control state, abandons the fetches in
// flight, commits what it fetched, gives the rest back to the frontier and
// ends its batch as done. Resumed, the job records every page once.
func TestRunBatchStopsFetchingWhenTheJobIsPaused(t *testing.T) {
	for _, state := range []string{jobs.ControlPaused, jobs.ControlCancelled} {
		t.Run(state, func(t *testing.T) {
			e, ch := pausableEnv(t, 4, 40, 4, 10*time.Millisecond)
			require.NoError(t, e.store.SetControl(e.ctx, e.spec.ID, state))
			out, err := e.wait(ch)
			require.NoError(t, err)
			calls, in, _ := e.pages.count()
			assert.Equal(t, 1+4+4, calls, "no fetch started after the pause")
			assert.Zero(t, in, "the fetches in flight were abandoned")
			assert.Equal(t, jobs.BatchOutcome{Success: 5, Ran: 5}, out, "the root and the 4 pages fetched before")
			assert.Equal(t, jobs.BatchDone, e.info().State, "the batch ends as done")
			assert.Equal(t, jobs.Stats{Seen: 41, Queued: 36, Recorded: 5}, e.stats(), "the rest is queued again")
			un, err := e.store.Unfinished(e.ctx, e.spec.ID, e.batch)
			require.NoError(t, err)
			assert.Empty(t, un)
			e.resumeAndFinish(41)
		})
	}
}

// Without a poll in time (a long ControlPoll), the refusal of the next pull
// (Extend: ErrHalted) stops the Runner as well.
func TestRunBatchStopsWhenTheStoreRefusesToExtend(t *testing.T) {
	e, ch := pausableEnv(t, 4, 40, 4, time.Hour)
	// The watcher read "running" at the start; from now on only Extend
	// tells.
	require.NoError(t, e.store.SetControl(e.ctx, e.spec.ID, jobs.ControlPaused))
	close(e.pages.gate) // the 4 in flight finish; the next pull is refused
	out, err := e.wait(ch)
	require.NoError(t, err)
	assert.Equal(t, jobs.BatchDone, e.info().State)
	st := e.stats()
	assert.Equal(t, out.Ran, st.Recorded)
	assert.Equal(t, 41, st.Recorded+st.Queued, "every URL is recorded or queued")
	assert.Less(t, st.Recorded, 41, "it stopped before the end")
	calls, _, _ := e.pages.count()
	assert.LessOrEqual(t, calls, st.Recorded+4, "at most a round of fetches beyond what it recorded was abandoned")
	e.resumeAndFinish(41)
}

// claimCounter is a store that counts Claim calls.
type claimCounter struct {
	jobs.Store
	claims atomic.Int32
}

func (c *claimCounter) Claim(ctx context.Context, job, id, holder string, epoch int64) (jobs.BatchInfo, error) {
	c.claims.Add(1)
	return c.Store.Claim(ctx, job, id, holder, epoch)
}

// A batch claimed by its assignment (or hand-over) is not claimed again
// at the same epoch when it runs; one held at a lower epoch is; one held
// at a higher epoch is fenced.
func TestRunBatchClaimsOnce(t *testing.T) {
	e := newBatchEnv(t, 2, []string{"http://127.0.0.1:1/a", "http://127.0.0.1:1/b"}, nil)
	cc := &claimCounter{Store: e.store}
	e.br.Store = cc
	out, err := e.run()
	require.NoError(t, err)
	assert.Equal(t, 2, out.Ran)
	assert.Zero(t, cc.claims.Load(), "claimed once, by the assignment")

	e = newBatchEnv(t, 2, []string{"http://127.0.0.1:1/a"}, nil)
	cc = &claimCounter{Store: e.store}
	e.br.Store = cc
	out, err = e.runAs(e.runner, e.epoch+1)
	require.NoError(t, err)
	assert.Equal(t, int32(1), cc.claims.Load(), "a Task newer than the batch's row claims it")
	assert.Equal(t, 1, out.Ran)

	e = newBatchEnv(t, 2, []string{"http://127.0.0.1:1/a"}, nil)
	_, err = e.store.Claim(e.ctx, e.spec.ID, e.batch, nodeName(2), e.epoch+1) // handed over
	require.NoError(t, err)
	out, err = e.run()
	require.NoError(t, err)
	assert.True(t, out.Fenced, "an older epoch is fenced")
	assert.Zero(t, out.Ran)
}

// recordGroups is a RunnerStore that notes the size of every group commit.
type recordGroups struct {
	jobs.RunnerStore
	mu     sync.Mutex
	groups []int
}

func (r *recordGroups) RecordTake(ctx context.Context, rs []jobs.Record, take int) ([]jobs.Recorded, []jobs.Entry, error) {
	r.mu.Lock()
	r.groups = append(r.groups, len(rs))
	r.mu.Unlock()
	return r.RunnerStore.RecordTake(ctx, rs, take)
}

// While a batch has a round of URLs of its own queued, its group commits
// wait for a group of pages (two rounds of 8: the first page of 40 is not
// committed alone, as it was, a transaction per page or two, nor a round
// of 8 alone, as until the fifteenth session); once its queue runs short,
// a page is committed at once, and every page is recorded.
func TestRunBatchCommitsFullerGroupsWhileItHasURLsQueued(t *testing.T) {
	const conc = 8
	e := newBatchEnv(t, conc, pageURLs(40), nil)
	rg := &recordGroups{RunnerStore: e.store}
	e.br.Store = rg
	e.br.CommitLinger = time.Hour // only a fuller group, or a short queue, starts a commit
	e.pages.gate = make(chan struct{})
	ch := e.runAsync()
	eventually(t, func() bool { calls, _, _ := e.pages.count(); return calls == conc }, "a round of fetches")
	for i := 1; i <= conc; i++ {
		e.pages.gate <- struct{}{}
		// The page handled: its slot's next fetch started (a commit of
		// it alone would have started before that).
		eventually(t, func() bool { calls, _, _ := e.pages.count(); return calls == conc+i }, "fetch %d", conc+i)
	}
	close(e.pages.gate)
	out, err := e.wait(ch)
	require.NoError(t, err)
	assert.Equal(t, 40, out.Success)
	rg.mu.Lock()
	defer rg.mu.Unlock()
	require.NotEmpty(t, rg.groups)
	assert.Equal(t, 2*conc, jobs.CommitGroupForTest(conc))
	assert.Equal(t, 2*conc, rg.groups[0], "the first group commit (groups: %v)", rg.groups)
	sum := 0
	for _, g := range rg.groups {
		sum += g
	}
	assert.Equal(t, 40, sum, "every page recorded once (groups: %v)", rg.groups)
}
