package jobs_test

import (
	"context"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/crawl/demosite"
	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/activities/jobs/sqlstore"
)

// countingCarrier counts the pages a store carries over in bulk, and
// those it hands back to be fetched while it writes (CarryRequest.Left).
type countingCarrier struct {
	jobs.Store
	carried, left atomic.Int64
}

func (c *countingCarrier) CarryNotDue(ctx context.Context, req jobs.CarryRequest) (jobs.CarryResult, error) {
	if left := req.Left; left != nil {
		req.Left = func(es []jobs.Entry) {
			c.left.Add(int64(len(es)))
			left(es)
		}
	}
	res, err := c.Store.(jobs.BulkCarrier).CarryNotDue(ctx, req)
	c.carried.Add(int64(len(res.Carried)))
	return res, err
}

// TestRecrawlBulkCarryRecordsAsPerPage: three daily runs of the demo
// site's recrawl section with --adaptive, each with the previous as its
// baseline, once with the pages not due carried over in bulk by the store
// and once page by page: the third run (the 90 % unchanged not due) records
// the same pages, revisit rows, changes, diff against the second run and
// counters either way.
func TestRecrawlBulkCarryRecordsAsPerPage(t *testing.T) {
	const pages = 300
	site := demosite.New(demosite.Config{Recrawl: pages})
	srv := httptest.NewServer(site)
	t.Cleanup(srv.Close)
	spec := func(id, baseline string) jobs.Spec { return dailySpec(srv.URL, id, baseline, 50) }
	start := time.Now()
	crawlDays := func(st jobs.Store, perPage bool) {
		var day atomic.Int64
		clock := func() time.Time { return start.Add(time.Duration(day.Load()) * 24 * time.Hour) }
		for n, id := range []string{"first", "second", "third"} {
			site.SetRevision(n + 1)
			day.Store(int64(n))
			baseline := ""
			if n > 0 {
				baseline = []string{"first", "second"}[n-1]
			}
			benchCrawl(t, st, spec(id, baseline), clock, perPage)
		}
	}
	ctx := context.Background()
	perPage, err := sqlstore.OpenSQLite(ctx, t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { _ = perPage.Close() })
	crawlDays(perPage, true)
	inner, err := sqlstore.OpenSQLite(ctx, t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { _ = inner.Close() })
	bulk := &countingCarrier{Store: inner}
	crawlDays(bulk, false)
	assert.EqualValues(t, pages-pages/10+1, bulk.carried.Load(), "the unchanged pages (and the index) carried over in bulk")
	assert.Positive(t, bulk.left.Load(), "pages due handed back to be fetched while a carry writes")
	assert.LessOrEqual(t, bulk.left.Load(), int64(pages/10), "only the pages due (the tenth that changed) handed back")

	type view struct {
		pages   map[string]jobs.PageRecord
		revisit map[string]jobs.RevisitRecord
		changes jobs.ChangeStats
		diff    []jobs.DiffEntry
		stats   jobs.Stats
	}
	read := func(st jobs.Store) view {
		v := view{pages: map[string]jobs.PageRecord{}, revisit: map[string]jobs.RevisitRecord{}}
		var urls []string
		require.NoError(t, st.ResultsByURL(ctx, "third", func(p jobs.PageRecord) error {
			// Which batch, how long a request took and the hash of a body
			// (the demo site's bodies say when they were served) vary
			// from crawl to crawl.
			p.Batch, p.DurationMS, p.BodyHash = "", 0, ""
			v.pages[p.URL] = p
			urls = append(urls, p.URL)
			return nil
		}))
		rows, err := st.(jobs.BaselineBatchReader).BaselinePages(ctx, "third", urls)
		require.NoError(t, err)
		for u, r := range rows {
			v.revisit[u] = r.Revisit
		}
		v.changes, err = st.Changes(ctx, "third", "second")
		require.NoError(t, err)
		_, err = jobs.Diff(ctx, st, "second", "third", func(e jobs.DiffEntry) error {
			v.diff = append(v.diff, e)
			return nil
		})
		require.NoError(t, err)
		v.stats, err = st.Stats(ctx, "third")
		require.NoError(t, err)
		return v
	}
	want, got := read(perPage), read(inner)
	require.Len(t, got.pages, pages+1)
	assert.Equal(t, want.pages, got.pages, "page records")
	assert.Equal(t, want.revisit, got.revisit, "revisit rows")
	assert.Equal(t, want.changes, got.changes, "changes against the baseline")
	assert.Equal(t, pages/10, got.changes.Changed)
	assert.Equal(t, want.diff, got.diff, "diff against the second run")
	assert.Equal(t, want.stats, got.stats, "counters")
}
