package sqlstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/activities/jobs/sqlstore"
	"github.com/batoncrawl/baton/activities/jobs/storetest"
	"github.com/batoncrawl/baton/testsuite"
)

// makeV8 is makeV7's store turned into one of schema version 8 (on
// PostgreSQL: baton_frontier with a fillfactor of 80).
func makeV8(t *testing.T, s *sqlstore.Store, pg bool) string {
	t.Helper()
	ctx := testCtx(t, time.Minute)
	job := makeV7(t, s, pg)
	var up []string
	if pg {
		up = append(up, `ALTER TABLE baton_frontier SET (fillfactor = 80)`)
	}
	up = append(up, `UPDATE baton_store SET value = '8' WHERE key = 'schema'`)
	for _, q := range up {
		_, err := s.DB().ExecContext(ctx, q)
		require.NoError(t, err, q)
	}
	return job
}

// checkUpgradedFromV8: a version-8 store is upgraded once; its job's
// unfinished URL is recorded after the upgrade, beside the pages recorded
// before, and on PostgreSQL baton_frontier leaves half of each page for
// its rows' new versions.
func checkUpgradedFromV8(t *testing.T, s *sqlstore.Store, pg bool, job string) {
	t.Helper()
	ctx := testCtx(t, time.Minute)
	from, err := s.Migrate(ctx)
	require.NoError(t, err)
	assert.Equal(t, 8, from)
	c := storetest.URL("c")
	got, err := s.Record(ctx, jobs.Record{Job: job, Batch: "b1", Runner: "r1", Epoch: 1, URL: c, Page: v7Page(job, c)})
	require.NoError(t, err)
	assert.True(t, got.Wrote, "the URL handed out before the upgrade is recorded after it")
	n := 0
	require.NoError(t, s.Results(ctx, job, func(jobs.PageRecord) error {
		n++
		return nil
	}))
	assert.Equal(t, 3, n, "pages recorded before and after the upgrade")
	if pg {
		assert.Equal(t, "fillfactor=50", frontierOptions(ctx, t, s))
	}
}

func TestSQLiteUpgradeFromV8(t *testing.T) {
	dir := t.TempDir()
	s := openSQLite(t, dir)
	job := makeV8(t, s, false)
	require.NoError(t, s.Close())
	checkUpgradedFromV8(t, openSQLite(t, dir), false, job)
}

func TestPostgresUpgradeFromV8(t *testing.T) {
	pg := testsuite.StartPostgres(t)
	s := openPostgres(t, pg)
	job := makeV8(t, s, true)
	require.NoError(t, s.Close())
	checkUpgradedFromV8(t, openPostgres(t, pg), true, job)
}

// frontierOptions are baton_frontier's storage options on PostgreSQL
// (its reloptions, comma-separated).
func frontierOptions(ctx context.Context, t *testing.T, s *sqlstore.Store) string {
	var opts string
	require.NoError(t, s.DB().QueryRowContext(ctx, `SELECT coalesce(array_to_string(reloptions, ','), '') FROM pg_class
		WHERE relname = 'baton_frontier' AND relnamespace = to_regnamespace(current_schema())`).Scan(&opts))
	return opts
}
