package sqlstore_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/testsuite"
)

// TestPostgresHandOutReadsOnlyWhatItTakes: a new job's hand-outs read the
// rows they take, not every queued URL of the job, although PostgreSQL's
// statistics, sampled while nothing was queued (the frontier of finished
// jobs), say no URL is: with "url IN (…)" or "seq IN (…)" the planner
// would walk the host index over the whole queue under the job's lock.
// Counted in pg_stat_user_indexes (index entries read on the frontier)
// around a TakeBatch of 24 and two pulls of 24 from a queue of 10,000.
func TestPostgresHandOutReadsOnlyWhatItTakes(t *testing.T) {
	pg := testsuite.StartPostgres(t)
	ctx := testCtx(t, 2*time.Minute)
	s := openPostgres(t, pg)
	// Finished jobs fill the table; the statistics are taken then.
	pg.Admin(t,
		`INSERT INTO baton_frontier (job, url, depth, state, host) SELECT 'old' || (g % 4), 'http://old.test/p' || g, 1, 2, 'old.test' FROM generate_series(1, 40000) g`,
		`ANALYZE baton_frontier`)
	opts := crawl.DefaultOptions()
	opts.Parallelism, opts.IgnoreRobots = 64, true // no robots.txt hold on the host
	spec := jobs.Spec{ID: "handout", Group: "g", Seeds: []string{"http://new.test/"}, Options: opts}
	_, err := s.CreateJob(ctx, spec, []jobs.Entry{{URL: "http://new.test/"}})
	require.NoError(t, err)
	pg.Admin(t, `INSERT INTO baton_frontier (job, url, depth, state, host) SELECT 'handout', 'http://new.test/p' || g, 1, 0, 'new.test' FROM generate_series(1, 10000) g`)
	// What the frontier's indexes were read for so far (the statistics of
	// closed sessions: the store's are closed before each reading).
	read := func() int64 {
		return pg.AdminInt(t, `SELECT COALESCE(sum(idx_tup_read), 0)::bigint FROM pg_stat_user_indexes WHERE relname = 'baton_frontier'`)
	}
	require.NoError(t, s.Close())
	waitSessions(t, pg)
	before := read()
	s = openPostgres(t, pg)
	b, err := s.TakeBatch(ctx, "handout", "handout-b1", 24)
	require.NoError(t, err)
	require.Equal(t, 24, b.Size)
	_, err = s.Claim(ctx, "handout", "handout-b1", "r1", b.Epoch+1)
	require.NoError(t, err)
	for i := 0; i < 2; i++ {
		p, err := s.Pull(ctx, "handout", "handout-b1", b.Epoch+1, 24, 8)
		require.NoError(t, err)
		require.Len(t, p.Entries, 24, "pull %d", i)
	}
	require.NoError(t, s.Close())
	waitSessions(t, pg)
	got := read() - before
	t.Logf("a TakeBatch and two pulls of 24 read %d index entries of the frontier (10,000 URLs queued)", got)
	assert.Less(t, got, int64(2000), "the hand-outs read the index over the whole queue")
}

// waitSessions waits until the test's sessions of the client user are
// closed (their statistics flushed).
func waitSessions(t *testing.T, pg *testsuite.Postgres) {
	t.Helper()
	testsuite.Eventually(t, 30*time.Second, "the store's sessions closed", func() (bool, error) {
		return pg.Sessions(t, pg.User()) == 0, nil
	})
}
