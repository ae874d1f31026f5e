package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/jobs"
)

// testBulkCarryListLengths: a bulk carry of five pages not due, each with
// a link of its own, and a baseline read of three URLs (lists a store may
// pad to a fixed length with a row repeated): each page, link and row
// once.
func testBulkCarryListLengths(t *testing.T, f *fixture) {
	bc := f.s.(jobs.BulkCarrier)
	now := time.Now().UTC().Truncate(time.Millisecond)
	var paths []string
	for i := range 5 {
		paths = append(paths, fmt.Sprintf("p%d", i))
	}
	base := f.newJob("base", 0, paths...)
	f.take(base, "b1", 5)
	f.claim(base, "b1", "r1", 1)
	var recs []jobs.Record
	for _, p := range paths {
		pr := Page(base, "b1", "r1", 1, URL(p), 0, "", URL("x"+p))
		pr.Change = jobs.ChangeNew
		recs = append(recs, jobs.Record{Job: base, Batch: "b1", Runner: "r1", Epoch: 1, URL: URL(p), Page: pr, Links: Entries(1, URL("x"+p)),
			Revisit: &jobs.RevisitRecord{ETag: `"` + p + `"`, ContentHash: "sha256:" + p, Change: jobs.ChangeNew, Interval: 30 * time.Hour, NextFetch: now.Add(48 * time.Hour)}})
	}
	_, err := f.s.RecordAll(f.ctx, recs)
	require.NoError(t, err)

	run := JobID(t, "run")
	_, err = f.s.CreateJob(f.ctx, Spec(run, 0, urls(paths...)...), Entries(0, urls(paths...)...))
	require.NoError(t, err)
	f.take(run, "r1", 5)
	f.claim(run, "r1", "runner-1", 1)
	var es []jobs.Entry
	for _, be := range f.entries(run, "r1") {
		es = append(es, be.Entry)
	}
	got, err := bc.CarryNotDue(f.ctx, jobs.CarryRequest{Job: run, Batch: "r1", Runner: "runner-1", Epoch: 1, Baseline: base, Now: now,
		Follow: true, MaxDepth: 3, Entries: es})
	require.NoError(t, err)
	slices.Sort(got.Carried)
	assert.Equal(t, urls(paths...), got.Carried)
	assert.Equal(t, 5, got.Added, "each page's link queued once")
	var carried []string
	for _, p := range f.results(run) {
		carried = append(carried, p.URL)
	}
	slices.Sort(carried)
	assert.Equal(t, urls(paths...), carried, "each page recorded once")
	st := f.stats(run)
	assert.Equal(t, 5, st.Recorded)
	assert.Equal(t, 10, st.Seen, "five seeds and five links")
	f.take(run, "r2", 20)
	var links []string
	for _, e := range f.entries(run, "r2") {
		links = append(links, e.URL)
	}
	slices.Sort(links)
	assert.Equal(t, urls("xp0", "xp1", "xp2", "xp3", "xp4"), links, "each link in the frontier once")

	read, err := f.s.(jobs.BaselineBatchReader).BaselinePages(f.ctx, run, urls("p0", "p3", "p4", "absent"))
	require.NoError(t, err)
	assert.Len(t, read, 3, "the run's three pages, no more")
	for _, p := range []string{"p0", "p3", "p4"} {
		assert.Equal(t, `"`+p+`"`, read[URL(p)].Revisit.ETag, "revisit row of %s", p)
	}
}
