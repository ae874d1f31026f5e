package storetest

import (
	"errors"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/jobs"
)

// testResultsByURL: ResultsByURL gives a job's pages in byte order of
// their URLs (upper case before lower case, punctuation by its code), not
// in the order recorded nor in a locale's order, with their fields, and
// no page of another job.
func testResultsByURL(t *testing.T, f *fixture) {
	names := []string{"b", "B", "a", "a_z", "A", "a.z", "Z", "a-z"}
	job := f.newJob("byurl", 0, names...)
	other := f.newJob("byurl-other", 0, "a0")
	f.take(job, "b1", len(names))
	f.claim(job, "b1", "r1", 3)
	want := map[string]jobs.PageRecord{}
	for _, n := range names {
		p := Page(job, "b1", "r1", 3, URL(n), 0, "")
		p.Title = "title " + n
		p.Fields = map[string][]string{"name": {n}}
		_, err := f.s.Record(f.ctx, jobs.Record{Job: job, Batch: "b1", Runner: "r1", Epoch: 3, URL: URL(n), Page: p})
		require.NoError(t, err)
		want[p.URL] = *p
	}
	f.take(other, "o1", 1)
	f.claim(other, "o1", "r1", 1)
	f.record(other, "o1", "r1", 1, URL("a0"))

	var got []string
	err := f.s.ResultsByURL(f.ctx, job, func(p jobs.PageRecord) error {
		got = append(got, p.URL)
		assert.Equal(t, want[p.URL], p, "page of %s as recorded", p.URL)
		return nil
	})
	require.NoError(t, err)
	wantURLs := make([]string, 0, len(names))
	for _, n := range names {
		wantURLs = append(wantURLs, URL(n))
	}
	sort.Strings(wantURLs)
	assert.Equal(t, wantURLs, got, "ResultsByURL: byte order of the URLs")

	stop := errors.New("stop")
	calls := 0
	err = f.s.ResultsByURL(f.ctx, job, func(jobs.PageRecord) error { calls++; return stop })
	assert.ErrorIs(t, err, stop)
	assert.Equal(t, 1, calls)

	err = f.s.ResultsByURL(f.ctx, JobID(t, "nojob"), func(jobs.PageRecord) error { return nil })
	assert.ErrorIs(t, err, jobs.ErrNoJob)
}
