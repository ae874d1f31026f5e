package sqlstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/activities/jobs/sqlstore"
	"github.com/batoncrawl/baton/activities/jobs/storetest"
)

// storedRowsFixture is a real SQLite store with one job and two recorded
// pages, "a" and "b"; the fuzz target overwrites the job's spec and the
// record of "a" with any bytes, as a damaged or foreign database would.
type storedRowsFixture struct {
	s      *sqlstore.Store
	job    string
	a, b   string
	pageB  jobs.PageRecord
	goodSp []byte
	goodA  []byte
}

func newStoredRows(tb testing.TB, dir string) *storedRowsFixture {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := sqlstore.OpenSQLite(ctx, dir)
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = s.Close() })
	f := &storedRowsFixture{s: s, job: "fuzz-job", a: storetest.URL("a"), b: storetest.URL("b")}
	spec := storetest.Spec(f.job, 0, f.a, f.b)
	_, err = s.CreateJob(ctx, spec, storetest.Entries(0, f.a, f.b))
	require.NoError(tb, err)
	_, err = s.TakeBatch(ctx, f.job, "b1", 2)
	require.NoError(tb, err)
	_, err = s.Claim(ctx, f.job, "b1", "r1", 1)
	require.NoError(tb, err)
	for _, u := range []string{f.a, f.b} {
		p := storetest.Page(f.job, "b1", "r1", 1, u, 0, "")
		_, err := s.Record(ctx, jobs.Record{Job: f.job, Batch: "b1", Runner: "r1", Epoch: 1, URL: u, Page: p})
		require.NoError(tb, err)
		if u == f.b {
			f.pageB = *p
		} else {
			f.goodA, _ = json.Marshal(p)
		}
	}
	f.goodSp, _ = json.Marshal(spec)
	return f
}

func (f *storedRowsFixture) overwrite(t *testing.T, spec, recA []byte) {
	ctx := context.Background()
	_, err := f.s.DB().ExecContext(ctx, `UPDATE baton_jobs SET spec = ? WHERE id = ?`, string(spec), f.job)
	require.NoError(t, err)
	_, err = f.s.DB().ExecContext(ctx, `UPDATE baton_results SET record = ? WHERE job = ? AND url = ?`, string(recA), f.job, f.a)
	require.NoError(t, err)
}

func TestStoredRowsCorrupt(t *testing.T) {
	f := newStoredRows(t, t.TempDir())
	ctx := context.Background()
	f.overwrite(t, []byte(`{"id":"fuzz-job"`), []byte(`null`))
	_, err := f.s.Spec(ctx, f.job)
	require.ErrorIs(t, err, jobs.ErrBadSpec)
	require.ErrorContains(t, err, "job fuzz-job in ")
	require.ErrorContains(t, err, "malformed JSON at byte 16")
	var got []string
	err = f.s.Results(ctx, f.job, func(p jobs.PageRecord) error { got = append(got, p.URL); return nil })
	require.Equal(t, []string{f.b}, got, "the readable page is not lost")
	require.ErrorIs(t, err, sqlstore.ErrBadRecord)
	require.ErrorContains(t, err, "1 stored records skipped: record of "+f.a+": unreadable page record: want a JSON object")

	other := strings.Replace(string(f.goodA), `"job":"fuzz-job"`, `"job":"other"`, 1)
	f.overwrite(t, f.goodSp, []byte(other))
	err = f.s.Results(ctx, f.job, func(jobs.PageRecord) error { return nil })
	require.ErrorContains(t, err, `its job is "other", not the row's`)
}

// FuzzStoredRows: whatever bytes the spec and record columns hold, Spec
// returns the spec (exactly what DecodeSpec gives) or an ErrBadSpec error
// naming the job; Results gives every readable page, skips an unreadable
// one with an ErrBadRecord error naming its URL, and never loses the good
// page "b".
func FuzzStoredRows(f *testing.F) {
	fx := newStoredRows(f, f.TempDir())
	f.Add(fx.goodSp, fx.goodA)
	for _, s := range []string{"", "null", "{}", "[]", `"x"`, "{", "\xff", `{"url":1}`, `{"url":"https://example.com/a"}`} {
		f.Add([]byte(s), []byte(s))
	}
	f.Fuzz(func(t *testing.T, spec, recA []byte) {
		if len(spec) > 1<<16 || len(recA) > 1<<16 {
			return
		}
		fx.overwrite(t, spec, recA)
		ctx := context.Background()
		got, err := fx.s.Spec(ctx, fx.job)
		want, werr := jobs.DecodeSpec(spec)
		if werr != nil {
			require.ErrorIs(t, err, jobs.ErrBadSpec)
			require.ErrorContains(t, err, "job "+fx.job+" in ", "the error names the job")
		} else {
			require.NoError(t, err)
			require.Equal(t, want, got)
		}

		var pages []jobs.PageRecord
		err = fx.s.Results(ctx, fx.job, func(p jobs.PageRecord) error { pages = append(pages, p); return nil })
		require.NotEmpty(t, pages)
		require.Equal(t, fx.pageB, pages[len(pages)-1], "the good page is never lost")
		if err != nil {
			require.True(t, errors.Is(err, sqlstore.ErrBadRecord), "%v", err)
			require.ErrorContains(t, err, "record of "+fx.a+":", "the error names the row")
			require.Len(t, pages, 1)
			return
		}
		require.Len(t, pages, 2)
		require.Equal(t, fx.a, pages[0].URL)
		require.Equal(t, fx.job, pages[0].Job)
	})
}
