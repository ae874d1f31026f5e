package storetest

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/archive"
	"github.com/batoncrawl/baton/activities/jobs"
)

// The bulk carry of an adaptive run's pages not due (jobs.BulkCarrier):
// what it records is what the per-page path records of a page carried
// over; it carries only the batch's unfinished entries at its epoch, once.

// carryBaseline records a baseline job of four pages at depth 0, at now:
// "a" not due (two links), "b" due, "c" failed, "d" not due (no links).
// It returns the job and its records by path.
func (f *fixture) carryBaseline(now time.Time) (string, map[string]jobs.Record) {
	f.t.Helper()
	base := f.newJob("base", 0, "a", "b", "c", "d")
	f.take(base, "b1", 4)
	f.claim(base, "b1", "r1", 1)
	later, earlier := now.Add(48*time.Hour), now.Add(-time.Hour)
	rv := func(tag string, next time.Time) *jobs.RevisitRecord {
		return &jobs.RevisitRecord{ETag: `"` + tag + `"`, LastModified: "Fri, 27 Nov 2026 03:00:00 GMT", ContentHash: "sha256:" + tag,
			Change: jobs.ChangeUnchanged, Interval: 30 * time.Hour, NextFetch: next,
			WARC: archive.Original{RecordID: "urn:uuid:" + tag, TargetURI: URL(tag), Date: now.Add(-time.Minute).UTC(), PayloadDigest: "sha1:" + tag}}
	}
	recs := map[string]jobs.Record{}
	for _, p := range []struct {
		path, err string
		next      time.Time
		links     []string
	}{{"a", "", later, urls("a1", "a2")}, {"b", "", earlier, nil}, {"c", "timeout", later, nil}, {"d", "", later, nil}} {
		pr := Page(base, "b1", "r1", 1, URL(p.path), 0, p.err, p.links...)
		pr.Change, pr.DuplicateOf, pr.BodyRef = jobs.ChangeNew, URL("z"), "store"
		recs[p.path] = jobs.Record{Job: base, Batch: "b1", Runner: "r1", Epoch: 1, URL: URL(p.path), Page: pr, Revisit: rv(p.path, p.next),
			Links: Entries(1, p.links...)}
	}
	_, err := f.s.RecordAll(f.ctx, []jobs.Record{recs["a"], recs["b"], recs["c"], recs["d"]})
	require.NoError(f.t, err)
	return base, recs
}

// carryRun creates a run of base whose seeds are base's pages and a new
// one ("a" labelled "L"), takes them in batch "r1" and claims it at epoch.
func (f *fixture) carryRun(base string, epoch int64) (string, jobs.CarryRequest) {
	f.t.Helper()
	id := JobID(f.t, "run")
	seeds := Entries(0, urls("a", "b", "c", "d", "new")...)
	seeds[0].Label = "L"
	_, err := f.s.CreateJob(f.ctx, Spec(id, 0, urls("a", "b", "c", "d", "new")...), seeds)
	require.NoError(f.t, err)
	f.take(id, "r1", 5)
	for e := int64(1); e <= epoch; e++ {
		f.claim(id, "r1", "runner-1", e)
	}
	var es []jobs.Entry
	for _, be := range f.entries(id, "r1") {
		es = append(es, be.Entry)
	}
	return id, jobs.CarryRequest{Job: id, Batch: "r1", Runner: "runner-1", Epoch: epoch, Baseline: base, Follow: true, MaxDepth: 3,
		Label: func(u string) string { return "label-" + strings.TrimPrefix(u, URL("")) }, Entries: es}
}

func testBulkCarry(t *testing.T, f *fixture) {
	bc, ok := f.s.(jobs.BulkCarrier)
	require.True(t, ok, "the store carries pages not due in bulk (jobs.BulkCarrier)")
	now := time.Now().UTC().Truncate(time.Millisecond)
	base, recs := f.carryBaseline(now)
	run, req := f.carryRun(base, 1)
	req.Now = now
	var left []string
	req.Left = func(es []jobs.Entry) {
		for _, e := range es {
			left = append(left, e.URL)
		}
	}
	got, err := bc.CarryNotDue(f.ctx, req)
	require.NoError(t, err)
	slices.Sort(got.Carried)
	assert.Equal(t, urls("a", "d"), got.Carried, "the pages not due, recorded, not failed are carried")
	slices.Sort(left)
	assert.Equal(t, urls("b", "c", "new"), left, "the others are handed back before the carry writes (CarryRequest.Left)")
	assert.Equal(t, 2, got.Added, "a's links queued")

	// The records are the baseline's as the per-page path carries them.
	pages := map[string]jobs.PageRecord{}
	for _, p := range f.results(run) {
		pages[p.URL] = p
	}
	require.Len(t, pages, 2)
	for path, label := range map[string]string{"a": "L", "d": ""} {
		want := *recs[path].Page
		want.Job, want.Batch, want.Runner, want.Epoch, want.Label = run, "r1", "runner-1", 1, label
		want.Bytes, want.DurationMS, want.Attempts, want.DuplicateOf, want.BodyRef = 0, 0, 0, "", ""
		want.Change, want.Carried = jobs.ChangeUnchanged, true
		assert.Equal(t, want, pages[URL(path)], "record of %s", path)
		bp, ok, err := f.s.BaselinePage(f.ctx, run, URL(path))
		require.NoError(t, err)
		require.True(t, ok)
		wantRV := *recs[path].Revisit
		wantRV.Change, wantRV.SavedBytes = jobs.ChangeUnchanged, recs[path].Page.Bytes
		assert.Equal(t, wantRV.NextFetch.UnixMilli(), bp.Revisit.NextFetch.UnixMilli())
		assert.True(t, wantRV.WARC.Date.Equal(bp.Revisit.WARC.Date))
		bp.Revisit.NextFetch, bp.Revisit.WARC.Date, wantRV.NextFetch, wantRV.WARC.Date = time.Time{}, time.Time{}, time.Time{}, time.Time{}
		assert.Equal(t, wantRV, bp.Revisit, "revisit row of %s: validators, hash, interval, next fetch, WARC kept", path)
	}
	ch, err := f.s.Changes(f.ctx, run, base)
	require.NoError(t, err)
	assert.Equal(t, jobs.ChangeStats{Unchanged: 2, Gone: 2, SavedBytes: recs["a"].Page.Bytes + recs["d"].Page.Bytes}, ch)
	st := f.stats(run)
	assert.Equal(t, 2, st.Recorded)
	assert.Equal(t, 7, st.Seen, "five seeds and a's two links")

	// Carried again (a retry, another holder's call): nothing more.
	again, err := bc.CarryNotDue(f.ctx, req)
	require.NoError(t, err)
	assert.Empty(t, again.Carried)
	assert.Equal(t, st, f.stats(run))

	// a's links are queued at the next depth with the run's labels.
	f.take(run, "r2", 10)
	var links []jobs.Entry
	for _, e := range f.entries(run, "r2") {
		links = append(links, e.Entry)
	}
	requireEntries(t, []jobs.Entry{labelled(1, URL("a1"), "label-a1", ""), labelled(1, URL("a2"), "label-a2", "")}, links, "links of a")
}

func testBulkCarryNoFollow(t *testing.T, f *fixture) {
	bc := f.s.(jobs.BulkCarrier)
	now := time.Now().UTC()
	base, _ := f.carryBaseline(now)
	run, req := f.carryRun(base, 1)
	req.Now, req.MaxDepth = now, 0 // at its depth, a's links are not followed
	got, err := bc.CarryNotDue(f.ctx, req)
	require.NoError(t, err)
	assert.Len(t, got.Carried, 2)
	assert.Zero(t, got.Added)
	for _, p := range f.results(run) {
		assert.Empty(t, p.Links, "%s: no links kept where the run does not follow them (as the per-page path)", p.URL)
	}
	assert.Equal(t, 5, f.stats(run).Seen)
}

func testBulkCarryStaleEpoch(t *testing.T, f *fixture) {
	bc := f.s.(jobs.BulkCarrier)
	now := time.Now().UTC()
	base, _ := f.carryBaseline(now)
	run, req := f.carryRun(base, 2)
	req.Now, req.Epoch = now, 1 // a holder fenced by the claim at epoch 2
	_, err := bc.CarryNotDue(f.ctx, req)
	requireStale(t, err, "a carry at a stale epoch")
	assert.Empty(t, f.results(run), "nothing recorded")
	assert.Equal(t, 5, f.stats(run).Seen, "no link queued")
	req.Epoch = 2
	got, err := bc.CarryNotDue(f.ctx, req)
	require.NoError(t, err)
	assert.Len(t, got.Carried, 2, "the holder at the epoch carries them")
}
