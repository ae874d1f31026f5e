package sqlstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/crawler"
	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/activities/jobs/sqlstore"
	"github.com/batoncrawl/baton/activities/jobs/storetest"
	"github.com/batoncrawl/baton/testsuite"
)

// crossLinked is the link graph of a real documentation site: every page
// links to the home page, a navigation bar of the same few pages, its
// neighbours and pages all over the site (related items, "see also").
func crossLinked(n int) func(i int) []string {
	return func(i int) []string {
		rng := rand.New(rand.NewPCG(uint64(i), 7))
		links := []string{storetest.URL("p00000")}
		for k := 1; k <= 8; k++ {
			links = append(links, storetest.URL(fmt.Sprintf("p%05d", k*n/9)))
		}
		for _, k := range []int{i - 1, i + 1} {
			if k >= 0 && k < n {
				links = append(links, storetest.URL(fmt.Sprintf("p%05d", k)))
			}
		}
		for range 24 {
			links = append(links, storetest.URL(fmt.Sprintf("p%05d", rng.IntN(n))))
		}
		return links
	}
}

// sweepQueued runs last batches of job until nothing is queued (links to
// a host found as its holder ended): every host is free by then, so each
// batch takes something.
func sweepQueued(ctx context.Context, t *testing.T, st *sqlstore.Store, job string, links func(int) []string) {
	t.Helper()
	for sweep := 0; ; sweep++ {
		stats, err := st.Stats(ctx, job)
		require.NoError(t, err)
		if stats.Queued == 0 {
			return
		}
		id := fmt.Sprintf("sweep%d", sweep)
		b, err := st.TakeBatch(ctx, job, id, 16)
		require.NoError(t, err)
		require.Positive(t, b.Size, "%d queued and every host free", stats.Queued)
		require.NoError(t, runOneBatch(ctx, st, job, id, "sweeper", links))
	}
}

// overHosts is crossLinked(pages) with page i on host h(i mod hosts).example,
// and a seed on each host.
func overHosts(pages, hosts int) (links func(i int) []string, seeds []string) {
	onHost := func(u string) string {
		var i int
		fmt.Sscanf(u[strings.LastIndex(u, "/p")+2:], "%d", &i)
		return strings.Replace(u, "example.com", fmt.Sprintf("h%d.example", i%hosts), 1)
	}
	cross := crossLinked(pages)
	links = func(i int) []string {
		out := cross(i)
		for k, u := range out {
			out[k] = onHost(u)
		}
		return out
	}
	for i := range hosts {
		seeds = append(seeds, onHost(storetest.URL(fmt.Sprintf("p%05d", i))))
	}
	return links, seeds
}

// pageItems are the items page i pushes: i%4 of them.
func pageItems(i int) []crawler.Pushed {
	out := make([]crawler.Pushed, i%4)
	for k := range out {
		out[k] = crawler.Pushed{Label: "ITEM", Index: k, Value: json.RawMessage(fmt.Sprintf(`{"page":%d,"k":%d}`, i, k))}
	}
	return out
}

// itemsOf counts the items of pages 0…n-1.
func itemsOf(n int) int {
	total := 0
	for i := range n {
		total += i % 4
	}
	return total
}

// runOneBatch runs a batch as a Runner does: it pulls URLs and records
// them, with their links (links) and items (pageItems), in two concurrent
// group commits at a time.
func runOneBatch(ctx context.Context, s jobs.Store, job, batch, runner string, links func(i int) []string) error {
	if _, err := s.Claim(ctx, job, batch, runner, 1); err != nil {
		return err
	}
	queue, err := s.Unfinished(ctx, job, batch)
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(uint64(len(batch)), 3))
	idle := 0
	for {
		if len(queue) < 16 {
			more, err := s.Extend(ctx, job, batch, 1, 16)
			if err != nil {
				return err
			}
			queue = append(queue, more...)
		}
		if len(queue) == 0 {
			// Another runner's commit may still add links: look again
			// a few times before giving up.
			if idle++; idle > 50 {
				break
			}
			time.Sleep(5 * time.Millisecond) // a Runner's pull pacing, not a synchronisation
			continue
		}
		idle = 0
		// Two group commits at once, of 1-8 pages each, as the
		// BatchRunner's maxCommits allows.
		var wg sync.WaitGroup
		var mu sync.Mutex
		var firstErr error
		for range 2 {
			k := min(len(queue), 1+rng.IntN(8))
			group := queue[:k]
			queue = queue[k:]
			if len(group) == 0 {
				continue
			}
			recs := make([]jobs.Record, len(group))
			for j, e := range group {
				var i int
				fmt.Sscanf(e.URL[strings.LastIndex(e.URL, "/p")+2:], "%d", &i)
				recs[j] = jobs.Record{Job: job, Batch: batch, Runner: runner, Epoch: 1, URL: e.URL,
					Page:  storetest.Page(job, batch, runner, 1, e.URL, e.Depth, ""),
					Links: storetest.Entries(e.Depth+1, links(i)...), Items: pageItems(i)}
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := s.RecordAll(ctx, recs); err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if firstErr != nil {
			return firstErr
		}
	}
	_, err = s.FinishBatch(ctx, job, batch, 1)
	return err
}

// TestPostgresRecordingNeverDeadlocks crawls a densely cross-linked site
// through the store with three runners recording in concurrent group
// commits (pages with items: the job's items lock too), and asserts PostgreSQL's own deadlock counter stayed 0 (the
// store retries a deadlock, so only the server can tell) and every page
// was recorded once.
func TestPostgresRecordingNeverDeadlocks(t *testing.T) {
	pg := testsuite.StartPostgres(t)
	const pages = 1500
	ctx := testCtx(t, 3*time.Minute)
	var stores []*sqlstore.Store
	for range 3 {
		stores = append(stores, openPostgres(t, pg))
	}
	job := storetest.JobID(t, "dense")
	seeds := []string{storetest.URL("p00000"), storetest.URL("p00001"), storetest.URL("p00002")}
	_, err := stores[0].CreateJob(ctx, storetest.Spec(job, 0, seeds...), storetest.Entries(0, seeds...))
	require.NoError(t, err)
	for r := range stores {
		b, err := stores[0].TakeBatch(ctx, job, fmt.Sprintf("b%d", r), 1)
		require.NoError(t, err)
		require.Equal(t, 1, b.Size, "batch b%d", r)
	}
	offset := pg.LogOffset()

	links := crossLinked(pages)
	runBatches(ctx, t, stores, job, links)
	st, err := stores[0].Stats(ctx, job)
	require.NoError(t, err)
	got := results(t, stores[0], job)
	assert.Equal(t, pages, len(got), "pages recorded")
	for u, n := range got {
		if n != 1 {
			t.Errorf("%s recorded %d times", u, n)
		}
	}
	assert.Equal(t, jobs.Stats{Seen: pages, Recorded: pages, Items: itemsOf(pages)}, st)
	its, err := stores[0].Items(ctx, job, 0, 10*pages)
	require.NoError(t, err)
	assert.Len(t, its, itemsOf(pages), "items stored")
	for _, s := range stores {
		require.NoError(t, s.Close())
	}
	log := pg.LogSince(offset)
	assert.Zero(t, strings.Count(log, "deadlock detected"), "deadlocks in the server log")
	assert.Zero(t, pg.Deadlocks(t), "pg_stat_database.deadlocks")
}

// TestPostgresHostLeasesNeverDeadlock is TestPostgresRecordingNeverDeadlocks
// with the job's pages spread over eight hosts held one batch at a time (a
// delay applies): every pull leases, renews and drops hosts under the
// job's lock while the group commits run, and no transaction ever waits
// for another in a cycle. A last batch takes what the three left queued
// (links to a host found as its holder ended).
func TestPostgresHostLeasesNeverDeadlock(t *testing.T) {
	pg := testsuite.StartPostgres(t)
	const pages, hosts = 1200, 8
	ctx := testCtx(t, 3*time.Minute)
	var stores []*sqlstore.Store
	for range 3 {
		stores = append(stores, openPostgres(t, pg))
	}
	links, seeds := overHosts(pages, hosts)
	job := storetest.JobID(t, "leased")
	spec := storetest.Spec(job, 0, seeds...)
	spec.Options.AllowedDomains, spec.Options.Parallelism, spec.Options.Delay = nil, 2, time.Millisecond
	_, err := stores[0].CreateJob(ctx, spec, storetest.Entries(0, seeds...))
	require.NoError(t, err)
	for r := range stores {
		b, err := stores[0].TakeBatch(ctx, job, fmt.Sprintf("b%d", r), 2)
		require.NoError(t, err)
		require.Positive(t, b.Size, "batch b%d", r)
	}
	offset := pg.LogOffset()

	runBatches(ctx, t, stores, job, links)
	sweepQueued(ctx, t, stores[0], job, links)
	got := results(t, stores[0], job)
	assert.Equal(t, pages, len(got), "pages recorded")
	for u, n := range got {
		if n != 1 {
			t.Errorf("%s recorded %d times", u, n)
		}
	}
	by := map[string]int{}
	require.NoError(t, stores[0].Results(ctx, job, func(p jobs.PageRecord) error {
		by[p.Runner]++
		return nil
	}))
	for r := range stores {
		assert.Positive(t, by[fmt.Sprintf("runner-%d", r)], "runner-%d recorded pages: %v", r, by)
	}
	for _, s := range stores {
		require.NoError(t, s.Close())
	}
	log := pg.LogSince(offset)
	t.Logf("%d pages on %d hosts held one batch at a time, recorded by %v; %d deadlocks", pages, hosts, by, pg.Deadlocks(t))
	assert.Zero(t, strings.Count(log, "deadlock detected"), "deadlocks in the server log")
	assert.Zero(t, pg.Deadlocks(t), "pg_stat_database.deadlocks")
}

// runBatches runs batch b<r> on stores[r] as runner-<r>, all at once, and
// fails t if one of them fails.
func runBatches(ctx context.Context, t *testing.T, stores []*sqlstore.Store, job string, links func(i int) []string) {
	var wg sync.WaitGroup
	errs := make([]error, len(stores))
	for r, s := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = runOneBatch(ctx, s, job, fmt.Sprintf("b%d", r), fmt.Sprintf("runner-%d", r), links)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
}

// TestPostgresHostLeasesAcrossJobsNeverDeadlock is
// TestPostgresHostLeasesNeverDeadlock with two jobs of the group crawling
// the same eight hosts at once, keeping the group's budget: one holds each
// host a batch at a time (a delay), the other shares its parallelism out.
// Every hand-out, renewal and release of either takes its job's lock and
// then the group's lease lock while both jobs' group commits run, and no
// transaction ever waits for another in a cycle.
func TestPostgresHostLeasesAcrossJobsNeverDeadlock(t *testing.T) {
	pg := testsuite.StartPostgres(t)
	const pages, hosts = 600, 8
	ctx := testCtx(t, 3*time.Minute)
	var stores []*sqlstore.Store
	for range 3 {
		stores = append(stores, openPostgres(t, pg))
	}
	links, seeds := overHosts(pages, hosts)
	var ids []string
	for k, delay := range []time.Duration{time.Millisecond, 0} {
		job := storetest.JobID(t, fmt.Sprintf("j%d", k))
		spec := storetest.Spec(job, 0, seeds...)
		spec.Options.AllowedDomains, spec.Options.Parallelism, spec.Options.Delay = nil, 2, delay
		spec.PolitenessScope = jobs.PolitenessGroup
		_, err := stores[0].CreateJob(ctx, spec, storetest.Entries(0, seeds...))
		require.NoError(t, err)
		for r := range stores {
			_, err := stores[0].OpenBatch(ctx, job, fmt.Sprintf("b%d", r))
			require.NoError(t, err)
		}
		ids = append(ids, job)
	}
	offset := pg.LogOffset()

	var wg sync.WaitGroup
	errs := make([]error, len(ids)*len(stores))
	for k, job := range ids {
		for r, s := range stores {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[k*len(stores)+r] = runOneBatch(ctx, s, job, fmt.Sprintf("b%d", r), fmt.Sprintf("runner-%d", r), links)
			}()
		}
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	for _, job := range ids {
		sweepQueued(ctx, t, stores[0], job, links)
		got := results(t, stores[0], job)
		assert.Equal(t, pages, len(got), "pages recorded of %s", job)
	}
	for _, s := range stores {
		require.NoError(t, s.Close())
	}
	log := pg.LogSince(offset)
	t.Logf("two jobs of %d pages on %d hosts, the group's budget; %d deadlocks", pages, hosts, pg.Deadlocks(t))
	assert.Zero(t, strings.Count(log, "deadlock detected"), "deadlocks in the server log")
	assert.Zero(t, pg.Deadlocks(t), "pg_stat_database.deadlocks")
}
