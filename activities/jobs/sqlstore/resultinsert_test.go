package sqlstore_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/activities/jobs/storetest"
	"github.com/batoncrawl/baton/testsuite"
)

// A group commit holding one URL twice (a page handed to the recorder
// twice) writes its result once and fails nothing, and a later commit of
// the URL writes nothing: a result row is inserted only for a URL its
// own transaction finished.
func testResultOncePerURL(t *testing.T, s jobs.Store) {
	ctx := testCtx(t, time.Minute)
	job, seeds := newJob(t, s, 2)
	b, err := s.TakeBatch(ctx, job, job+"-b1", 2)
	require.NoError(t, err)
	_, err = s.Claim(ctx, job, b.ID, "r1", b.Epoch+1)
	require.NoError(t, err)
	rec := func(u string) jobs.Record {
		return jobs.Record{Job: job, Batch: b.ID, Runner: "r1", Epoch: b.Epoch + 1, URL: u,
			Page: storetest.Page(job, b.ID, "r1", b.Epoch+1, u, 0, "")}
	}
	_, err = s.RecordAll(ctx, []jobs.Record{rec(seeds[0]), rec(seeds[1]), rec(seeds[0])})
	require.NoError(t, err, "a group commit with one URL twice")
	out, err := s.RecordAll(ctx, []jobs.Record{rec(seeds[1])})
	require.NoError(t, err, "a URL recorded again")
	assert.False(t, out[0].Wrote, "a URL recorded again writes its result again")
	requireOnce(t, results(t, s, job), seeds)
	done, err := s.FinishBatch(ctx, job, b.ID, b.Epoch+1)
	require.NoError(t, err)
	assert.Equal(t, 2, done.Success)
}

func TestSQLiteResultOncePerURL(t *testing.T) {
	testResultOncePerURL(t, openSQLite(t, t.TempDir()))
}

func TestPostgresResultOncePerURL(t *testing.T) {
	testResultOncePerURL(t, openPostgres(t, testsuite.StartPostgres(t)))
}
