package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/archive"
	"github.com/batoncrawl/baton/activities/jobs"
)

// The bulk recording of a recrawl's pages answered 304
// (jobs.NotModifiedRecorder): it writes what a group commit writes of the
// same records, leaves what it cannot copy, writes at its batch's epoch
// only, once.

// notModifiedBaseline records a baseline job of "a" (two links) and "b",
// both with one body hash, at epoch 1; it returns the job and its records
// by path.
func (f *fixture) notModifiedBaseline() (string, map[string]jobs.Record) {
	f.t.Helper()
	base := f.newJob("base", 0, "a", "b")
	f.take(base, "b1", 2)
	f.claim(base, "b1", "r1", 1)
	recs := map[string]jobs.Record{}
	for _, p := range []struct {
		path  string
		links []string
	}{{"a", urls("a1", "a2")}, {"b", nil}} {
		pr := Page(base, "b1", "r1", 1, URL(p.path), 0, "", p.links...)
		pr.BodyHash, pr.Canonical, pr.Charset, pr.Change = "sha256:same", URL(p.path)+"#c", "utf-8", jobs.ChangeNew
		pr.BodyRef, pr.Skipped, pr.ScreenshotRef = "store", "skipped in the baseline", "shot" // (none of the run's)
		recs[p.path] = jobs.Record{Job: base, Batch: "b1", Runner: "r1", Epoch: 1, URL: URL(p.path), Page: pr, Links: Entries(1, p.links...),
			Revisit: &jobs.RevisitRecord{ETag: `"` + p.path + `"`, ContentHash: "sha256:" + p.path, Change: jobs.ChangeNew, Interval: 20 * time.Hour}}
	}
	_, err := f.s.RecordAll(f.ctx, []jobs.Record{recs["a"], recs["b"]})
	require.NoError(f.t, err)
	return base, recs
}

// notModifiedRun creates a run of base with the seeds a, b and new, takes
// them in batch "r1" and claims it up to epoch; it returns the run and the
// records of a and b answered 304 (as the per-page path makes them), and
// of new answered 304 (which base has no page of) at epoch.
func (f *fixture) notModifiedRun(base string, recs map[string]jobs.Record, epoch int64) (string, []jobs.Record) {
	f.t.Helper()
	id := JobID(f.t, "run")
	_, err := f.s.CreateJob(f.ctx, Spec(id, 0, urls("a", "b", "new")...), Entries(0, urls("a", "b", "new")...))
	require.NoError(f.t, err)
	f.take(id, "r1", 3)
	for e := int64(1); e <= epoch; e++ {
		f.claim(id, "r1", "runner-1", e)
	}
	var out []jobs.Record
	for _, path := range []string{"a", "b", "new"} {
		b, ok := recs[path]
		if !ok {
			b = jobs.Record{Page: Page(base, "b1", "r1", 1, URL(path), 0, ""), Revisit: &jobs.RevisitRecord{}}
		}
		p := *b.Page
		p.Job, p.Batch, p.Runner, p.Epoch, p.Label = id, "r1", "runner-1", epoch, "L-"+path
		p.StatusCode, p.Bytes, p.DurationMS, p.Attempts, p.FinalURL = 304, 120, 3, 1, URL(path)
		p.DuplicateOf, p.BodyRef, p.Skipped, p.ScreenshotRef, p.Change = "", "", "", "", jobs.ChangeUnchanged
		rv := *b.Revisit
		rv.Change, rv.SavedBytes, rv.Interval, rv.NextFetch = jobs.ChangeUnchanged, b.Page.Bytes-120, 30*time.Hour, time.UnixMilli(1_900_000_000_000).UTC()
		rv.WARC = archive.Original{RecordID: "urn:uuid:" + path, TargetURI: URL(path), Date: time.UnixMilli(1_800_000_000_000).UTC(), PayloadDigest: "sha1:" + path}
		if path == "a" {
			rv.ETag = `"a-new"` // the 304 sent a new one
		}
		out = append(out, jobs.Record{Job: id, Batch: "r1", Runner: "runner-1", Epoch: epoch, URL: URL(path), Page: &p, Revisit: &rv,
			Links: b.Links})
	}
	return id, out
}

func testNotModified(t *testing.T, f *fixture) {
	nm, ok := f.s.(jobs.NotModifiedRecorder)
	require.True(t, ok, "the store records pages answered 304 in bulk (jobs.NotModifiedRecorder)")
	base, recs := f.notModifiedBaseline()
	run, rs := f.notModifiedRun(base, recs, 1)
	ref, refRs := f.notModifiedRun(base, recs, 1) // the same records, by a group commit
	_, err := f.s.RecordAll(f.ctx, refRs[:2])
	require.NoError(t, err)

	got, err := nm.RecordNotModified(f.ctx, base, rs)
	require.NoError(t, err)
	assert.Equal(t, []int{2}, got.Left, "the page the baseline has no row of is left to the group commit")
	assert.Equal(t, 2, got.Added, "a's links queued")

	pages, want := map[string]jobs.PageRecord{}, map[string]jobs.PageRecord{}
	for _, p := range f.results(run) {
		pages[p.URL] = p
	}
	for _, p := range f.results(ref) {
		p.Job = run
		want[p.URL] = p
	}
	require.Len(t, pages, 2)
	assert.Equal(t, want, pages, "the records a group commit writes: the 304's fields, the baseline's content, b a duplicate of a")
	assert.Equal(t, URL("a"), pages[URL("b")].DuplicateOf)
	for _, path := range []string{"a", "b"} {
		gotRV, wantRV := f.revisitOf(run, URL(path)), f.revisitOf(ref, URL(path))
		assert.Equal(t, wantRV, gotRV, "revisit row of %s", path)
	}
	assert.Equal(t, `"a-new"`, f.revisitOf(run, URL("a")).ETag)
	ch, err := f.s.Changes(f.ctx, run, base)
	require.NoError(t, err)
	wantCh, err := f.s.Changes(f.ctx, ref, base)
	require.NoError(t, err)
	assert.Equal(t, wantCh, ch)
	st, refSt := f.stats(run), f.stats(ref)
	assert.Equal(t, refSt.Recorded, st.Recorded)
	assert.Equal(t, refSt.Seen, st.Seen, "three seeds and a's two links")

	// Recorded again (a retry, another holder's call): nothing more.
	again, err := nm.RecordNotModified(f.ctx, base, rs[:2])
	require.NoError(t, err)
	assert.Empty(t, again.Left)
	assert.Zero(t, again.Added)
	assert.Equal(t, st, f.stats(run))
	assert.Len(t, f.results(run), 2)
}

// revisitOf is job's revisit row of url, its times in UTC milliseconds.
func (f *fixture) revisitOf(job, url string) jobs.RevisitRecord {
	f.t.Helper()
	bp, ok, err := f.s.BaselinePage(f.ctx, job, url)
	require.NoError(f.t, err)
	require.True(f.t, ok, "%s has a page of %s", job, url)
	rv := bp.Revisit
	rv.NextFetch, rv.WARC.Date = rv.NextFetch.UTC().Truncate(time.Millisecond), rv.WARC.Date.UTC()
	return rv
}

func testNotModifiedStaleEpoch(t *testing.T, f *fixture) {
	nm := f.s.(jobs.NotModifiedRecorder)
	base, recs := f.notModifiedBaseline()
	run, rs := f.notModifiedRun(base, recs, 2)
	for i := range rs {
		rs[i].Epoch, rs[i].Page.Epoch = 1, 1 // a holder fenced by the claim at epoch 2
	}
	_, err := nm.RecordNotModified(f.ctx, base, rs[:2])
	requireStale(t, err, "a recording at a stale epoch")
	assert.Empty(t, f.results(run), "nothing recorded")
	assert.Equal(t, 3, f.stats(run).Seen, "no link queued")
}
