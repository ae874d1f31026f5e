package jobs_test

import (
	"context"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/crawl/demosite"
	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/activities/jobs/sqlstore"
)

// countingRecorder counts a store's calls: the group commits and the
// pages answered 304 among their records, and the bulk recordings of 304s
// with the pages they wrote.
type countingRecorder struct {
	jobs.Store
	commits, committed304, bulkCalls, bulkWrote atomic.Int64
}

func (c *countingRecorder) RecordTake(ctx context.Context, rs []jobs.Record, take int) ([]jobs.Recorded, []jobs.Entry, error) {
	c.commits.Add(1)
	for _, r := range rs {
		if r.Page != nil && r.Page.StatusCode == 304 {
			c.committed304.Add(1)
		}
	}
	return c.Store.RecordTake(ctx, rs, take)
}

func (c *countingRecorder) RecordNotModified(ctx context.Context, baseline string, rs []jobs.Record) (jobs.NotModifiedResult, error) {
	res, err := c.Store.(jobs.NotModifiedRecorder).RecordNotModified(ctx, baseline, rs)
	if err == nil {
		c.bulkCalls.Add(1)
		c.bulkWrote.Add(int64(len(rs) - len(res.Left)))
	}
	return res, err
}

// TestRecrawl304sRecordedInBulkAsPerPage: two runs of the demo site's
// recrawl section, the second with the first as its baseline (every page
// requested with its validators, nine in ten answered 304), once with the
// 304s recorded page by page in the group commits and once in bulk by the
// store: the bulk recording takes every 304 in a few calls, none goes
// through a group commit, and the second run records the same pages,
// revisit rows, changes, diff and counters either way.
func TestRecrawl304sRecordedInBulkAsPerPage(t *testing.T) {
	const pages = 300
	site := demosite.New(demosite.Config{Recrawl: pages})
	srv := httptest.NewServer(site)
	t.Cleanup(srv.Close)
	start := time.Now()
	crawlRuns := func(st jobs.Store, perPage bool) {
		var day atomic.Int64
		clock := func() time.Time { return start.Add(time.Duration(day.Load()) * 24 * time.Hour) }
		for n, id := range []string{"first", "second"} {
			site.SetRevision(n + 1)
			day.Store(int64(n))
			baseline := ""
			if n > 0 {
				baseline = "first"
			}
			run304(t, st, dailySpec(srv.URL, id, baseline, 50), clock, perPage)
		}
	}
	ctx := context.Background()
	perPage, err := sqlstore.OpenSQLite(ctx, t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { _ = perPage.Close() })
	crawlRuns(perPage, true)
	inner, err := sqlstore.OpenSQLite(ctx, t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { _ = inner.Close() })
	bulk := &countingRecorder{Store: inner}
	crawlRuns(bulk, false)
	const answered304 = pages - pages/10
	assert.Zero(t, bulk.committed304.Load(), "no page answered 304 goes through a group commit")
	assert.EqualValues(t, answered304, bulk.bulkWrote.Load(), "every page answered 304 recorded in bulk")
	assert.LessOrEqual(t, bulk.bulkCalls.Load(), int64(answered304/8), "many pages a call")

	want, got := readRun(t, perPage, "second", "first"), readRun(t, inner, "second", "first")
	require.Len(t, got.pages, pages+1)
	assert.Equal(t, want.pages, got.pages, "page records")
	assert.Equal(t, want.revisit, got.revisit, "revisit rows")
	assert.Equal(t, want.changes, got.changes, "changes against the baseline")
	assert.EqualValues(t, answered304+1, got.changes.Unchanged, "the 304s and the index page, the same again")
	assert.Equal(t, want.diff, got.diff, "diff against the first run")
	assert.Equal(t, want.stats, got.stats, "counters")
}

// run304 is benchCrawl with the pages answered 304 recorded page by page
// when perPage.
func run304(t *testing.T, st jobs.Store, spec jobs.Spec, clock func() time.Time, perPage bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_, err := (&jobs.Activities{Store: st}).JobStart(ctx, spec)
	require.NoError(t, err)
	br := &jobs.BatchRunner{Store: st, Pages: crawl.NewEngine(), Concurrency: 16, Clock: clock, NoBulkNotModified: perPage}
	for seq := 0; ; seq++ {
		id := jobs.BatchID(spec.ID, seq)
		bi, err := st.TakeBatch(ctx, spec.ID, id, spec.BatchSize)
		require.NoError(t, err)
		if bi.Size == 0 {
			return
		}
		_, err = st.Claim(ctx, spec.ID, id, "sc-crawler_1", 1)
		require.NoError(t, err)
		_, err = br.RunBatch(ctx, jobs.BatchRun{Job: spec.ID, Batch: id, Runner: "sc-crawler_1", Epoch: 1, Log: quiet()})
		require.NoError(t, err)
	}
}

// runView is what a user reads of a run: its pages (without what varies
// from crawl to crawl), revisit rows, changes, diff against its baseline
// and counters.
type runView struct {
	pages   map[string]jobs.PageRecord
	revisit map[string]jobs.RevisitRecord
	changes jobs.ChangeStats
	diff    []jobs.DiffEntry
	stats   jobs.Stats
}

func readRun(t *testing.T, st jobs.Store, job, baseline string) runView {
	ctx := context.Background()
	v := runView{pages: map[string]jobs.PageRecord{}, revisit: map[string]jobs.RevisitRecord{}}
	var urls []string
	require.NoError(t, st.ResultsByURL(ctx, job, func(p jobs.PageRecord) error {
		// Which batch, how long a request took and the hash of a body
		// (the demo site's bodies say when they were served) vary from
		// crawl to crawl.
		p.Batch, p.DurationMS, p.BodyHash = "", 0, ""
		v.pages[p.URL] = p
		urls = append(urls, p.URL)
		return nil
	}))
	rows, err := st.(jobs.BaselineBatchReader).BaselinePages(ctx, job, urls)
	require.NoError(t, err)
	for u, r := range rows {
		v.revisit[u] = r.Revisit
	}
	v.changes, err = st.Changes(ctx, job, baseline)
	require.NoError(t, err)
	_, err = jobs.Diff(ctx, st, baseline, job, func(e jobs.DiffEntry) error {
		v.diff = append(v.diff, e)
		return nil
	})
	require.NoError(t, err)
	v.stats, err = st.Stats(ctx, job)
	require.NoError(t, err)
	return v
}
