package sqlstore_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/testsuite"
)

// BenchmarkPostgresPull measures a Runner's pull of 24 URLs on a real
// PostgreSQL server, from a job of 20,000 queued URLs of one host: a
// batch's first pull (it leases the host) and its next one (it renews the
// lease), each reported as ms per pull. Most of a pull's time is its
// round trips to the server, which on a busy machine (a crawl's start)
// each cost the scheduling of two processes.
//
// Run it with: go test ./activities/jobs/sqlstore/ -run '^$' -bench PostgresPull
func BenchmarkPostgresPull(b *testing.B) {
	pg := testsuite.StartPostgres(b)
	ctx := testCtx(b, 10*time.Minute)
	s := openPostgres(b, pg)
	opts := crawl.DefaultOptions()
	opts.Parallelism, opts.IgnoreRobots = 24, true
	job := "pullbench"
	_, err := s.CreateJob(ctx, jobs.Spec{ID: job, Group: "g", Seeds: []string{"http://new.test/"}, Options: opts}, []jobs.Entry{{URL: "http://new.test/"}})
	require.NoError(b, err)
	pg.Admin(b, `INSERT INTO baton_frontier (job, url, depth, state, host) SELECT '`+job+`', 'http://new.test/p' || g, 1, 0, 'new.test' FROM generate_series(1, 20000) g`,
		`ANALYZE baton_frontier`)
	var first, next time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id := fmt.Sprintf("%s-b%d", job, i)
		_, err := s.OpenBatch(ctx, job, id)
		require.NoError(b, err)
		_, err = s.Claim(ctx, job, id, "r1", 1)
		require.NoError(b, err)
		t0 := time.Now()
		p, err := s.Pull(ctx, job, id, 1, 24, 8)
		first += time.Since(t0)
		require.NoError(b, err)
		require.Len(b, p.Entries, 24)
		t0 = time.Now()
		p, err = s.Pull(ctx, job, id, 1, 24, 8)
		next += time.Since(t0)
		require.NoError(b, err)
		require.Len(b, p.Entries, 24)
		// The URLs go back: the queue stays 20,000 long.
		_, err = s.Release(ctx, job, id, 1)
		require.NoError(b, err)
		_, err = s.FinishBatch(ctx, job, id, 1)
		require.NoError(b, err)
	}
	b.ReportMetric(float64(first.Microseconds())/1000/float64(b.N), "first-pull-ms")
	b.ReportMetric(float64(next.Microseconds())/1000/float64(b.N), "next-pull-ms")
}
