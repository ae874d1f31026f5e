package sqlstore_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/activities/jobs/sqlstore"
)

// TestPostgresPullLostCommitReply: the reply to a pull's COMMIT is lost
// with its connection (the pull committed). The pull, retried, returns
// what it handed out: the batch's unfinished URLs are exactly the ones
// its Runner got, and the hosts leased are the ones it was told of, none
// stranded in the batch with their hosts leased. Pipelined and statement
// by statement.
func TestPostgresPullLostCommitReply(t *testing.T) {
	for _, mode := range []string{"pipelined", "statements"} {
		t.Run(mode, func(t *testing.T) {
			ctx, proxy, s := proxiedStore(t)
			if mode == "statements" {
				sqlstore.WithoutPipeline(s)
			}
			const job = "lostreply"
			opts := crawl.DefaultOptions()
			opts.Parallelism, opts.IgnoreRobots = 24, true
			seed := "http://h0.test/"
			_, err := s.CreateJob(ctx, jobs.Spec{ID: job, Group: "g", Seeds: []string{seed}, Options: opts}, []jobs.Entry{{URL: seed}})
			require.NoError(t, err)
			_, err = s.TakeBatch(ctx, job, "seed", 1)
			require.NoError(t, err)
			_, err = s.Claim(ctx, job, "seed", "r0", 1)
			require.NoError(t, err)
			var links []jobs.Entry
			for i := range 60 {
				links = append(links, jobs.Entry{URL: fmt.Sprintf("http://h%d.test/p%d", i%6, i), Depth: 1})
			}
			_, err = s.RecordAll(ctx, []jobs.Record{{Job: job, Batch: "seed", Epoch: 1, Runner: "r0", URL: seed,
				Page: &jobs.PageRecord{Page: crawl.Page{URL: seed, StatusCode: 200}, Job: job, Batch: "seed", Runner: "r0", Epoch: 1}, Links: links}})
			require.NoError(t, err)
			_, err = s.OpenBatch(ctx, job, "b1")
			require.NoError(t, err)
			_, err = s.Claim(ctx, job, "b1", "r1", 1)
			require.NoError(t, err)

			proxy.DropReplyTo("COMMIT")
			start := time.Now()
			p, err := s.Pull(ctx, job, "b1", 1, 24, 8)
			t.Logf("the pull took %v", time.Since(start))
			require.NoError(t, err, "the pull, retried")
			require.Equal(t, int64(1), proxy.Dropped(), "the COMMIT's reply was dropped")
			require.NotEmpty(t, p.Entries)

			un, err := s.Unfinished(ctx, job, "b1")
			require.NoError(t, err)
			var got, unfinished []string
			for _, e := range p.Entries {
				got = append(got, e.URL)
			}
			for _, e := range un {
				unfinished = append(unfinished, e.URL)
			}
			t.Logf("pulled %d, unfinished %d", len(got), len(unfinished))
			assert.ElementsMatch(t, got, unfinished, "the batch's unfinished URLs are the ones the pull returned")
			leases, err := s.Leases(ctx, job, "b1")
			require.NoError(t, err)
			var told, held []string
			for _, h := range p.Hosts {
				told = append(told, h.Host)
			}
			for _, h := range leases {
				held = append(held, h.Host)
			}
			assert.ElementsMatch(t, told, held, "the hosts the batch holds are the ones the pull told of")
			st, err := s.Stats(ctx, job)
			require.NoError(t, err)
			assert.Equal(t, 61-1-len(got), st.Queued, "the rest still queued")
		})
	}
}

// TestPostgresTakingCommitLostCommitReply: the reply to a taking group
// commit's COMMIT is lost with its connection (it committed). The commit,
// retried, returns the links its first try took: the batch's unfinished
// URLs are exactly those, none stranded. Pipelined and statement by
// statement.
func TestPostgresTakingCommitLostCommitReply(t *testing.T) {
	for _, mode := range []string{"pipelined", "statements"} {
		t.Run(mode, func(t *testing.T) {
			ctx, proxy, s := proxiedStore(t)
			if mode == "statements" {
				sqlstore.WithoutPipeline(s)
			}
			const job, seed = "takereply", "http://new.test/"
			opts := crawl.DefaultOptions()
			opts.Parallelism, opts.IgnoreRobots = 24, true
			_, err := s.CreateJob(ctx, jobs.Spec{ID: job, Group: "g", Seeds: []string{seed}, Options: opts}, []jobs.Entry{{URL: seed}})
			require.NoError(t, err)
			_, err = s.TakeBatch(ctx, job, "b", 1)
			require.NoError(t, err)
			_, err = s.Claim(ctx, job, "b", "r1", 1)
			require.NoError(t, err)
			var links []jobs.Entry
			for i := range 10 {
				links = append(links, jobs.Entry{URL: fmt.Sprintf("http://new.test/l%d", i), Depth: 1})
			}
			page := &jobs.PageRecord{Page: crawl.Page{URL: seed, StatusCode: 200}, Job: job, Batch: "b", Runner: "r1", Epoch: 1}

			proxy.DropReplyTo("COMMIT")
			_, taken, err := s.RecordTake(ctx, []jobs.Record{{Job: job, Batch: "b", Epoch: 1, Runner: "r1", URL: seed, Page: page, Links: links}}, 4)
			require.NoError(t, err, "the commit, retried")
			require.Equal(t, int64(1), proxy.Dropped(), "the COMMIT's reply was dropped")
			var got, unfinished []string
			for _, e := range taken {
				got = append(got, e.URL)
				assert.Equal(t, 1, e.Depth)
			}
			un, err := s.Unfinished(ctx, job, "b")
			require.NoError(t, err)
			for _, e := range un {
				unfinished = append(unfinished, e.URL)
			}
			assert.Len(t, got, 4, "the links taken")
			assert.ElementsMatch(t, got, unfinished, "the batch's unfinished URLs are the links the commit returned")
		})
	}
}
