package sqlstore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/activities/jobs/sqlstore"
	"github.com/batoncrawl/baton/testsuite"
)

// TestPostgresStatementsPrepared: the statements of a pull and of a group
// commit are prepared once on a connection and run by name after, with
// no round trip more than unnamed (a pull two, a commit at most three);
// after the server restarts, the new connections prepare them again.
func TestPostgresStatementsPrepared(t *testing.T) {
	pg := testsuite.StartPostgres(t)
	ctx := testCtx(t, 2*time.Minute)
	proxy := testsuite.StartProxy(t, pg.Address())
	const pool = 2
	s, err := sqlstore.Open(ctx, sqlstore.Config{Store: strings.Replace(pg.DSN(), pg.Address(), proxy.Addr(), 1), MaxConns: pool})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	const rounds = 6
	round := pullAndCommit(t, ctx, proxy, s, "prepared", rounds)
	reused := func(t *testing.T) {
		ps, err := sqlstore.PreparedStatements(ctx, s, pool)
		require.NoError(t, err)
		hot := 0
		for _, p := range ps {
			assert.LessOrEqual(t, p.Connections, pool)
			if p.Runs >= int64(rounds-1) {
				hot++
			}
		}
		assert.LessOrEqual(t, len(ps), pool*sqlstore.MaxNamed, "statements prepared")
		assert.GreaterOrEqual(t, hot, 8, "statements prepared once and run at every round after the first: %d of %d", hot, len(ps))
		t.Logf("%d statements prepared, %d run at every round", len(ps), hot)
	}
	for i := range rounds {
		round(t, i)
	}
	reused(t)

	pg.Restart()
	for i := range rounds {
		round(t, rounds+i)
	}
	reused(t)
}

// pullAndCommit creates job in s and returns a round of its crawl: a
// pull of a few URLs and their group commit, each in the round trips of
// a pipeline (counted by proxy, if not nil) but for the first round of
// every rounds.
func pullAndCommit(t *testing.T, ctx context.Context, proxy *testsuite.Proxy, s *sqlstore.Store, job string, rounds int) func(*testing.T, int) {
	sends := func() int64 {
		if proxy == nil {
			return 0
		}
		return proxy.Sends()
	}
	opts := crawl.DefaultOptions()
	opts.Parallelism, opts.IgnoreRobots = 24, true
	var seeds []jobs.Entry
	for i := range 200 {
		seeds = append(seeds, jobs.Entry{URL: fmt.Sprintf("http://new.test/s%d", i)})
	}
	_, err := s.CreateJob(ctx, jobs.Spec{ID: job, Group: "g", Seeds: []string{seeds[0].URL}, Options: opts}, seeds)
	require.NoError(t, err)
	_, err = s.OpenBatch(ctx, job, "b")
	require.NoError(t, err)
	_, err = s.Claim(ctx, job, "b", "r1", 1)
	require.NoError(t, err)
	// A phase's first round reads the job's policy (once per process) or
	// reconnects (after a restart): its sends are not counted.
	return func(t *testing.T, i int) {
		before := sends()
		p, err := s.Pull(ctx, job, "b", 1, 4, 4)
		pulled := sends() - before
		require.NoError(t, err)
		require.NotEmpty(t, p.Entries)
		if i%rounds != 0 {
			assert.LessOrEqual(t, pulled, int64(2), "round %d: the pull's sends to the server", i)
		}
		var rs []jobs.Record
		for _, e := range p.Entries {
			rs = append(rs, jobs.Record{Job: job, Batch: "b", Epoch: 1, Runner: "r1", URL: e.URL,
				Page:  &jobs.PageRecord{Page: crawl.Page{URL: e.URL, StatusCode: 200}, Job: job, Batch: "b", Runner: "r1", Epoch: 1},
				Links: []jobs.Entry{{URL: e.URL + "/a", Depth: 1}, {URL: e.URL + "/b", Depth: 1}}})
		}
		before = sends()
		_, err = s.RecordAll(ctx, rs)
		committed := sends() - before
		require.NoError(t, err)
		if i%rounds != 0 {
			assert.LessOrEqual(t, committed, int64(3), "round %d: the commit's sends to the server", i)
		}
	}
}

// TestPostgresNamedStatementsBehindPgBouncer: behind a PgBouncer in
// transaction mode that does not keep a client's named statements (before
// 1.21), two stores share one server connection: the second finds the
// first's statement there when it prepares its own, its transaction is
// retried unnamed, and it names nothing from then on; no pull or commit
// fails. A DSN with default_query_exec_mode=exec names nothing from the
// start.
func TestPostgresNamedStatementsBehindPgBouncer(t *testing.T) {
	pg := testsuite.StartPostgres(t)
	openPostgres(t, pg).Close() // the schema, set up directly
	bouncer := testsuite.StartPgBouncer(t, pg, 1)
	ctx := testCtx(t, 2*time.Minute)
	open := func(dsn string) *sqlstore.Store {
		s, err := sqlstore.OpenPostgres(ctx, dsn, "")
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	const rounds = 4
	first, second := open(bouncer.DSN()), open(bouncer.DSN())
	one := pullAndCommit(t, ctx, nil, first, "bouncer1", rounds)
	two := pullAndCommit(t, ctx, nil, second, "bouncer2", rounds)
	for i := range rounds {
		one(t, i)
	}
	assert.True(t, sqlstore.NamesStatements(first), "the first store, alone on the server connection")
	for i := range rounds {
		two(t, i)
		one(t, rounds+i)
	}
	assert.False(t, sqlstore.NamesStatements(second), "the store that found another's statement on its server connection")

	sep := "?"
	if strings.Contains(pg.DSN(), "?") {
		sep = "&"
	}
	plain := open(pg.DSN() + sep + "default_query_exec_mode=exec")
	assert.False(t, sqlstore.NamesStatements(plain), "default_query_exec_mode=exec")
	three := pullAndCommit(t, ctx, nil, plain, "plain", rounds)
	for i := range rounds {
		three(t, i)
	}
}
