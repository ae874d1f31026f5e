package sqlstore_test

import (
	"database/sql"
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/activities/jobs/sqlstore"
)

// BenchmarkSQLiteCommit measures a Runner's group commit on the embedded
// store as BenchmarkPostgresCommit does on PostgreSQL (8 pages, each with
// a body hash and 30 links, 10 of them shared by the group), taking none
// or 8 of its new links (take8), and reports the CPU time of the process
// (user and system, so the store's own work and its fsyncs' system time)
// per page recorded.
//
// Run it with: go test ./activities/jobs/sqlstore/ -run '^$' -bench SQLiteCommit -benchtime=500x
func BenchmarkSQLiteCommit(b *testing.B) {
	for _, take := range []int{0, 8} {
		b.Run(fmt.Sprintf("take%d", take), func(b *testing.B) {
			ctx := testCtx(b, 10*time.Minute)
			s, err := sqlstore.OpenSQLite(ctx, b.TempDir())
			require.NoError(b, err)
			b.Cleanup(func() { _ = s.Close() })
			const group, job, batch = 8, "commitbench", "b"
			opts := crawl.DefaultOptions()
			opts.Parallelism, opts.IgnoreRobots = 24, true
			_, err = s.CreateJob(ctx, jobs.Spec{ID: job, Group: "g", Seeds: []string{"http://new.test/"}, Options: opts}, []jobs.Entry{{URL: "http://new.test/"}})
			require.NoError(b, err)
			_, err = s.OpenBatch(ctx, job, batch)
			require.NoError(b, err)
			_, err = s.Claim(ctx, job, batch, "r1", 1)
			require.NoError(b, err)
			if take > 0 {
				p, err := s.Pull(ctx, job, batch, 1, 1, 24)
				require.NoError(b, err)
				require.Len(b, p.Entries, 1)
			}
			// The group's pages, in the batch (state 1).
			require.NoError(b, sqlstore.InTransaction(ctx, s, func(tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, `WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < ?)
					INSERT INTO baton_frontier (job, url, depth, state, host, batch) SELECT ?, 'http://new.test/x' || n, 1, 1, 'new.test', ? FROM g`,
					group*b.N, job, batch)
				return err
			}))
			rng := rand.New(rand.NewPCG(1, 2))
			next := 0
			cpu0 := processCPU(b)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				rs := make([]jobs.Record, group)
				for j := range rs {
					next++
					rs[j] = benchRecord(rng, job, batch, next)
				}
				out, _, err := s.RecordTake(ctx, rs, take)
				require.NoError(b, err)
				require.True(b, out[0].Wrote)
			}
			b.StopTimer()
			b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/float64(group*b.N), "cpu-µs/page")
		})
	}
}

// benchRecord is the n-th page of a commit benchmark's group: 10 links
// of a navigation bar and 20 to pages all over a 20,000-page site.
func benchRecord(rng *rand.Rand, job, batch string, n int) jobs.Record {
	u := fmt.Sprintf("http://new.test/x%d", n)
	links := make([]jobs.Entry, 0, 30)
	for l := range 10 {
		links = append(links, jobs.Entry{URL: fmt.Sprintf("http://new.test/nav%d", l), Depth: 2})
	}
	for range 20 {
		links = append(links, jobs.Entry{URL: fmt.Sprintf("http://new.test/p%d", rng.IntN(20000)), Depth: 2})
	}
	page := &jobs.PageRecord{Page: crawl.Page{URL: u, FinalURL: u, StatusCode: 200, ContentType: "text/html", Bytes: 3000, Title: "t " + u, Depth: 1,
		BodyHash: fmt.Sprintf("%016x", rng.Uint64())}, Job: job, Batch: batch, Runner: "r1", Epoch: 1}
	return jobs.Record{Job: job, Batch: batch, Runner: "r1", Epoch: 1, URL: u, Links: links, Page: page}
}

// processCPU is the process's user and system CPU time so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	require.NoError(b, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
