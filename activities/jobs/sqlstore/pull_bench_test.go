package sqlstore_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/activities/jobs/sqlstore"
	"github.com/batoncrawl/baton/testsuite"
)

// BenchmarkPostgresPull measures a Runner's pull of 24 URLs on a real
// PostgreSQL server, from a job of 20,000 queued URLs of one host: a
// batch's first pull (it leases the host) and its next one (it renews the
// lease), each reported as ms per pull. Most of a pull's time is its
// round trips to the server, which on a busy machine (a crawl's start)
// each cost the scheduling of two processes, and between machines a
// network round trip: the case proxied-0.25ms reaches the server through
// a proxy that delays every byte by 0.25 ms each way (the timers of the Go
// runtime round that up: the round trip it makes, a "SELECT 1" timed the
// same way, is reported as rtt-ms).
//
// Run it with: go test ./activities/jobs/sqlstore/ -run '^$' -bench PostgresPull
func BenchmarkPostgresPull(b *testing.B) {
	overLinks(b, []string{""}, func(b *testing.B, pg *testsuite.Postgres, s *sqlstore.Store, name string) {
		benchPull(b, pg, s, "pullbench"+name)
	})
}

// overLinks runs a PostgreSQL benchmark once for each way to the server,
// loopback and through a proxy that delays every byte by 0.25 ms each way
// (proxied-0.25ms), and each of its arms (sub-benchmarks of their own,
// "" for none), each on a store of its own; name is unique in the
// process (the benchmark's function runs more than once), for a job ID.
func overLinks(b *testing.B, arms []string, run func(b *testing.B, pg *testsuite.Postgres, s *sqlstore.Store, name string)) {
	pg := testsuite.StartPostgres(b)
	for _, c := range []struct {
		name   string
		oneWay time.Duration
	}{{"loopback", 0}, {"proxied-0.25ms", 250 * time.Microsecond}} {
		for _, arm := range arms {
			sub := c.name
			if arm != "" {
				sub += "/" + arm
			}
			b.Run(sub, func(b *testing.B) {
				dsn := pg.DSN()
				if c.oneWay > 0 {
					proxy := testsuite.StartProxy(b, pg.Address())
					proxy.SetLatency(c.oneWay)
					dsn = strings.Replace(dsn, pg.Address(), proxy.Addr(), 1)
				}
				ctx := testCtx(b, 10*time.Minute)
				s, err := sqlstore.OpenPostgres(ctx, dsn, "")
				require.NoError(b, err)
				b.Cleanup(func() { _ = s.Close() })
				benchRuns++
				run(b, pg, s, fmt.Sprintf("%d-%s-%s", benchRuns, strings.ReplaceAll(c.name, ".", ""), arm))
			})
		}
	}
}

// benchRuns counts overLinks' runs in the process.
var benchRuns int

// roundTrip returns the round trip to the server a "SELECT 1" takes, in
// ms (the Go runtime's timers round a proxy's delays up), reported as
// rtt-ms (after the timer's reset, which drops the metrics reported).
func roundTrip(b *testing.B, s *sqlstore.Store) float64 {
	ctx := testCtx(b, time.Minute)
	var rtt time.Duration
	for range 20 {
		t0 := time.Now()
		var one int
		require.NoError(b, s.DB().QueryRowContext(ctx, "SELECT 1").Scan(&one))
		rtt += time.Since(t0)
	}
	return float64(rtt.Microseconds()) / 1000 / 20
}

func benchPull(b *testing.B, pg *testsuite.Postgres, s *sqlstore.Store, job string) {
	ctx := testCtx(b, 10*time.Minute)
	opts := crawl.DefaultOptions()
	opts.Parallelism, opts.IgnoreRobots = 24, true
	_, err := s.CreateJob(ctx, jobs.Spec{ID: job, Group: "g", Seeds: []string{"http://new.test/"}, Options: opts}, []jobs.Entry{{URL: "http://new.test/"}})
	require.NoError(b, err)
	pg.Admin(b, `INSERT INTO baton_frontier (job, url, depth, state, host) SELECT '`+job+`', 'http://new.test/p' || g, 1, 0, 'new.test' FROM generate_series(1, 20000) g`,
		`ANALYZE baton_frontier`)
	rtt := roundTrip(b, s)
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
	b.ReportMetric(rtt, "rtt-ms")
	b.ReportMetric(float64(first.Microseconds())/1000/float64(b.N), "first-pull-ms")
	b.ReportMetric(float64(next.Microseconds())/1000/float64(b.N), "next-pull-ms")
}
