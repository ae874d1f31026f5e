package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/cmdline/exitcode"
	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/activities/jobs/sqlstore"
	"github.com/batoncrawl/baton/activities/jobs/storetest"
	"github.com/batoncrawl/baton/testsuite"
)

// diffStore makes a SQLite store in a new directory with two runs of a
// site: run-a and run-b, and returns the directory.
func diffStore(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	js, err := sqlstore.OpenSQLite(ctx, dir)
	require.NoError(t, err)
	defer js.Close()
	record := func(id, baseline string, pages map[string]crawl.Page) {
		var seeds []string
		for path := range pages {
			seeds = append(seeds, storetest.URL(path))
		}
		spec := storetest.Spec(id, 0, seeds...)
		spec.Baseline = baseline
		_, err := js.CreateJob(ctx, spec, storetest.Entries(0, seeds...))
		require.NoError(t, err)
		_, err = js.TakeBatch(ctx, id, "b1", len(seeds))
		require.NoError(t, err)
		_, err = js.Claim(ctx, id, "b1", "r1", 1)
		require.NoError(t, err)
		for path, p := range pages {
			p.URL, p.StatusCode, p.Attempts = storetest.URL(path), 200, 1
			_, err := js.Record(ctx, jobs.Record{Job: id, Batch: "b1", Runner: "r1", Epoch: 1, URL: p.URL,
				Page: &jobs.PageRecord{Page: p, Job: id, Batch: "b1", Runner: "r1", Epoch: 1}})
			require.NoError(t, err)
		}
	}
	record("run-a", "", map[string]crawl.Page{
		"same":  {Title: "Same", Fields: map[string][]string{"price": {"1"}}},
		"price": {Title: "P", Fields: map[string][]string{"price": {"1"}, "stock": {"2"}}},
		"both":  {Title: "Old", Fields: map[string][]string{"price": {"1"}}},
		"gone":  {Title: "Gone"},
	})
	record("run-b", "run-a", map[string]crawl.Page{
		"same":  {Title: "Same", Fields: map[string][]string{"price": {"1"}}},
		"price": {Title: "P", Fields: map[string][]string{"price": {"=2"}, "stock": {"2"}}},
		"both":  {Title: "New", Fields: map[string][]string{"price": {"3"}}},
		"new":   {Title: "New page"},
	})
	return dir
}

func TestDiffCommand(t *testing.T) {
	dir := diffStore(t)
	global := []string{"--zk-hosts", testsuite.ClosedPort(t), "--connect-timeout", "1s", "--data-dir", dir}
	u := storetest.URL

	out, errw, code := run(t, append(global, "diff", "run-a", "run-b", "--output", "json")...)
	require.Equal(t, exitcode.OK, code, errw)
	var doc struct {
		A     string           `json:"job_a"`
		B     string           `json:"job_b"`
		Pages []jobs.DiffEntry `json:"pages"`
		Count jobs.DiffCounts  `json:"counts"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
	assert.Equal(t, "run-a", doc.A)
	assert.Equal(t, "run-b", doc.B)
	assert.Equal(t, []jobs.DiffEntry{
		{URL: u("both"), Kind: "changed", Title: true, Fields: []string{"price"}},
		{URL: u("gone"), Kind: "gone"},
		{URL: u("new"), Kind: "new"},
		{URL: u("price"), Kind: "changed", Fields: []string{"price"}},
	}, doc.Pages, "unchanged pages are not listed by default")
	assert.Equal(t, jobs.DiffCounts{New: 1, Gone: 1, Changed: 2, Unchanged: 1}, doc.Count)

	out, errw, code = run(t, append(global, "diff", "run-a", "run-b", "--output", "json", "--unchanged")...)
	require.Equal(t, exitcode.OK, code, errw)
	require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
	assert.Len(t, doc.Pages, 5)
	assert.Contains(t, doc.Pages, jobs.DiffEntry{URL: u("same"), Kind: "unchanged"})

	out, errw, code = run(t, append(global, "diff", "run-a", "run-b", "--output", "csv")...)
	require.Equal(t, exitcode.OK, code, errw)
	rows, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	require.NoError(t, err, out)
	assert.Equal(t, [][]string{
		{"url", "change", "title_changed", "fields_changed"},
		{u("both"), "changed", "true", "price"},
		{u("gone"), "gone", "false", ""},
		{u("new"), "new", "false", ""},
		{u("price"), "changed", "false", "price"},
	}, rows)

	out, errw, code = run(t, append(global, "diff", "run-a", "run-b")...)
	require.Equal(t, exitcode.OK, code, errw)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 6, out)
	assert.Regexp(t, `^CHANGE\s+WHAT\s+URL$`, lines[0])
	assert.Regexp(t, `^changed\s+title, price\s+`+u("both")+`$`, lines[1])
	assert.Regexp(t, `^gone\s+-\s+`+u("gone")+`$`, lines[2])
	assert.Equal(t, "run-a → run-b: 1 new, 1 gone, 2 changed, 1 unchanged", lines[5])

	_, errw, code = run(t, append(global, "diff", "run-a", "no-such-run")...)
	assert.Equal(t, exitcode.NotFound, code, errw)
	assert.Contains(t, errw, `no job "no-such-run"`)

	_, errw, code = run(t, append(global, "diff", "run-a")...)
	assert.Equal(t, exitcode.Usage, code)
	assert.Contains(t, errw, "missing JOB_B")

	_, errw, code = run(t, append(global, "diff", "run-a", "run-b", "--output", "yaml")...)
	assert.Equal(t, exitcode.Usage, code)
	assert.Contains(t, errw, "want table, json or csv")
}

// results --changed-only writes the pages of a job new or changed since
// its baseline, as JSON lines.
func TestResultsChangedOnly(t *testing.T) {
	dir := diffStore(t)
	global := []string{"--zk-hosts", testsuite.ClosedPort(t), "--connect-timeout", "1s", "--data-dir", dir}
	out, errw, code := run(t, append(global, "results", "run-b", "--changed-only")...)
	require.Equal(t, exitcode.OK, code, errw)
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var p jobs.PageRecord
		require.NoError(t, json.Unmarshal([]byte(line), &p), line)
		assert.Equal(t, "run-b", p.Job)
		got = append(got, p.URL+" "+p.Title)
	}
	u := storetest.URL
	assert.Equal(t, []string{u("both") + " New", u("new") + " New page", u("price") + " P"}, got)

	_, errw, code = run(t, append(global, "results", "run-a", "--changed-only")...)
	assert.Equal(t, exitcode.Usage, code)
	assert.Contains(t, errw, "job run-a has no baseline")

	_, errw, code = run(t, append(global, "results", "run-b", "--changed-only", "--format", "csv")...)
	assert.Equal(t, exitcode.Usage, code)
	assert.Contains(t, errw, "--changed-only writes JSON lines")
}
