package sqlstore_test

import (
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
	const job, rounds = "prepared", 6
	opts := crawl.DefaultOptions()
	opts.Parallelism, opts.IgnoreRobots = 24, true
	var seeds []jobs.Entry
	for i := range 200 {
		seeds = append(seeds, jobs.Entry{URL: fmt.Sprintf("http://new.test/s%d", i)})
	}
	_, err = s.CreateJob(ctx, jobs.Spec{ID: job, Group: "g", Seeds: []string{seeds[0].URL}, Options: opts}, seeds)
	require.NoError(t, err)
	_, err = s.OpenBatch(ctx, job, "b")
	require.NoError(t, err)
	_, err = s.Claim(ctx, job, "b", "r1", 1)
	require.NoError(t, err)
	// A phase's first round reads the job's policy (once per process) or
	// reconnects (after a restart): its sends are not counted.
	round := func(t *testing.T, i int) {
		before := proxy.Sends()
		p, err := s.Pull(ctx, job, "b", 1, 4, 4)
		pulled := proxy.Sends() - before
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
		before = proxy.Sends()
		_, err = s.RecordAll(ctx, rs)
		committed := proxy.Sends() - before
		require.NoError(t, err)
		if i%rounds != 0 {
			assert.LessOrEqual(t, committed, int64(3), "round %d: the commit's sends to the server", i)
		}
	}
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
