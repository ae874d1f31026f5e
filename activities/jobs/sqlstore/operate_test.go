package sqlstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/activities/jobs/sqlstore"
	"github.com/batoncrawl/baton/activities/jobs/storetest"
	"github.com/batoncrawl/baton/testsuite"
)

// TestPostgresVanishedClientReleasesLocks: a worker holding the batch
// row's lock in an open transaction vanishes (its network goes silent: no
// FIN, no RST, as when its machine loses power). The backup's Claim and
// the job's Requeue must not wait for the kernel's two-hour keepalive: the
// server ends the session within sqlstore.SessionBound.
func TestPostgresVanishedClientReleasesLocks(t *testing.T) {
	pg := testsuite.StartPostgres(t)
	px := testsuite.StartProxy(t, pg.Address())
	ctx := testCtx(t, 2*time.Minute)
	direct := openPostgres(t, pg)
	vanishing, err := sqlstore.OpenPostgres(ctx, pg.DSNFor("", "", px.Addr()), "")
	require.NoError(t, err)
	t.Cleanup(func() { px.Thaw(); _ = vanishing.Close() })

	job := storetest.JobID(t, "vanish")
	seeds := []string{storetest.URL("a"), storetest.URL("b")}
	_, err = direct.CreateJob(ctx, storetest.Spec(job, 0, seeds...), storetest.Entries(0, seeds...))
	require.NoError(t, err)
	_, err = direct.TakeBatch(ctx, job, "b0", 2)
	require.NoError(t, err)
	_, err = vanishing.Claim(ctx, job, "b0", "runner-1", 1)
	require.NoError(t, err)

	// The holder's group commit, caught between its statements: the batch
	// row locked, as RecordAll holds it up to its commit.
	tx, err := sqlstore.Begin(ctx, vanishing)
	require.NoError(t, err)
	_, err = tx.ExecContext(ctx, `UPDATE baton_frontier SET state = 2 WHERE job = $1 AND url = $2`, job, seeds[0])
	require.NoError(t, err)
	var holder string
	require.NoError(t, tx.QueryRowContext(ctx, `SELECT holder FROM baton_batches WHERE job = $1 AND id = 'b0' FOR UPDATE`, job).Scan(&holder))
	px.Freeze()
	frozen := time.Now()

	b, err := direct.Claim(ctx, job, "b0", "runner-2", 2)
	took := time.Since(frozen)
	require.NoError(t, err, "the backup's Claim after %v", took)
	assert.Equal(t, "runner-2", b.Holder)
	t.Logf("the backup's Claim went through %v after the holder vanished (bound %v)", took.Round(time.Millisecond), sqlstore.SessionBound)
	assert.Less(t, took, sqlstore.SessionBound+5*time.Second, "the vanished session held its locks too long")
	n, err := direct.Requeue(ctx, job, "b0", 3)
	require.NoError(t, err)
	assert.Equal(t, 2, n, "both URLs back in the frontier: the vanished holder's finish was rolled back")
}

// TestPostgresReadOnlyCLI: the CLI's reads work for a role that may only
// SELECT (no DDL at an open), and a read-only open of a database without
// Baton's schema says so instead of creating it.
func TestPostgresReadOnlyCLI(t *testing.T) {
	pg := testsuite.StartPostgres(t)
	ctx := testCtx(t, time.Minute)

	// A database without the schema: a read-only open refuses, creating
	// nothing.
	_, err := sqlstore.Open(ctx, sqlstore.Config{Store: pg.DSN(), Existing: true})
	require.ErrorIs(t, err, sqlstore.ErrNoSchema)
	assert.Contains(t, err.Error(), "baton store migrate")

	w := openPostgres(t, pg) // a worker sets the schema up
	job := storetest.JobID(t, "ro")
	_, err = w.CreateJob(ctx, storetest.Spec(job, 0, storetest.URL("a")), storetest.Entries(0, storetest.URL("a")))
	require.NoError(t, err)
	pg.Admin(t,
		`CREATE ROLE reader LOGIN PASSWORD 'reader-pw'`,
		`GRANT SELECT ON ALL TABLES IN SCHEMA public TO reader`)
	before := pg.LogOffset()
	for _, existing := range []bool{true, false} {
		r, err := sqlstore.Open(ctx, sqlstore.Config{Store: pg.DSNFor("reader", "reader-pw", ""), Existing: existing})
		require.NoError(t, err, "open as a read-only role (Existing %v)", existing)
		assert.Equal(t, w.Identity(), r.Identity())
		list, err := r.Jobs(ctx)
		require.NoError(t, err)
		require.Len(t, list, 1)
		assert.Equal(t, job, list[0].ID)
		st, err := r.Stats(ctx, job)
		require.NoError(t, err)
		assert.Equal(t, 1, st.Queued)
		require.NoError(t, r.Results(ctx, job, func(jobs.PageRecord) error { return nil }))
		require.NoError(t, r.Close())
	}
	assert.NotContains(t, pg.LogSince(before), "ERROR", "a read-only open ran something it may not")

	// Migrate is idempotent and reports the version it found.
	from, err := w.Migrate(ctx)
	require.NoError(t, err)
	assert.Zero(t, from, "the first open found no schema")
	again := openPostgres(t, pg)
	from, err = again.Migrate(ctx)
	require.NoError(t, err)
	assert.Equal(t, again.SchemaVersion(), from)
}

// TestPostgresPoolSize: a process keeps at most MaxConns sessions however
// many goroutines use the store.
func TestPostgresPoolSize(t *testing.T) {
	pg := testsuite.StartPostgres(t)
	ctx := testCtx(t, time.Minute)
	s, err := sqlstore.Open(ctx, sqlstore.Config{Store: pg.DSN(), MaxConns: 3})
	require.NoError(t, err)
	defer s.Close()
	job := storetest.JobID(t, "pool")
	_, err = s.CreateJob(ctx, storetest.Spec(job, 0, storetest.URL("a")), storetest.Entries(0, storetest.URL("a")))
	require.NoError(t, err)
	var wg sync.WaitGroup
	peak := 0
	var mu sync.Mutex
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				if _, err := s.Stats(ctx, job); err != nil {
					t.Errorf("reader %d: %v", i, err)
					return
				}
			}
			n := pg.Sessions(t, pg.User())
			mu.Lock()
			peak = max(peak, n)
			mu.Unlock()
		}()
	}
	wg.Wait()
	assert.LessOrEqual(t, peak, 3, "sessions of one store with MaxConns 3")
	_, err = sqlstore.Open(ctx, sqlstore.Config{Store: pg.DSN(), MaxConns: -1})
	require.Error(t, err)
	assert.True(t, strings.Contains(err.Error(), "store-max-conns"), "%v", err)
}

// TestLongLinks: a link longer than jobs.MaxURLBytes is refused for that
// link alone, with the reason in the page's record; the page and its other
// links are recorded and the batch finishes (on PostgreSQL a 10 KB key
// failed the whole group commit, for ever).
func TestLongLinks(t *testing.T) {
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			var s *sqlstore.Store
			if engine == "sqlite" {
				s = openSQLite(t, t.TempDir())
			} else {
				s = openPostgres(t, testsuite.StartPostgres(t))
			}
			ctx := testCtx(t, time.Minute)
			job := storetest.JobID(t, "long")
			_, err := s.CreateJob(ctx, storetest.Spec(job, 0, storetest.URL("a")), storetest.Entries(0, storetest.URL("a")))
			require.NoError(t, err)
			_, err = s.TakeBatch(ctx, job, "b0", 1)
			require.NoError(t, err)
			_, err = s.Claim(ctx, job, "b0", "r1", 1)
			require.NoError(t, err)
			long := storetest.URL("x?q=" + strings.Repeat("y", 10<<10))
			got, err := s.Record(ctx, jobs.Record{Job: job, Batch: "b0", Runner: "r1", Epoch: 1, URL: storetest.URL("a"),
				Page:  storetest.Page(job, "b0", "r1", 1, storetest.URL("a"), 0, ""),
				Links: storetest.Entries(1, long, storetest.URL("b"))})
			require.NoError(t, err)
			assert.True(t, got.Wrote)
			assert.Equal(t, 1, got.Added, "the short link queued")
			var rec jobs.PageRecord
			require.NoError(t, s.Results(ctx, job, func(p jobs.PageRecord) error { rec = p; return nil }))
			require.Len(t, rec.LinksRefused, 1)
			assert.Contains(t, rec.LinksRefused[0].Reason, fmt.Sprint(jobs.MaxURLBytes))
			assert.True(t, strings.HasPrefix(long, rec.LinksRefused[0].URL))
			_, err = s.FinishBatch(ctx, job, "b0", 1)
			require.NoError(t, err)

			// A long seed is refused at submission, naming it.
			err = storetest.Spec(storetest.JobID(t, "longseed"), 0, long).Validate()
			require.Error(t, err)
			assert.Contains(t, err.Error(), "seeds[0]")
			_, err = s.CreateJob(ctx, storetest.Spec(storetest.JobID(t, "longseed"), 0, storetest.URL("a")), storetest.Entries(0, long))
			require.Error(t, err)
			assert.False(t, errors.Is(err, context.DeadlineExceeded))
		})
	}
}

// TestPostgresThroughPgBouncer: the store works behind PgBouncer in
// transaction mode (no named prepared statements, no session state): the
// conformance suite and a cross-linked crawl of three runners through a
// pool of 4 server connections.
func TestPostgresThroughPgBouncer(t *testing.T) {
	pg := testsuite.StartPostgres(t)
	openPostgres(t, pg).Close() // the schema, set up directly (DDL needs no pooler)
	bouncer := testsuite.StartPgBouncer(t, pg, 4)
	open := func(t *testing.T) *sqlstore.Store {
		s, err := sqlstore.OpenPostgres(testCtx(t, time.Minute), bouncer.DSN(), "")
		require.NoError(t, err, "OpenPostgres through pgbouncer")
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	t.Run("Conformance", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) jobs.Store { return open(t) })
	})
	t.Run("CrossLinkedCrawl", func(t *testing.T) {
		const pages = 600
		ctx := testCtx(t, 2*time.Minute)
		stores := []*sqlstore.Store{open(t), open(t), open(t)}
		job := storetest.JobID(t, "bouncer")
		seeds := []string{storetest.URL("p00000"), storetest.URL("p00001"), storetest.URL("p00002")}
		_, err := stores[0].CreateJob(ctx, storetest.Spec(job, 0, seeds...), storetest.Entries(0, seeds...))
		require.NoError(t, err)
		for r := range stores {
			_, err := stores[0].TakeBatch(ctx, job, fmt.Sprintf("b%d", r), 1)
			require.NoError(t, err)
		}
		var wg sync.WaitGroup
		errs := make([]error, len(stores))
		for r, s := range stores {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[r] = runOneBatch(ctx, s, job, fmt.Sprintf("b%d", r), fmt.Sprintf("runner-%d", r), crossLinked(pages))
			}()
		}
		wg.Wait()
		for _, err := range errs {
			require.NoError(t, err)
		}
		st, err := stores[0].Stats(ctx, job)
		require.NoError(t, err)
		assert.Equal(t, jobs.Stats{Seen: pages, Recorded: pages, Items: itemsOf(pages)}, st)
	})
}

// TestPostgresWarmPool: a worker's store (Config.Warm) has its whole pool
// open once it is opened, as the server sees it, and keeps it; a CLI's
// store opens only what it used.
func TestPostgresWarmPool(t *testing.T) {
	pg := testsuite.StartPostgres(t)
	ctx := testCtx(t, time.Minute)
	serverConns := func() int {
		var n int
		admin := openPostgres(t, pg)
		require.NoError(t, admin.DB().QueryRowContext(ctx,
			`SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'`).Scan(&n))
		require.NoError(t, admin.Close())
		return n
	}
	before := serverConns()
	cli, err := sqlstore.Open(ctx, sqlstore.Config{Store: pg.DSN(), MaxConns: 5})
	require.NoError(t, err)
	assert.Less(t, cli.DB().Stats().OpenConnections, 5, "a CLI's store opens what it uses")
	require.NoError(t, cli.Close())

	w, err := sqlstore.Open(ctx, sqlstore.Config{Store: pg.DSN(), MaxConns: 5, Warm: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.Close() })
	st := w.DB().Stats()
	assert.Equal(t, 5, st.OpenConnections, "the whole pool open")
	assert.Equal(t, 5, st.Idle, "and back in the pool")
	assert.Eventually(t, func() bool { return serverConns()-before == 5 }, 10*time.Second, 20*time.Millisecond,
		"the server sees the worker's 5 connections, and no other of ours")
}
