package sqlstore_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/jobs/storetest"
	"github.com/batoncrawl/baton/testsuite"
)

// TestPostgresLeaseClockReadAfterTheJobLock: a pull reads the store's
// clock in the statement that takes the job's lock, and must read it once
// the lock is granted: a clock read before a wait for the lock would date
// the batch's host leases (their expiry, a host's release) as early as the
// wait was long. A pull waits here behind a transaction that holds the
// job's row; the clock is read after the pull is seen waiting, the lock
// released, and the lease the pull renewed must expire a TTL after that
// reading or later.
func TestPostgresLeaseClockReadAfterTheJobLock(t *testing.T) {
	pg := testsuite.StartPostgres(t)
	ctx := testCtx(t, 2*time.Minute)
	s := openPostgres(t, pg)
	job := storetest.JobID(t, "clock")
	seed := storetest.URL("s")
	_, err := s.CreateJob(ctx, storetest.Spec(job, 0, seed), storetest.Entries(0, seed))
	require.NoError(t, err)
	b, err := s.TakeBatch(ctx, job, "b1", 1)
	require.NoError(t, err)
	require.Equal(t, 1, b.Size)
	_, err = s.Claim(ctx, job, "b1", "r1", 1)
	require.NoError(t, err)
	first, err := s.Pull(ctx, job, "b1", 1, 0, 4)
	require.NoError(t, err)
	require.Len(t, first.Hosts, 1, "the batch holds its seed's host")
	ttl := first.TTL.Milliseconds()
	require.Positive(t, ttl)

	tx, err := s.DB().BeginTx(ctx, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback() })
	var one int
	require.NoError(t, tx.QueryRowContext(ctx, `SELECT 1 FROM baton_jobs WHERE id = $1 FOR UPDATE`, job).Scan(&one))
	pulled := make(chan error, 1)
	go func() {
		_, err := s.Pull(ctx, job, "b1", 1, 0, 4)
		pulled <- err
	}()
	// Until it has waited 50 ms: a clock read before the wait is that much
	// older than the reading below.
	testsuite.Eventually(t, 30*time.Second, "the pull waiting for the job's lock for 50 ms", func() (bool, error) {
		return pg.AdminInt(t, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%baton_jobs%'
			AND clock_timestamp() - query_start >= interval '50 milliseconds'`) > 0, nil
	})
	var waitedFrom int64
	require.NoError(t, tx.QueryRowContext(ctx, `SELECT (extract(epoch from clock_timestamp()) * 1000)::bigint`).Scan(&waitedFrom))
	require.NoError(t, tx.Commit())
	require.NoError(t, <-pulled)
	expires := pg.AdminInt(t, `SELECT max(expires_ms) FROM baton_host_leases WHERE job = $1 AND holder = 'b1'`, job)
	assert.GreaterOrEqual(t, expires, waitedFrom+ttl, "the lease renewed by the waiting pull is dated before the lock was granted (by %d ms)", waitedFrom+ttl-expires)
}
