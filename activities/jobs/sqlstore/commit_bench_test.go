package sqlstore_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/activities/jobs/sqlstore"
	"github.com/batoncrawl/baton/testsuite"
)

// BenchmarkPostgresCommit measures a Runner's group commit on a real
// PostgreSQL server: 8 pages, each with a body hash and 30 links (10 of a
// navigation bar the whole group shares, 20 to pages all over a
// 20,000-page site), taking none (every commit once the frontier is
// deep) or 8 of its new links (take8: a crawl's first waves, a Runner's
// idle slots), pipelined (two round trips) and statement by statement,
// side by side, on loopback and through a proxy that delays every byte by
// 0.25 ms each way (a round trip between machines; rtt-ms as in
// BenchmarkPostgresPull). It reports ms per commit.
//
// Run it with: go test ./activities/jobs/sqlstore/ -run '^$' -bench PostgresCommit -benchtime=200x
func BenchmarkPostgresCommit(b *testing.B) {
	overLinks(b, []string{"pipelined", "statements", "pipelined-take8", "statements-take8"}, func(b *testing.B, pg *testsuite.Postgres, s *sqlstore.Store, name string) {
		if strings.Contains(name, "statements") {
			sqlstore.WithoutPipeline(s)
		}
		take := 0
		if strings.HasSuffix(name, "take8") {
			take = 8
		}
		benchCommit(b, pg, s, "commitbench"+name, take)
	})
}

func benchCommit(b *testing.B, pg *testsuite.Postgres, s *sqlstore.Store, job string, take int) {
	const group = 8
	ctx := testCtx(b, 10*time.Minute)
	opts := crawl.DefaultOptions()
	opts.Parallelism, opts.IgnoreRobots = 24, true
	_, err := s.CreateJob(ctx, jobs.Spec{ID: job, Group: "g", Seeds: []string{"http://new.test/"}, Options: opts, PolitenessScope: jobs.PolitenessJob}, []jobs.Entry{{URL: "http://new.test/"}})
	require.NoError(b, err)
	const batch = "b"
	_, err = s.OpenBatch(ctx, job, batch)
	require.NoError(b, err)
	_, err = s.Claim(ctx, job, batch, "r1", 1)
	require.NoError(b, err)
	if take > 0 {
		// The batch leases the host (with the seed): its commits may take
		// its links.
		p, err := s.Pull(ctx, job, batch, 1, 1, 24)
		require.NoError(b, err)
		require.Len(b, p.Entries, 1)
	}
	// The group's pages, in the batch (state 1).
	pg.Admin(b, fmt.Sprintf(`INSERT INTO baton_frontier (job, url, depth, state, host, batch) SELECT '%s', 'http://new.test/x' || g, 1, 1, 'new.test', '%s' FROM generate_series(1, %d) g`, job, batch, group*b.N),
		`ANALYZE baton_frontier`)
	rng := rand.New(rand.NewPCG(1, 2))
	rtt := roundTrip(b, s)
	next := 0
	var took time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rs := make([]jobs.Record, group)
		for j := range rs {
			next++
			rs[j] = benchRecord(rng, job, batch, next)
		}
		t0 := time.Now()
		out, taken, err := s.RecordTake(ctx, rs, take)
		took += time.Since(t0)
		require.NoError(b, err)
		require.True(b, out[0].Wrote)
		if take > 0 && i < 100 {
			require.Len(b, taken, take, "commit %d", i) // the site's new pages outlast the first hundred
		}
	}
	b.ReportMetric(rtt, "rtt-ms")
	b.ReportMetric(float64(took.Microseconds())/1000/float64(b.N), "commit-ms")
}
