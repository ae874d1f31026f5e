package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/archive"
	"github.com/batoncrawl/baton/activities/jobs"
)

// Recrawls: what a run keeps of each page for the next (validators,
// content hash, links, next fetch, WARC original), read by key from a
// baseline; changes counted against it; items carried over with their IDs.

func testRevisitRows(t *testing.T, f *fixture) {
	base := f.newJob("base", 0, "a", "b", "gone")
	f.take(base, "b1", 3)
	f.claim(base, "b1", "r1", 1)
	warcDate := time.Date(2026, 11, 27, 3, 0, 0, 123456789, time.UTC)
	next := time.Date(2026, 11, 29, 3, 0, 0, 0, time.UTC)
	va := &jobs.RevisitRecord{ETag: `W/"a-1"`, LastModified: "Fri, 27 Nov 2026 03:00:00 GMT", ContentHash: "sha256:aa",
		Change: jobs.ChangeNew, Links: []jobs.Entry{labelled(1, URL("x"), "DETAIL", `{"k":1}`)},
		Interval: 36 * time.Hour, NextFetch: next,
		WARC: archive.Original{RecordID: "urn:uuid:1", TargetURI: URL("a"), Date: warcDate, PayloadDigest: "sha256:ff"}}
	ra := jobs.Record{Job: base, Batch: "b1", Runner: "r1", Epoch: 1, URL: URL("a"), Page: Page(base, "b1", "r1", 1, URL("a"), 0, ""), Revisit: va}
	rb := jobs.Record{Job: base, Batch: "b1", Runner: "r1", Epoch: 1, URL: URL("b"), Page: Page(base, "b1", "r1", 1, URL("b"), 0, "")}
	rg := jobs.Record{Job: base, Batch: "b1", Runner: "r1", Epoch: 1, URL: URL("gone"), Page: Page(base, "b1", "r1", 1, URL("gone"), 0, ""),
		Revisit: &jobs.RevisitRecord{Change: jobs.ChangeNew}}
	_, err := f.s.RecordAll(f.ctx, []jobs.Record{ra, rb, rg})
	require.NoError(t, err)

	got, ok, err := f.s.BaselinePage(f.ctx, base, URL("a"))
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, URL("a"), got.Page.URL)
	assert.Equal(t, ra.Page.Title, got.Page.Title)
	assert.Equal(t, ra.Page.Fields, got.Page.Fields)
	g := got.Revisit
	assert.Equal(t, va.ETag, g.ETag)
	assert.Equal(t, va.LastModified, g.LastModified)
	assert.Equal(t, va.ContentHash, g.ContentHash)
	assert.Equal(t, jobs.ChangeNew, g.Change)
	assert.Equal(t, va.Interval, g.Interval)
	assert.True(t, next.Equal(g.NextFetch), "next fetch %v", g.NextFetch)
	requireEntries(t, va.Links, g.Links, "links kept")
	assert.Equal(t, va.WARC.RecordID, g.WARC.RecordID)
	assert.Equal(t, va.WARC.TargetURI, g.WARC.TargetURI)
	assert.Equal(t, va.WARC.PayloadDigest, g.WARC.PayloadDigest)
	assert.True(t, warcDate.Equal(g.WARC.Date), "WARC date %v (nanoseconds kept)", g.WARC.Date)

	// A page recorded without a revisit row reads with a zero one.
	got, ok, err = f.s.BaselinePage(f.ctx, base, URL("b"))
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, jobs.RevisitRecord{}, got.Revisit)
	_, ok, err = f.s.BaselinePage(f.ctx, base, URL("never"))
	require.NoError(t, err)
	assert.False(t, ok, "a URL the baseline has no page of")

	// Many URLs in one read: the same records, a URL with no page absent.
	if br, isBatch := f.s.(jobs.BaselineBatchReader); isBatch {
		many, err := br.BaselinePages(f.ctx, base, []string{URL("a"), URL("never"), URL("b"), URL("a")})
		require.NoError(t, err)
		require.Len(t, many, 2)
		assert.Equal(t, va.ETag, many[URL("a")].Revisit.ETag)
		assert.Equal(t, ra.Page.Title, many[URL("a")].Page.Title)
		requireEntries(t, va.Links, many[URL("a")].Revisit.Links, "links kept")
		assert.Equal(t, jobs.RevisitRecord{}, many[URL("b")].Revisit)
		empty, err := br.BaselinePages(f.ctx, base, nil)
		require.NoError(t, err)
		assert.Empty(t, empty)
	}

	// Written once per job and URL: a retried commit changes nothing.
	again := ra
	again.Revisit = &jobs.RevisitRecord{ETag: `"other"`, Change: jobs.ChangeChanged}
	_, err = f.s.RecordAll(f.ctx, []jobs.Record{again})
	require.NoError(t, err)
	got, _, err = f.s.BaselinePage(f.ctx, base, URL("a"))
	require.NoError(t, err)
	assert.Equal(t, va.ETag, got.Revisit.ETag)

	// The next run: changes counted, the baseline's pages not recorded
	// again are gone.
	run := f.newJob("run", 0, "a", "b", "c")
	f.take(run, "b1", 3)
	f.claim(run, "b1", "r1", 1)
	rec := func(u, change string, saved int64) jobs.Record {
		return jobs.Record{Job: run, Batch: "b1", Runner: "r1", Epoch: 1, URL: URL(u), Page: Page(run, "b1", "r1", 1, URL(u), 0, ""),
			Revisit: &jobs.RevisitRecord{Change: change, SavedBytes: saved}}
	}
	_, err = f.s.RecordAll(f.ctx, []jobs.Record{rec("a", jobs.ChangeUnchanged, 1500), rec("b", jobs.ChangeChanged, 0), rec("c", jobs.ChangeNew, 0)})
	require.NoError(t, err)
	ch, err := f.s.Changes(f.ctx, run, base)
	require.NoError(t, err)
	assert.Equal(t, jobs.ChangeStats{New: 1, Changed: 1, Unchanged: 1, Gone: 1, SavedBytes: 1500}, ch)
	ch, err = f.s.Changes(f.ctx, run, "")
	require.NoError(t, err)
	assert.Equal(t, 0, ch.Gone, "no baseline, none gone")
	_, err = f.s.Changes(f.ctx, JobID(t, "nope"), "")
	assert.ErrorIs(t, err, jobs.ErrNoJob)
}

func testRevisitValidatorsBounded(t *testing.T, f *fixture) {
	job := f.newJob("j", 0, "a")
	f.take(job, "b1", 1)
	f.claim(job, "b1", "r1", 1)
	long := `"` + string(make([]byte, 4000)) + `"`
	_, err := f.s.Record(f.ctx, jobs.Record{Job: job, Batch: "b1", Runner: "r1", Epoch: 1, URL: URL("a"),
		Page: Page(job, "b1", "r1", 1, URL("a"), 0, ""), Revisit: &jobs.RevisitRecord{ETag: long, LastModified: "bad\x00date", Change: jobs.ChangeNew}})
	require.NoError(t, err, "hostile validators do not fail the commit")
	got, ok, err := f.s.BaselinePage(f.ctx, job, URL("a"))
	require.NoError(t, err)
	require.True(t, ok)
	assert.Empty(t, got.Revisit.ETag, "a validator over 1 KiB is not kept")
	assert.NotContains(t, got.Revisit.LastModified, "\x00")
}

func testItemsCarriedOver(t *testing.T, f *fixture) {
	base := f.newJob("base", 0, "a")
	f.take(base, "b1", 1)
	f.claim(base, "b1", "r1", 1)
	_, err := f.s.Record(f.ctx, jobs.Record{Job: base, Batch: "b1", Runner: "r1", Epoch: 1, URL: URL("a"),
		Page: Page(base, "b1", "r1", 1, URL("a"), 0, ""), Items: pushed(URL("a"), "DETAIL", 2)})
	require.NoError(t, err)
	was := f.allItems(base, 10)
	require.Len(t, was, 2)

	carry := func(from, to string) []jobs.ItemRecord {
		f.take(to, "b1", 1)
		f.claim(to, "b1", "r1", 1)
		r := jobs.Record{Job: to, Batch: "b1", Runner: "r1", Epoch: 1, URL: URL("a"), Page: Page(to, "b1", "r1", 1, URL("a"), 0, ""), CarryItemsFrom: from}
		_, err := f.s.Record(f.ctx, r)
		require.NoError(t, err)
		_, err = f.s.Record(f.ctx, r) // a retried commit carries nothing more
		require.NoError(t, err)
		return f.items(to, 0, 10)
	}
	run2 := f.newJob("run2", 0, "a")
	got := carry(base, run2)
	require.Len(t, got, 2)
	assert.Equal(t, 2, f.stats(run2).Items, "Stats.Items counts the items carried over")
	run3 := f.newJob("run3", 0, "a")
	got3 := carry(run2, run3) // carried over twice: the first run's IDs still
	require.Len(t, got3, 2)
	for i := range was {
		for _, g := range []jobs.ItemRecord{got[i], got3[i]} {
			assert.Equal(t, was[i].ID, g.ID, "item %d keeps its ID", i)
			assert.Equal(t, was[i].Label, g.Label)
			assert.JSONEq(t, string(was[i].Value), string(g.Value))
			assert.Equal(t, was[i].Index, g.Index)
		}
	}
	assert.Equal(t, run3, got3[0].Job)
}
