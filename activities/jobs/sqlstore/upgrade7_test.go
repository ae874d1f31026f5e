package sqlstore_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/activities/jobs/sqlstore"
	"github.com/batoncrawl/baton/activities/jobs/storetest"
	"github.com/batoncrawl/baton/testsuite"
)

// v6Revisit is the revisit row page a of makeV6's job is recorded with.
var v6Revisit = jobs.RevisitRecord{ETag: `"a-1"`, LastModified: "Fri, 27 Nov 2026 03:00:00 GMT", ContentHash: "sha256:aa",
	Change: jobs.ChangeNew, SavedBytes: 700, Interval: 36 * time.Hour, NextFetch: time.Date(2026, 11, 29, 3, 0, 0, 0, time.UTC)}

// makeV6 records pages a (body hash h1, with v6Revisit) and b (body hash
// h2, changed) of a job of seeds a, b, c in s, then turns the store back
// into one of schema version 6: the claims in baton_hashes and the
// revisit data in baton_revisit, baton_results without the columns of
// version 7. It returns the job.
func makeV6(t *testing.T, s *sqlstore.Store) string {
	t.Helper()
	ctx := testCtx(t, time.Minute)
	job := storetest.JobID(t, "v6")
	a, b, c := storetest.URL("a"), storetest.URL("b"), storetest.URL("c")
	_, err := s.CreateJob(ctx, storetest.Spec(job, 0, a, b, c), storetest.Entries(0, a, b, c))
	require.NoError(t, err)
	_, err = s.TakeBatch(ctx, job, "b1", 3)
	require.NoError(t, err)
	_, err = s.Claim(ctx, job, "b1", "r1", 1)
	require.NoError(t, err)
	page := func(u, hash string) *jobs.PageRecord {
		p := storetest.Page(job, "b1", "r1", 1, u, 0, "")
		p.BodyHash = hash
		return p
	}
	va := v6Revisit
	_, err = s.RecordAll(ctx, []jobs.Record{
		{Job: job, Batch: "b1", Runner: "r1", Epoch: 1, URL: a, Page: page(a, "h1"), Revisit: &va},
		{Job: job, Batch: "b1", Runner: "r1", Epoch: 1, URL: b, Page: page(b, "h2"), Revisit: &jobs.RevisitRecord{Change: jobs.ChangeChanged}},
	})
	require.NoError(t, err)

	cols := "etag, last_modified, content_hash, change, saved_bytes, links, interval_ms, next_ms, warc_id, warc_uri, warc_date, warc_digest"
	down := []string{
		`INSERT INTO baton_revisit (job, url, ` + cols + `)
			SELECT job, url, ` + cols + ` FROM baton_results WHERE change IS NOT NULL`,
		`INSERT INTO baton_hashes (job, hash, url) SELECT job, claim, url FROM baton_results WHERE claim IS NOT NULL`,
		`DROP INDEX baton_results_claim`,
		`ALTER TABLE baton_results DROP COLUMN claim`,
	}
	for _, col := range []string{"etag", "last_modified", "content_hash", "change", "saved_bytes", "links", "interval_ms", "next_ms",
		"warc_id", "warc_uri", "warc_date", "warc_digest"} {
		down = append(down, `ALTER TABLE baton_results DROP COLUMN `+col)
	}
	down = append(down, `UPDATE baton_store SET value = '6' WHERE key = 'schema'`)
	for _, q := range down {
		_, err := s.DB().ExecContext(ctx, q)
		require.NoError(t, err, q)
	}
	return job
}

// checkUpgradedFromV6: the pages a version-6 store recorded keep their
// revisit data and changes, and own their body hashes: a page recorded
// after the upgrade with a's body is a duplicate of a.
func checkUpgradedFromV6(t *testing.T, s *sqlstore.Store, job string) {
	t.Helper()
	ctx := testCtx(t, time.Minute)
	from, err := s.Migrate(ctx)
	require.NoError(t, err)
	assert.Equal(t, 6, from)
	got, ok, err := s.BaselinePage(ctx, job, storetest.URL("a"))
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, v6Revisit.ETag, got.Revisit.ETag)
	assert.Equal(t, v6Revisit.LastModified, got.Revisit.LastModified)
	assert.Equal(t, v6Revisit.ContentHash, got.Revisit.ContentHash)
	assert.Equal(t, v6Revisit.Interval, got.Revisit.Interval)
	assert.True(t, v6Revisit.NextFetch.Equal(got.Revisit.NextFetch), "next fetch %v", got.Revisit.NextFetch)

	c := storetest.URL("c")
	p := storetest.Page(job, "b1", "r1", 1, c, 0, "")
	p.BodyHash = "h1"
	_, err = s.Record(ctx, jobs.Record{Job: job, Batch: "b1", Runner: "r1", Epoch: 1, URL: c, Page: p,
		Revisit: &jobs.RevisitRecord{Change: jobs.ChangeNew, SavedBytes: 5}})
	require.NoError(t, err)
	dups := map[string]string{}
	require.NoError(t, s.Results(ctx, job, func(p jobs.PageRecord) error {
		dups[p.URL] = p.DuplicateOf
		return nil
	}))
	assert.Equal(t, map[string]string{storetest.URL("a"): "", storetest.URL("b"): "", c: storetest.URL("a")}, dups,
		"a owns h1 from before the upgrade")
	ch, err := s.Changes(ctx, job, "")
	require.NoError(t, err)
	assert.Equal(t, jobs.ChangeStats{New: 2, Changed: 1, SavedBytes: 705}, ch, "the changes of the pages of before and after the upgrade")
}

func TestSQLiteUpgradeFromV6(t *testing.T) {
	dir := t.TempDir()
	s := openSQLite(t, dir)
	job := makeV6(t, s)
	require.NoError(t, s.Close())
	checkUpgradedFromV6(t, openSQLite(t, dir), job)
}

func TestPostgresUpgradeFromV6(t *testing.T) {
	pg := testsuite.StartPostgres(t)
	s := openPostgres(t, pg)
	job := makeV6(t, s)
	require.NoError(t, s.Close())
	checkUpgradedFromV6(t, openPostgres(t, pg), job)
}
