package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/activities/jobs/storetest"
)

// diffPage is a page of a diff test job: its title and fields.
type diffPage struct {
	title  string
	fields map[string][]string
}

// recordDiffJob stores job id with one recorded page per entry of pages
// (by path under storetest.URL), as a crawl would: created, taken,
// claimed, recorded.
func recordDiffJob(t *testing.T, st jobs.Store, id string, pages map[string]diffPage) {
	t.Helper()
	ctx := testCtx(t)
	var seeds []string
	for path := range pages {
		seeds = append(seeds, storetest.URL(path))
	}
	_, err := st.CreateJob(ctx, storetest.Spec(id, 0, seeds...), storetest.Entries(0, seeds...))
	require.NoError(t, err)
	b, err := st.TakeBatch(ctx, id, "b1", len(seeds))
	require.NoError(t, err)
	require.Equal(t, len(seeds), b.Size)
	_, err = st.Claim(ctx, id, "b1", "r1", 1)
	require.NoError(t, err)
	for path, pg := range pages {
		u := storetest.URL(path)
		p := &jobs.PageRecord{Page: crawl.Page{URL: u, StatusCode: 200, Title: pg.title, Fields: pg.fields, Attempts: 1},
			Job: id, Batch: "b1", Runner: "r1", Epoch: 1}
		_, err := st.Record(ctx, jobs.Record{Job: id, Batch: "b1", Runner: "r1", Epoch: 1, URL: u, Page: p})
		require.NoError(t, err)
	}
}

func TestDiffTwoJobs(t *testing.T) {
	st := openStore(t)
	f := func(kv ...string) map[string][]string {
		m := map[string][]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = append(m[kv[i]], kv[i+1])
		}
		return m
	}
	recordDiffJob(t, st, "run-a", map[string]diffPage{
		"same":        {"Same", f("price", "10", "stock", "3")},
		"price":       {"Price", f("price", "10", "stock", "3")},
		"title":       {"Old title", f("price", "5")},
		"lost-field":  {"Lost", f("price", "7", "sale", "yes")},
		"order":       {"Order", f("tag", "a", "tag", "b")},
		"gone-page":   {"Gone", nil},
		"Gone-page-2": {"Gone too", nil},
	})
	recordDiffJob(t, st, "run-b", map[string]diffPage{
		"same":       {"Same", f("price", "10", "stock", "3")},
		"price":      {"Price", f("price", "12", "stock", "3")},
		"title":      {"New title", f("price", "5")},
		"lost-field": {"Lost", f("price", "7")},
		"order":      {"Order", f("tag", "b", "tag", "a")},
		"new-page":   {"New", f("price", "1")},
	})

	var got []jobs.DiffEntry
	counts, err := jobs.Diff(testCtx(t), st, "run-a", "run-b", func(e jobs.DiffEntry) error {
		got = append(got, e)
		return nil
	})
	require.NoError(t, err)
	u := storetest.URL
	assert.Equal(t, []jobs.DiffEntry{
		{URL: u("Gone-page-2"), Kind: jobs.DiffGone},
		{URL: u("gone-page"), Kind: jobs.DiffGone},
		{URL: u("lost-field"), Kind: jobs.DiffChanged, Fields: []string{"sale"}},
		{URL: u("new-page"), Kind: jobs.DiffNew},
		{URL: u("order"), Kind: jobs.DiffChanged, Fields: []string{"tag"}},
		{URL: u("price"), Kind: jobs.DiffChanged, Fields: []string{"price"}},
		{URL: u("same"), Kind: jobs.DiffUnchanged},
		{URL: u("title"), Kind: jobs.DiffChanged, Title: true},
	}, got, "every URL of either job, in URL order, with what changed")
	assert.Equal(t, jobs.DiffCounts{New: 1, Gone: 2, Changed: 4, Unchanged: 1}, counts)

	// The reverse diff swaps new and gone.
	rev, err := jobs.Diff(testCtx(t), st, "run-b", "run-a", func(jobs.DiffEntry) error { return nil })
	require.NoError(t, err)
	assert.Equal(t, jobs.DiffCounts{New: 2, Gone: 1, Changed: 4, Unchanged: 1}, rev)

	// fn's error stops the diff and is returned.
	stop := errors.New("stop")
	n := 0
	_, err = jobs.Diff(testCtx(t), st, "run-a", "run-b", func(jobs.DiffEntry) error { n++; return stop })
	assert.ErrorIs(t, err, stop)
	assert.Equal(t, 1, n)

	// An unknown job is named.
	_, err = jobs.Diff(testCtx(t), st, "run-a", "no-such-run", func(jobs.DiffEntry) error { return nil })
	assert.ErrorIs(t, err, jobs.ErrNoJob)
}

// TestDiffLargeJobsStreams diffs two jobs of many pages whose URLs
// interleave, checking the merge against the expected sets.
func TestDiffLargeJobsStreams(t *testing.T) {
	if testing.Short() {
		t.Skip("records 3,000 pages")
	}
	st := openStore(t)
	a, b := map[string]diffPage{}, map[string]diffPage{}
	for i := range 1500 {
		if i%3 != 2 {
			a[fmt.Sprintf("p%04d", i)] = diffPage{title: "t", fields: map[string][]string{"v": {"1"}}}
		}
		if i%3 != 0 {
			v := "1"
			if i%5 == 0 {
				v = "2"
			}
			b[fmt.Sprintf("p%04d", i)] = diffPage{title: "t", fields: map[string][]string{"v": {v}}}
		}
	}
	recordDiffJob(t, st, "big-a", a)
	recordDiffJob(t, st, "big-b", b)
	var want jobs.DiffCounts
	for i := range 1500 {
		switch {
		case i%3 == 0:
			want.Gone++
		case i%3 == 2:
			want.New++
		case i%5 == 0:
			want.Changed++
		default:
			want.Unchanged++
		}
	}
	last := ""
	counts, err := jobs.Diff(context.Background(), st, "big-a", "big-b", func(e jobs.DiffEntry) error {
		require.Less(t, last, e.URL, "URLs in increasing order")
		last = e.URL
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, want, counts)
}
