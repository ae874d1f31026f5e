package sqlstore_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/jobs/sqlstore"
	"github.com/batoncrawl/baton/activities/jobs/storetest"
	"github.com/batoncrawl/baton/testsuite"
)

// TestPostgresMigrationWaitsBriefly: an upgrade whose DDL waits for a lock
// another session holds on a table (a writer's long transaction) gives up
// after its own short lock timeout, tried a few times, and says which
// table it waited for, instead of waiting as long as the store's
// statements may (and blocking every statement on the table behind it);
// once the lock is gone the upgrade goes through.
func TestPostgresMigrationWaitsBriefly(t *testing.T) {
	pg := testsuite.StartPostgres(t)
	ctx := testCtx(t, 2*time.Minute)
	s := openPostgres(t, pg)
	_, err := s.DB().ExecContext(ctx, `UPDATE baton_store SET value = '3' WHERE key = 'schema'`)
	require.NoError(t, err)
	writer, err := s.DB().BeginTx(ctx, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = writer.Rollback() })
	_, err = writer.ExecContext(ctx, `LOCK TABLE baton_frontier IN ROW EXCLUSIVE MODE`)
	require.NoError(t, err)

	cfg := sqlstore.Config{Store: pg.DSN(), Guards: sqlstore.Guards{MigrationLock: 200 * time.Millisecond}}
	start := time.Now()
	_, err = sqlstore.Open(ctx, cfg)
	took := time.Since(start)
	require.Error(t, err, "the upgrade while a writer holds baton_frontier")
	t.Logf("gave up after %v: %v", took.Round(time.Millisecond), err)
	assert.Less(t, took, 10*time.Second, "the upgrade gave up soon")
	assert.Contains(t, err.Error(), "ON baton_frontier", "the error names the table")
	assert.Contains(t, err.Error(), "lock was not granted")

	require.NoError(t, writer.Rollback())
	up, err := sqlstore.Open(ctx, cfg)
	require.NoError(t, err, "the upgrade once the writer is done")
	require.NoError(t, up.Close())
	var v string
	require.NoError(t, s.DB().QueryRowContext(ctx, `SELECT value FROM baton_store WHERE key = 'schema'`).Scan(&v))
	assert.Equal(t, fmt.Sprint(s.SchemaVersion()), v)
}

// TestPostgresUpgradeFillsHostsByLots: the version 4 upgrade sets the
// host of every frontier row of an older store, over several lots, and
// leaves a URL without a host as it is.
func TestPostgresUpgradeFillsHostsByLots(t *testing.T) {
	const rows = 2500
	pg := testsuite.StartPostgres(t)
	ctx := testCtx(t, 2*time.Minute)
	s := openPostgres(t, pg)
	job := storetest.JobID(t, "hosts")
	seed := storetest.URL("seed")
	_, err := s.CreateJob(ctx, storetest.Spec(job, 0, seed), storetest.Entries(0, seed))
	require.NoError(t, err)
	_, err = s.DB().ExecContext(ctx, fmt.Sprintf(`INSERT INTO baton_frontier (job, url, depth, host)
		SELECT $1, 'http://h' || (i %% 7) || '.test/p' || i, 1, '' FROM generate_series(1, %d) AS i`, rows), job)
	require.NoError(t, err)
	_, err = s.DB().ExecContext(ctx, `INSERT INTO baton_frontier (job, url, depth, host) VALUES ($1, 'mailto:x', 1, '')`, job)
	require.NoError(t, err)
	_, err = s.DB().ExecContext(ctx, `UPDATE baton_store SET value = '3' WHERE key = 'schema'`)
	require.NoError(t, err)

	up := openPostgres(t, pg)
	var empty, h3 int
	require.NoError(t, up.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM baton_frontier WHERE job = $1 AND host = ''`, job).Scan(&empty))
	require.NoError(t, up.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM baton_frontier WHERE job = $1 AND host = 'h3.test'`, job).Scan(&h3))
	assert.Equal(t, 1, empty, "only the URL without a host has none")
	assert.Equal(t, rows/7, h3, "h3.test's URLs")
}
