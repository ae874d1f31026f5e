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

// TestPostgresPullRoundTrips: a pull on PostgreSQL is two round trips,
// as the server sees it through a proxy that counts what the store
// sends: its reads in one pipeline with its BEGIN, its writes in one with
// its COMMIT; a batch's first pull (it leases the host) and its next one
// (it renews the lease) alike. Between machines every send is a network
// round trip, and the job's lock, which every other hand-out of the job
// waits for, is held for one of them.
func TestPostgresPullRoundTrips(t *testing.T) {
	ctx, proxy, s := proxiedStore(t)
	const job = "roundtrips"
	opts := crawl.DefaultOptions()
	opts.Parallelism, opts.IgnoreRobots = 24, true
	_, err := s.CreateJob(ctx, jobs.Spec{ID: job, Group: "g", Seeds: []string{"http://new.test/"}, Options: opts}, []jobs.Entry{{URL: "http://new.test/"}})
	require.NoError(t, err)
	var links []jobs.Entry
	for i := range 100 {
		links = append(links, jobs.Entry{URL: fmt.Sprintf("http://new.test/p%d", i), Depth: 1})
	}
	_, err = s.OpenBatch(ctx, job, "seed")
	require.NoError(t, err)
	_, err = s.Claim(ctx, job, "seed", "r0", 1)
	require.NoError(t, err)
	p, err := s.Pull(ctx, job, "seed", 1, 1, 1)
	require.NoError(t, err)
	require.Len(t, p.Entries, 1)
	_, err = s.RecordAll(ctx, []jobs.Record{{Job: job, Batch: "seed", Epoch: 1, Runner: "r0", URL: "http://new.test/",
		Page: &jobs.PageRecord{Page: crawl.Page{URL: "http://new.test/", StatusCode: 200}, Job: job, Batch: "seed", Runner: "r0", Epoch: 1}, Links: links}})
	require.NoError(t, err)

	_, err = s.OpenBatch(ctx, job, "b1")
	require.NoError(t, err)
	_, err = s.Claim(ctx, job, "b1", "r1", 1)
	require.NoError(t, err)
	for _, pull := range []string{"first", "next"} {
		before := proxy.Sends()
		p, err := s.Pull(ctx, job, "b1", 1, 24, 8)
		sends := proxy.Sends() - before
		require.NoError(t, err)
		assert.Len(t, p.Entries, 24, "the %s pull", pull)
		assert.LessOrEqual(t, sends, int64(2), "the %s pull's sends to the server (round trips)", pull)
		t.Logf("the %s pull sent %d times", pull, sends)
	}
}

// A group commit that takes no links (every commit once a crawl's frontier
// is deep) reaches PostgreSQL in two round trips, its pages with body
// hashes and bodies, one of them a duplicate, and records what the
// statement-by-statement commit records; one at a stale epoch is refused
// and writes nothing.
func TestPostgresRecordRoundTrips(t *testing.T) {
	ctx, proxy, s := proxiedStore(t)
	const job = "recordtrips"
	opts := crawl.DefaultOptions()
	opts.Parallelism, opts.IgnoreRobots = 24, true
	var seeds []jobs.Entry
	for i := range 8 {
		seeds = append(seeds, jobs.Entry{URL: fmt.Sprintf("http://new.test/s%d", i)})
	}
	_, err := s.CreateJob(ctx, jobs.Spec{ID: job, Group: "g", Seeds: []string{seeds[0].URL}, Options: opts, Bodies: "store"}, seeds)
	require.NoError(t, err)
	_, err = s.TakeBatch(ctx, job, "b", 8)
	require.NoError(t, err)
	_, err = s.Claim(ctx, job, "b", "r1", 1)
	require.NoError(t, err)
	group := func(from, to int, epoch int64) []jobs.Record {
		var rs []jobs.Record
		for i := from; i < to; i++ {
			u := seeds[i].URL
			page := &jobs.PageRecord{Page: crawl.Page{URL: u, StatusCode: 200, BodyHash: fmt.Sprintf("h%d", i%3)}, Job: job, Batch: "b", Runner: "r1", Epoch: epoch}
			rs = append(rs, jobs.Record{Job: job, Batch: "b", Epoch: epoch, Runner: "r1", URL: u, Page: page, Body: []byte("body " + u),
				Links: []jobs.Entry{{URL: fmt.Sprintf("http://new.test/l%d", i), Depth: 1}, {URL: "http://new.test/nav", Depth: 1}}})
		}
		return rs
	}
	before := proxy.Sends()
	out, err := s.RecordAll(ctx, group(0, 5, 1))
	sends := proxy.Sends() - before
	require.NoError(t, err)
	assert.LessOrEqual(t, sends, int64(3), "sends to the server (round trips): two, and one to look up a hash another page owns")
	t.Logf("the commit sent %d times", sends)
	added := 0
	for _, o := range out {
		assert.True(t, o.Wrote)
		added += o.Added
	}
	assert.Equal(t, 6, added, "five links of their own and the navigation once")
	st, err := s.Stats(ctx, job)
	require.NoError(t, err)
	assert.Equal(t, jobs.Stats{Seen: 14, Queued: 6, Recorded: 5}, st)
	dups := map[string]string{}
	require.NoError(t, s.Results(ctx, job, func(p jobs.PageRecord) error { dups[p.URL] = p.DuplicateOf; return nil }))
	assert.Equal(t, map[string]string{seeds[0].URL: "", seeds[1].URL: "", seeds[2].URL: "", seeds[3].URL: seeds[0].URL, seeds[4].URL: seeds[1].URL}, dups)
	body, err := s.Body(ctx, job, seeds[4].URL)
	require.NoError(t, err)
	assert.Equal(t, "body "+seeds[4].URL, string(body))

	_, err = s.Claim(ctx, job, "b", "r2", 2) // handed over
	require.NoError(t, err)
	_, err = s.RecordAll(ctx, group(5, 8, 1))
	require.ErrorIs(t, err, jobs.ErrStale)
	st, err = s.Stats(ctx, job)
	require.NoError(t, err)
	assert.Equal(t, jobs.Stats{Seen: 14, Queued: 6, Recorded: 5}, st, "a stale commit writes nothing")
}

// A group commit that takes links (a crawl's first waves, a Runner's
// idle slots) is two round trips as well: the hosts it may take read with
// its BEGIN, the new links of those hosts moved into its batch with its
// COMMIT. Statement by statement it sent 9 times. It takes the first new
// links of a host its batch holds, in URL order, up to take; the batch
// grows by them and the job's counters say so.
func TestPostgresTakingCommitRoundTrips(t *testing.T) {
	ctx, proxy, s := proxiedStore(t)
	const job, seed = "taketrips", "http://new.test/"
	opts := crawl.DefaultOptions()
	opts.Parallelism, opts.IgnoreRobots = 24, true
	_, err := s.CreateJob(ctx, jobs.Spec{ID: job, Group: "g", Seeds: []string{seed}, Options: opts}, []jobs.Entry{{URL: seed}})
	require.NoError(t, err)
	_, err = s.TakeBatch(ctx, job, "b", 1)
	require.NoError(t, err)
	_, err = s.Claim(ctx, job, "b", "r1", 1)
	require.NoError(t, err)
	links := []jobs.Entry{{URL: "http://other.test/x", Depth: 1}, {URL: seed, Depth: 1}} // another host's; a URL known
	for i := range 10 {
		links = append(links, jobs.Entry{URL: fmt.Sprintf("http://new.test/l%d", i), Depth: 1})
	}
	page := &jobs.PageRecord{Page: crawl.Page{URL: seed, StatusCode: 200}, Job: job, Batch: "b", Runner: "r1", Epoch: 1}
	before := proxy.Sends()
	out, taken, err := s.RecordTake(ctx, []jobs.Record{{Job: job, Batch: "b", Epoch: 1, Runner: "r1", URL: seed, Page: page, Links: links}}, 4)
	sends := proxy.Sends() - before
	require.NoError(t, err)
	assert.LessOrEqual(t, sends, int64(2), "sends to the server (round trips)")
	t.Logf("the taking commit sent %d times", sends)
	require.Len(t, out, 1)
	assert.True(t, out[0].Wrote)
	assert.Equal(t, 11, out[0].Added, "its new links: all but the seed")
	var got []string
	for _, e := range taken {
		got = append(got, e.URL)
		assert.Equal(t, 1, e.Depth)
	}
	assert.Equal(t, []string{"http://new.test/l0", "http://new.test/l1", "http://new.test/l2", "http://new.test/l3"}, got,
		"the first four new links of its host, in URL order")
	st, err := s.Stats(ctx, job)
	require.NoError(t, err)
	assert.Equal(t, jobs.Stats{Seen: 12, Queued: 7, Recorded: 1}, st)
	bs, err := s.Batches(ctx, job, []string{"b"})
	require.NoError(t, err)
	require.Len(t, bs, 1)
	assert.Equal(t, 5, bs[0].Size, "the seed and the four links taken")
	un, err := s.Unfinished(ctx, job, "b")
	require.NoError(t, err)
	var unfinished []string
	for _, e := range un {
		unfinished = append(unfinished, e.URL)
	}
	assert.ElementsMatch(t, got, unfinished, "the links taken are the batch's unfinished URLs")
}

// proxiedStore starts a PostgreSQL server and opens a store on it through
// a proxy that counts the store's sends (round trips).
func proxiedStore(t *testing.T) (context.Context, *testsuite.Proxy, *sqlstore.Store) {
	pg := testsuite.StartPostgres(t)
	ctx := testCtx(t, time.Minute)
	proxy := testsuite.StartProxy(t, pg.Address())
	s, err := sqlstore.OpenPostgres(ctx, strings.Replace(pg.DSN(), pg.Address(), proxy.Addr(), 1), "")
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return ctx, proxy, s
}
