package storetest

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/jobs"
)

// Recording and reading the results: Record, Results, duplicates,
// bodies, refused URLs.

func testRecordOnce(t *testing.T, f *fixture) {
	job := f.newJob("j", 0, "a", "b")
	f.take(job, "b1", 1) // a
	f.claim(job, "b1", "r1", 1)
	r := f.record(job, "b1", "r1", 1, URL("a"), URL("x"))
	assert.Equal(t, jobs.Recorded{Wrote: true, Added: 1}, r)
	assert.True(t, f.isRecorded(job, URL("a")))
	assert.False(t, f.isRecorded(job, URL("b")))
	st := f.stats(job)
	assert.Equal(t, jobs.Stats{Seen: 3, Queued: 2, Recorded: 1}, st)

	// A retried Record writes nothing more.
	r = f.record(job, "b1", "r1", 1, URL("a"), URL("x"))
	assert.False(t, r.Wrote, "a retried Record wrote again")
	assert.Equal(t, 0, r.Added)
	assert.Equal(t, st, f.stats(job))

	// The same URL coming in another batch is not recorded twice, and a
	// link back to it is not queued again.
	f.take(job, "b2", 10) // b, x
	f.claim(job, "b2", "r2", 1)
	r = f.record(job, "b2", "r2", 1, URL("b"), URL("a"), URL("b"), URL("x"))
	assert.Equal(t, jobs.Recorded{Wrote: true, Added: 0}, r, "links already seen are not queued")
	r2, err := f.s.Record(f.ctx, jobs.Record{Job: job, Batch: "b2", Runner: "r2", Epoch: 1, URL: URL("a"),
		Page: Page(job, "b2", "r2", 1, URL("a"), 0, "")})
	if err == nil {
		assert.False(t, r2.Wrote, "a URL recorded in another batch was written again")
	}
	assert.Equal(t, []string{URL("a"), URL("b")}, f.resultURLs(job))
	assert.Equal(t, jobs.Stats{Seen: 3, Queued: 0, Recorded: 2}, f.stats(job))
	for _, p := range f.results(job) {
		if p.URL == URL("a") {
			assert.Equal(t, "b1", p.Batch, "the first record of a URL stays")
		}
	}
}

func testRecordLinksOnce(t *testing.T, f *fixture) {
	job := f.newJob("j", 0, "a", "b")
	f.take(job, "b1", 2)
	f.claim(job, "b1", "r1", 1)
	r := f.record(job, "b1", "r1", 1, URL("a"), URL("x"), URL("y"), URL("x"), URL("a"), URL("b"))
	assert.Equal(t, 2, r.Added, "x and y are new; the repeated x and the seeds are not")
	r = f.record(job, "b1", "r1", 1, URL("b"), URL("y"), URL("z"))
	assert.Equal(t, 1, r.Added, "only z is new")
	assert.Equal(t, jobs.Stats{Seen: 5, Queued: 3, Recorded: 2}, f.stats(job))
	_, got := f.take(job, "b2", 10)
	assert.ElementsMatch(t, urls("x", "y", "z"), got)
	for _, e := range f.entries(job, "b2") {
		assert.Equal(t, 1, e.Depth, "depth of %s", e.URL)
	}
}

func testRecordNilPage(t *testing.T, f *fixture) {
	job := f.newJob("j", 0, "a", "robots")
	f.take(job, "b1", 2)
	f.claim(job, "b1", "r1", 1)
	r, err := f.s.Record(f.ctx, jobs.Record{Job: job, Batch: "b1", Runner: "r1", Epoch: 1, URL: URL("robots")})
	require.NoError(t, err)
	assert.False(t, r.Wrote, "a nil page writes no result")
	assert.False(t, f.isRecorded(job, URL("robots")))
	assert.Equal(t, jobs.Stats{Seen: 2, Queued: 0}, f.stats(job))
	for _, e := range f.entries(job, "b1") {
		assert.Equal(t, e.URL == URL("robots"), e.Done, "Done of %s", e.URL)
	}
	f.record(job, "b1", "r1", 1, URL("a"))
	done, err := f.s.FinishBatch(f.ctx, job, "b1", 1)
	require.NoError(t, err, "a batch whose URLs are recorded or refused finishes")
	assert.Equal(t, 1, done.Success)
	assert.Equal(t, 0, done.Failed)
	assert.Equal(t, []string{URL("a")}, f.resultURLs(job))
}

func testResults(t *testing.T, f *fixture) {
	job := f.newJob("j", 0, "a", "b", "c", "d")
	f.take(job, "b1", 4)
	f.claim(job, "b1", "r1", 7)
	var want []jobs.PageRecord
	for _, name := range []string{"c", "a", "d", "b"} {
		errMsg := ""
		if name == "d" {
			errMsg = "timeout after 15s"
		}
		p := Page(job, "b1", "r1", 7, URL(name), 0, errMsg, URL(name+"/x"))
		if errMsg != "" {
			p.Links = nil
		}
		r, err := f.s.Record(f.ctx, jobs.Record{Job: job, Batch: "b1", Runner: "r1", Epoch: 7, URL: URL(name), Page: p,
			Links: Entries(1, p.Links...)})
		require.NoError(t, err)
		assert.True(t, r.Wrote)
		want = append(want, *p)
	}
	got := f.results(job)
	assert.Equal(t, want, got, "Results: in the order recorded, fields intact")
	assert.Equal(t, jobs.Stats{Seen: 7, Queued: 3, Recorded: 4, Failed: 1}, f.stats(job))

	// fn's error stops the iteration and is returned.
	stop := errors.New("stop")
	calls := 0
	err := f.s.Results(f.ctx, job, func(jobs.PageRecord) error { calls++; return stop })
	assert.ErrorIs(t, err, stop)
	assert.Equal(t, 1, calls)
}

// hashed is a successful page record with body hash h.
func hashed(job, batch string, epoch int64, url, h, errMsg string) *jobs.PageRecord {
	p := Page(job, batch, "r1", epoch, url, 0, errMsg)
	p.BodyHash = h
	return p
}

func testDuplicates(t *testing.T, f *fixture) {
	job := f.newJob("j", 0, "a", "b", "c", "d", "e", "f")
	f.take(job, "b1", 6)
	f.claim(job, "b1", "r1", 1)
	_, err := f.s.Record(f.ctx, jobs.Record{Job: job, Batch: "b1", Runner: "r1", Epoch: 1, URL: URL("a"),
		Page: hashed(job, "b1", 1, URL("a"), "h1", "")})
	require.NoError(t, err)
	rs := []jobs.Record{}
	for _, p := range []struct{ name, hash, err string }{
		{"b", "h1", ""}, {"c", "h2", ""}, {"d", "h2", ""}, {"e", "h1", "HTTP 404"}, {"f", "", ""},
	} {
		rs = append(rs, jobs.Record{Job: job, Batch: "b1", Runner: "r1", Epoch: 1, URL: URL(p.name),
			Page: hashed(job, "b1", 1, URL(p.name), p.hash, p.err)})
	}
	_, err = f.s.RecordAll(f.ctx, rs)
	require.NoError(t, err)
	assert.Empty(t, rs[0].Page.DuplicateOf, "the caller's record is not changed")
	got := map[string]string{}
	for _, p := range f.results(job) {
		got[p.URL] = p.DuplicateOf
	}
	assert.Equal(t, map[string]string{
		URL("a"): "", URL("b"): URL("a"), // a page recorded before
		URL("c"): "", URL("d"): URL("c"), // earlier in the same call
		URL("e"): "", // a failed page is never a duplicate
		URL("f"): "", // no hash
	}, got)
	// Another job's pages are not duplicates of this one's.
	other := f.newJob("k", 0, "a")
	f.take(other, "b1", 1)
	f.claim(other, "b1", "r1", 1)
	_, err = f.s.Record(f.ctx, jobs.Record{Job: other, Batch: "b1", Runner: "r1", Epoch: 1, URL: URL("a"),
		Page: hashed(other, "b1", 1, URL("a"), "h1", "")})
	require.NoError(t, err)
	assert.Empty(t, f.results(other)[0].DuplicateOf)
}

func testBodies(t *testing.T, f *fixture) {
	job := f.newJob("j", 0, "a", "b")
	f.take(job, "b1", 2)
	f.claim(job, "b1", "r1", 1)
	body := []byte("<html>" + strings.Repeat("x", 5000) + "</html>")
	p := Page(job, "b1", "r1", 1, URL("a"), 0, "")
	p.BodyRef = jobs.BodiesStore
	_, err := f.s.RecordAll(f.ctx, []jobs.Record{
		{Job: job, Batch: "b1", Runner: "r1", Epoch: 1, URL: URL("a"), Page: p, Body: jobs.CompressBody(body)},
		{Job: job, Batch: "b1", Runner: "r1", Epoch: 1, URL: URL("b"), Page: Page(job, "b1", "r1", 1, URL("b"), 0, "")},
	})
	require.NoError(t, err)
	stored, err := f.s.Body(f.ctx, job, URL("a"))
	require.NoError(t, err)
	assert.Less(t, len(stored), len(body)/10, "stored compressed")
	got, err := jobs.DecompressBody(stored, 1<<20)
	require.NoError(t, err)
	assert.Equal(t, body, got)
	_, err = jobs.DecompressBody(stored, 100)
	assert.ErrorContains(t, err, "larger than 100 bytes")
	_, err = f.s.Body(f.ctx, job, URL("b"))
	assert.ErrorIs(t, err, jobs.ErrNoBody)
	assert.Equal(t, jobs.BodiesStore, f.results(job)[0].BodyRef)
}

func testRefused(t *testing.T, f *fixture) {
	job := f.newJob("j", 0, "a", "robots1", "robots2")
	f.take(job, "b1", 3)
	f.claim(job, "b1", "r1", 1)
	n, err := f.s.Refused(f.ctx, job)
	require.NoError(t, err)
	assert.Equal(t, 0, n)
	_, err = f.s.Record(f.ctx, jobs.Record{Job: job, Batch: "b1", Runner: "r1", Epoch: 1, URL: URL("a"),
		Page: Page(job, "b1", "r1", 1, URL("a"), 0, ""), Links: Entries(jobs.SitemapDepth, URL("sitemap.xml"))})
	require.NoError(t, err)
	for _, u := range []string{"robots1", "robots2"} {
		_, err := f.s.Record(f.ctx, jobs.Record{Job: job, Batch: "b1", Runner: "r1", Epoch: 1, URL: URL(u)})
		require.NoError(t, err)
	}
	// A sitemap finishes without a page: it is not a refused page.
	_, got := f.take(job, "b2", 5)
	require.Equal(t, urls("sitemap.xml"), got)
	f.claim(job, "b2", "r1", 1)
	_, err = f.s.Record(f.ctx, jobs.Record{Job: job, Batch: "b2", Runner: "r1", Epoch: 1, URL: URL("sitemap.xml")})
	require.NoError(t, err)
	n, err = f.s.Refused(f.ctx, job)
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	_, err = f.s.Refused(f.ctx, "no-such-job")
	assert.ErrorIs(t, err, jobs.ErrNoJob)
}
