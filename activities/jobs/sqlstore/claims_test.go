package sqlstore_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/activities/jobs/storetest"
	"github.com/batoncrawl/baton/testsuite"
)

// TestPostgresClaimRacedIsTriedAgain: a group commit whose page claims a
// body hash another transaction claimed first, not yet committed, waits
// for it; once that one commits, the group commit is tried again and
// records its page as a duplicate of the other's, with no error.
func TestPostgresClaimRacedIsTriedAgain(t *testing.T) {
	pg := testsuite.StartPostgres(t)
	s := openPostgres(t, pg)
	ctx := testCtx(t, time.Minute)
	job := storetest.JobID(t, "claim")
	a, x := storetest.URL("a"), storetest.URL("x")
	_, err := s.CreateJob(ctx, storetest.Spec(job, 0, a), storetest.Entries(0, a))
	require.NoError(t, err)
	_, err = s.TakeBatch(ctx, job, "b1", 1)
	require.NoError(t, err)
	_, err = s.Claim(ctx, job, "b1", "r1", 1)
	require.NoError(t, err)

	// Another commit, under way: x's page claims hash H.
	other, err := s.DB().BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = other.Rollback() }()
	_, err = other.ExecContext(ctx, `INSERT INTO baton_results (job, url, batch, failed, record, claim) VALUES ($1, $2, 'b0', 0, $3, 'H')`,
		job, x, `{"url":"`+x+`"}`)
	require.NoError(t, err)

	p := storetest.Page(job, "b1", "r1", 1, a, 0, "")
	p.BodyHash = "H"
	done := make(chan error, 1)
	go func() {
		_, err := s.Record(ctx, jobs.Record{Job: job, Batch: "b1", Runner: "r1", Epoch: 1, URL: a, Page: p})
		done <- err
	}()
	// The commit of a waits for the other's claim.
	require.Eventually(t, func() bool {
		var n int
		err := s.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n)
		return err == nil && n > 0
	}, 30*time.Second, 10*time.Millisecond, "a's commit waits for x's claim")
	require.NoError(t, other.Commit())

	select {
	case err := <-done:
		require.NoError(t, err, "the commit that lost the claim is tried again")
	case <-ctx.Done():
		t.Fatal("a's commit did not end")
	}
	got, ok, err := s.BaselinePage(ctx, job, a)
	require.NoError(t, err)
	require.True(t, ok, "a recorded")
	assert.Equal(t, x, got.Page.DuplicateOf, "a duplicates x, which claimed H first")
}
