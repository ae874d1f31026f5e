package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/batoncrawl/baton/activities/archive"
	"github.com/batoncrawl/baton/activities/jobs"
)

// This file holds what a run keeps of each page for the next run (the
// revisit columns of baton_results, written by the group commits with
// the pages; baton_revisit's row where a store of version 6 or older
// wrote one), the
// baseline's record of a URL read by key, the changes counted against a
// baseline, and the items carried over from a baseline.

// maxValidatorBytes bounds a validator kept: a longer one is a server's
// garbage, never sent back (revisit.Condition leaves out more than 1 KiB).
const maxValidatorBytes = 1 << 10

// revisitValues are the values of the revisit columns of r's result row
// (revisitColumns): NULL, all of them, for a record without.
func revisitValues(r jobs.Record) ([]any, error) {
	v := r.Revisit
	if v == nil {
		return make([]any, 12), nil
	}
	var links any // NULL: none kept
	if len(v.Links) > 0 {
		b, err := json.Marshal(v.Links)
		if err != nil {
			return nil, fmt.Errorf("record %s: links: %w", r.URL, err)
		}
		links = string(b)
	}
	date := ""
	if !v.WARC.Date.IsZero() {
		date = v.WARC.Date.UTC().Format(time.RFC3339Nano)
	}
	var next int64
	if !v.NextFetch.IsZero() {
		next = v.NextFetch.UnixMilli()
	}
	return []any{text(clipValidator(v.ETag)), text(clipValidator(v.LastModified)), text(v.ContentHash),
		text(v.Change), v.SavedBytes, links, v.Interval.Milliseconds(), next,
		text(v.WARC.RecordID), text(v.WARC.TargetURI), date, text(v.WARC.PayloadDigest)}, nil
}

// clipValidator drops a validator too long to be sent back.
func clipValidator(s string) string {
	if len(s) > maxValidatorBytes {
		return ""
	}
	return s
}

// carryItems copies the items of the baseline pages named by the finished
// records of rs (Record.CarryItemsFrom) to their pages in job, with their
// origin, so that their IDs stay the baseline's (or the job the baseline
// carried them from); it returns how many it copied. The caller holds the
// job's items lock where the engine has one.
func (s *resultStore) carryItems(ctx context.Context, tx dbtx, job string, rs []jobs.Record, finished, wrote map[string]bool) (int, error) {
	n := 0
	for _, r := range rs {
		if r.CarryItemsFrom == "" || r.Page == nil || !finished[r.URL] || !wrote[r.URL] {
			continue
		}
		res, err := tx.ExecContext(ctx, s.q(`INSERT INTO baton_items (job, url, idx, label, value, origin)
			SELECT ?, url, idx, label, value, COALESCE(origin, job) FROM baton_items WHERE job = ? AND url = ? ORDER BY idx
			ON CONFLICT (job, url, idx) DO NOTHING`), job, r.CarryItemsFrom, r.URL)
		if err != nil {
			return n, fmt.Errorf("record: items of %s carried over from job %s: %w", r.URL, r.CarryItemsFrom, err)
		}
		k, err := res.RowsAffected()
		if err != nil {
			return n, err
		}
		n += int(k)
	}
	return n, nil
}

// revisitOfResult are the revisit columns of a result row r, or of its
// baton_revisit row v where r has none (written by a store of version 6
// or older).
var revisitOfResult = func() string {
	var b strings.Builder
	for i, c := range revisitColumns(&dialect{}) {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("CASE WHEN r.change IS NULL THEN v." + c[0] + " ELSE r." + c[0] + " END")
	}
	return b.String()
}()

// BaselinePage returns job's page of url with its revisit row (see
// jobs.RevisitReader): one read by key.
func (s *resultStore) BaselinePage(ctx context.Context, job, url string) (jobs.BaselinePage, bool, error) {
	got, err := s.BaselinePages(ctx, job, []string{url})
	p, ok := got[url]
	return p, ok, err
}

// BaselinePages returns job's pages of urls with their revisit rows, by
// URL (a URL job has no page of is absent): one indexed read per chunk of
// URLs (chunked: a few statement shapes, kept compiled on SQLite).
func (s *resultStore) BaselinePages(ctx context.Context, job string, urls []string) (map[string]jobs.BaselinePage, error) {
	out := make(map[string]jobs.BaselinePage, len(urls))
	list := make([][]any, len(urls))
	for i, u := range urls {
		list[i] = []any{u}
	}
	for _, st := range s.chunked(`SELECT r.url, r.record, `+revisitOfResult+`
			FROM baton_results r LEFT JOIN baton_revisit v ON r.change IS NULL AND v.job = r.job AND v.url = r.url
			WHERE r.job = ? AND r.url IN (`, []any{job}, "?", `)`, list) {
		rows, err := queryAll(ctx, s.core, st.query, st.args, scanBaseline)
		if err != nil {
			return nil, fmt.Errorf("baseline %s: %w", job, err)
		}
		for _, r := range rows {
			p, err := r.page(job)
			if err != nil {
				return nil, err
			}
			out[r.url] = p
		}
	}
	return out, nil
}

// baselineRow is a row of a baseline read, as scanned.
type baselineRow struct {
	url, record                                  string
	etag, lm, hash, change, wid, wuri, wdt, wdig sql.NullString
	saved, interval, next                        sql.NullInt64
	links                                        sql.NullString
}

func scanBaseline(rows *sql.Rows) (baselineRow, error) {
	var r baselineRow
	err := rows.Scan(&r.url, &r.record, &r.etag, &r.lm, &r.hash, &r.change, &r.saved, &r.links, &r.interval, &r.next,
		&r.wid, &r.wuri, &r.wdt, &r.wdig)
	return r, err
}

// page decodes the row's page and revisit fields.
func (r baselineRow) page(job string) (jobs.BaselinePage, error) {
	var out jobs.BaselinePage
	p, err := decodeRecord(job, r.url, []byte(r.record))
	if err != nil {
		return out, fmt.Errorf("baseline %s page %s: %w", job, r.url, err)
	}
	out.Page = p
	v := &out.Revisit
	v.ETag, v.LastModified, v.ContentHash, v.Change = r.etag.String, r.lm.String, r.hash.String, r.change.String
	v.SavedBytes, v.Interval = r.saved.Int64, time.Duration(r.interval.Int64)*time.Millisecond
	if r.next.Int64 > 0 {
		v.NextFetch = time.UnixMilli(r.next.Int64).UTC()
	}
	if r.links.Valid && r.links.String != "" {
		if err := json.Unmarshal([]byte(r.links.String), &v.Links); err != nil {
			return out, fmt.Errorf("baseline %s page %s: %w: links: %v", job, r.url, ErrBadRecord, err)
		}
	}
	v.WARC.RecordID, v.WARC.TargetURI, v.WARC.PayloadDigest = r.wid.String, r.wuri.String, r.wdig.String
	if r.wdt.String != "" {
		if t, err := time.Parse(time.RFC3339Nano, r.wdt.String); err == nil {
			v.WARC.Date = t
		} else {
			v.WARC = archive.Original{}
		}
	}
	return out, nil
}

// Changes counts job's pages by change against baseline (see
// jobs.ReaderStore).
func (s *resultStore) Changes(ctx context.Context, job, baseline string) (jobs.ChangeStats, error) {
	var out jobs.ChangeStats
	if _, err := s.jobMaxPages(ctx, s.db, job); err != nil {
		return out, err
	}
	type row struct {
		change string
		n      int
		saved  int64
	}
	rows, err := queryAll(ctx, s.core, `SELECT COALESCE(r.change, v.change), COUNT(*), COALESCE(SUM(COALESCE(r.saved_bytes, v.saved_bytes)), 0)
		FROM baton_results r LEFT JOIN baton_revisit v ON r.change IS NULL AND v.job = r.job AND v.url = r.url
		WHERE r.job = ? AND (r.change IS NOT NULL OR v.url IS NOT NULL) GROUP BY COALESCE(r.change, v.change)`,
		[]any{job}, func(rows *sql.Rows) (row, error) {
			var r row
			return r, rows.Scan(&r.change, &r.n, &r.saved)
		})
	if err != nil {
		return out, fmt.Errorf("job %s: changes: %w", job, err)
	}
	for _, r := range rows {
		switch r.change {
		case jobs.ChangeNew:
			out.New += r.n
		case jobs.ChangeChanged:
			out.Changed += r.n
		case jobs.ChangeUnchanged:
			out.Unchanged += r.n
		}
		out.SavedBytes += r.saved
	}
	if baseline == "" {
		return out, nil
	}
	err = s.read(ctx, func() error {
		return s.db.QueryRowContext(ctx, s.q(`SELECT COUNT(*) FROM baton_results b WHERE b.job = ?
			AND NOT EXISTS (SELECT 1 FROM baton_results r WHERE r.job = ? AND r.url = b.url)`), baseline, job).Scan(&out.Gone)
	})
	if err != nil {
		return out, fmt.Errorf("job %s: pages gone since %s: %w", job, baseline, err)
	}
	return out, nil
}
