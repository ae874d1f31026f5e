package sqlstore_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/activities/jobs/sqlstore"
	"github.com/batoncrawl/baton/activities/jobs/storetest"
	"github.com/batoncrawl/baton/testsuite"
)

// v7Page is page u of makeV7's job as recorded.
func v7Page(job, u string) *jobs.PageRecord {
	return storetest.Page(job, "b1", "r1", 1, u, 0, "", storetest.URL("x"))
}

// makeV7 records pages a and b of a job of seeds a, b, c in s, then turns
// the store back into one of schema version 7 (on PostgreSQL:
// baton_frontier with the default fillfactor). It returns the job.
func makeV7(t *testing.T, s *sqlstore.Store, pg bool) string {
	t.Helper()
	ctx := testCtx(t, time.Minute)
	job := storetest.JobID(t, "v7")
	a, b, c := storetest.URL("a"), storetest.URL("b"), storetest.URL("c")
	_, err := s.CreateJob(ctx, storetest.Spec(job, 0, a, b, c), storetest.Entries(0, a, b, c))
	require.NoError(t, err)
	_, err = s.TakeBatch(ctx, job, "b1", 3)
	require.NoError(t, err)
	_, err = s.Claim(ctx, job, "b1", "r1", 1)
	require.NoError(t, err)
	_, err = s.RecordAll(ctx, []jobs.Record{
		{Job: job, Batch: "b1", Runner: "r1", Epoch: 1, URL: a, Page: v7Page(job, a)},
		{Job: job, Batch: "b1", Runner: "r1", Epoch: 1, URL: b, Page: v7Page(job, b)},
	})
	require.NoError(t, err)
	var down []string
	if pg {
		down = append(down, `ALTER TABLE baton_frontier RESET (fillfactor)`)
	}
	down = append(down, `UPDATE baton_store SET value = '7' WHERE key = 'schema'`)
	for _, q := range down {
		_, err := s.DB().ExecContext(ctx, q)
		require.NoError(t, err, q)
	}
	return job
}

// checkUpgradedFromV7: the pages a version-7 store recorded read as they
// were written, beside a page recorded after the upgrade, and on
// PostgreSQL baton_frontier keeps room on its pages for updated rows.
func checkUpgradedFromV7(t *testing.T, s *sqlstore.Store, pg bool, job string) {
	t.Helper()
	ctx := testCtx(t, time.Minute)
	from, err := s.Migrate(ctx)
	require.NoError(t, err)
	assert.Equal(t, 7, from)
	c := storetest.URL("c")
	_, err = s.Record(ctx, jobs.Record{Job: job, Batch: "b1", Runner: "r1", Epoch: 1, URL: c, Page: v7Page(job, c)})
	require.NoError(t, err)

	want := map[string]jobs.PageRecord{}
	for _, u := range []string{storetest.URL("a"), storetest.URL("b"), c} {
		want[u] = *v7Page(job, u)
	}
	got := map[string]jobs.PageRecord{}
	require.NoError(t, s.Results(ctx, job, func(p jobs.PageRecord) error {
		got[p.URL] = p
		return nil
	}))
	assert.Equal(t, want, got, "Results")
	got = map[string]jobs.PageRecord{}
	require.NoError(t, s.ResultsByURL(ctx, job, func(p jobs.PageRecord) error {
		got[p.URL] = p
		return nil
	}))
	assert.Equal(t, want, got, "ResultsByURL")
	base, ok, err := s.BaselinePage(ctx, job, c)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, want[c], base.Page, "a baseline read")

	if pg {
		assert.Equal(t, "fillfactor=50", frontierOptions(ctx, t, s))
	}
}

func TestSQLiteUpgradeFromV7(t *testing.T) {
	dir := t.TempDir()
	s := openSQLite(t, dir)
	job := makeV7(t, s, false)
	require.NoError(t, s.Close())
	checkUpgradedFromV7(t, openSQLite(t, dir), false, job)
}

func TestPostgresUpgradeFromV7(t *testing.T) {
	pg := testsuite.StartPostgres(t)
	s := openPostgres(t, pg)
	job := makeV7(t, s, true)
	require.NoError(t, s.Close())
	checkUpgradedFromV7(t, openPostgres(t, pg), true, job)
}
