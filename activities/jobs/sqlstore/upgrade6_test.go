package sqlstore_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/crawler"
	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/activities/jobs/sqlstore"
	"github.com/batoncrawl/baton/activities/jobs/storetest"
	"github.com/batoncrawl/baton/testsuite"
)

// makeV5 records a job with two items and a sink that delivered the first
// in s, then turns the store back into one of schema version 5 (no
// dead letters, no list of jobs to deliver, baton_sinks without the
// columns of version 6); it returns the job and its items.
func makeV5(t *testing.T, s *sqlstore.Store, postgres bool) (string, []jobs.ItemRecord) {
	t.Helper()
	ctx := testCtx(t, time.Minute)
	job := storetest.JobID(t, "v5")
	spec := storetest.Spec(job, 0, storetest.URL("a"))
	spec.Group = "g-" + job
	_, err := s.CreateJob(ctx, spec, storetest.Entries(0, storetest.URL("a")))
	require.NoError(t, err)
	_, err = s.TakeBatch(ctx, job, "b1", 1)
	require.NoError(t, err)
	_, err = s.Claim(ctx, job, "b1", "r1", 1)
	require.NoError(t, err)
	p := storetest.Page(job, "b1", "r1", 1, storetest.URL("a"), 0, "")
	p.Items = 2
	_, err = s.Record(ctx, jobs.Record{Job: job, Batch: "b1", Runner: "r1", Epoch: 1, URL: storetest.URL("a"), Page: p,
		Items: []crawler.Pushed{{Index: 0, Value: json.RawMessage(`1`)}, {Index: 1, Value: json.RawMessage(`2`)}}})
	require.NoError(t, err)
	its, err := s.Items(ctx, job, 0, 10)
	require.NoError(t, err)
	st, err := s.LeaseSink(ctx, job, "hook", "w1", time.Minute)
	require.NoError(t, err)
	require.NoError(t, s.AckSink(ctx, st.Lease("w1"), its[0].Seq, 1))

	down := []string{`DROP TRIGGER baton_items_pending`}
	if postgres {
		down = []string{`DROP TRIGGER baton_items_pending ON baton_items`, `DROP FUNCTION baton_items_pending()`}
	}
	down = append(down, `DROP TABLE baton_sink_pending`, `DROP TABLE baton_sink_dead`,
		`ALTER TABLE baton_sinks DROP COLUMN epoch`, `ALTER TABLE baton_sinks DROP COLUMN refusals`,
		`ALTER TABLE baton_sinks DROP COLUMN retry_ms`, `ALTER TABLE baton_sinks DROP COLUMN skipped`,
		`UPDATE baton_store SET value = '5' WHERE key = 'schema'`)
	for _, q := range down {
		_, err := s.DB().ExecContext(ctx, q)
		require.NoError(t, err, q)
	}
	return job, its
}

// checkUpgradedFromV5: the jobs with items of a version-5 store are
// listed for delivery, their sinks keep their cursors and gain the
// columns of version 6.
func checkUpgradedFromV5(t *testing.T, s *sqlstore.Store, job string, its []jobs.ItemRecord) {
	t.Helper()
	ctx := testCtx(t, time.Minute)
	from, err := s.Migrate(ctx)
	require.NoError(t, err)
	assert.Equal(t, 5, from)
	pend, err := s.PendingJobs(ctx, "g-"+job)
	require.NoError(t, err)
	assert.Equal(t, []jobs.PendingJob{{Job: job, Seq: its[1].Seq}}, pend, "the job's items listed for delivery")
	sinks, err := s.Sinks(ctx, job)
	require.NoError(t, err)
	require.Len(t, sinks, 1)
	assert.Equal(t, its[0].Seq, sinks[0].Cursor)
	assert.Equal(t, int64(0), sinks[0].Skipped)
	st, err := s.LeaseSink(ctx, job, "hook", "w2", time.Minute)
	require.ErrorIs(t, err, jobs.ErrLeaseHeld, "the lease of before the upgrade still runs")
	assert.Equal(t, "w1", st.Holder)
}

func TestSQLiteUpgradeFromV5(t *testing.T) {
	dir := t.TempDir()
	s := openSQLite(t, dir)
	job, its := makeV5(t, s, false)
	require.NoError(t, s.Close())
	checkUpgradedFromV5(t, openSQLite(t, dir), job, its)
}

func TestPostgresUpgradeFromV5(t *testing.T) {
	pg := testsuite.StartPostgres(t)
	s := openPostgres(t, pg)
	job, its := makeV5(t, s, true)
	require.NoError(t, s.Close())
	checkUpgradedFromV5(t, openPostgres(t, pg), job, its)
}
