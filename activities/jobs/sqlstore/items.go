package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/batoncrawl/baton/activities/crawler"
	"github.com/batoncrawl/baton/activities/jobs"
)

// This file holds the reads of the items of user crawlers (baton_items,
// written by RecordAll with their pages); sinkstate.go the delivery state
// of their sinks (baton_sinks), deadletters.go their dead letters and the
// jobs with items to deliver.

// itemStore keeps the reads of the items and the state of their sinks.
type itemStore struct{ *core }

// Items returns up to limit items of job with seq > after, in seq order.
func (s *itemStore) Items(ctx context.Context, job string, after int64, limit int) ([]jobs.ItemRecord, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("items of job %s: limit %d: want at least 1", job, limit)
	}
	if _, err := s.jobMaxPages(ctx, s.db, job); err != nil {
		return nil, err
	}
	out, err := queryAll(ctx, s.core, `SELECT seq, url, idx, label, value, COALESCE(origin, job) FROM baton_items WHERE job = ? AND seq > ? ORDER BY seq LIMIT ?`,
		[]any{job, after, limit}, func(rows *sql.Rows) (jobs.ItemRecord, error) { return scanItem(rows, job) })
	if err != nil {
		return nil, fmt.Errorf("items of job %s after %d: %w", job, after, err)
	}
	return out, nil
}

// ItemBatch returns the items q selects (jobs.ItemQuery), reading them
// one by one and stopping before the one past q.MaxBytes.
func (s *itemStore) ItemBatch(ctx context.Context, job string, q jobs.ItemQuery) ([]jobs.ItemRecord, error) {
	if q.Limit <= 0 {
		return nil, fmt.Errorf("items of job %s: limit %d: want at least 1", job, q.Limit)
	}
	if _, err := s.jobMaxPages(ctx, s.db, job); err != nil {
		return nil, err
	}
	query := `SELECT seq, url, idx, label, value, COALESCE(origin, job) FROM baton_items WHERE job = ? AND seq > ? ORDER BY seq LIMIT ?`
	args := []any{job, q.After, q.Limit}
	if q.UpTo > 0 {
		query = `SELECT seq, url, idx, label, value, COALESCE(origin, job) FROM baton_items WHERE job = ? AND seq > ? AND seq <= ? ORDER BY seq LIMIT ?`
		args = []any{job, q.After, q.UpTo, q.Limit}
	}
	var out []jobs.ItemRecord
	err := s.read(ctx, func() error {
		out = out[:0]
		rows, err := s.db.QueryContext(ctx, s.q(query), args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		var size int64
		for rows.Next() {
			it, err := scanItem(rows, job)
			if err != nil {
				return err
			}
			size += it.Size()
			if q.MaxBytes > 0 && size > q.MaxBytes && len(out) > 0 {
				return nil
			}
			out = append(out, it)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("items of job %s after %d: %w", job, q.After, err)
	}
	return out, nil
}

func scanItem(rows *sql.Rows, job string) (jobs.ItemRecord, error) {
	var it jobs.ItemRecord
	var value, origin string
	if err := rows.Scan(&it.Seq, &it.URL, &it.Index, &it.Label, &value, &origin); err != nil {
		return it, err
	}
	it.Job = job
	it.Value = []byte(value)
	// An item carried over from a baseline keeps the ID it had there:
	// origin is the job that recorded it first.
	it.ID = crawler.ItemID(origin, it.URL, it.Index)
	return it, nil
}

// text is s as a text column of either engine keeps it: PostgreSQL
// refuses a NUL byte and invalid UTF-8 (and would fail the whole group
// commit for one bad label, for ever), so they become U+FFFD, as
// encoding/json makes them in the stored page records.
func text(s string) string {
	if utf8.ValidString(s) && !strings.ContainsRune(s, 0) {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}
