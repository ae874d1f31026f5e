package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/batoncrawl/baton/activities/crawler"
	"github.com/batoncrawl/baton/activities/jobs"
)

// This file holds the items of user crawlers (baton_items, written by
// RecordAll with their pages) and the delivery state of their sinks
// (baton_sinks): cursors, and leases timed by the database's clock so
// that workers on several machines agree on when one ran out.

// itemStore keeps the reads of the items and the state of their sinks.
type itemStore struct{ *core }

// maxSinkError bounds the last error kept for a sink.
const maxSinkError = 2 << 10

// Items returns up to limit items of job with seq > after, in seq order.
func (s *itemStore) Items(ctx context.Context, job string, after int64, limit int) ([]jobs.ItemRecord, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("items of job %s: limit %d: want at least 1", job, limit)
	}
	if _, err := s.jobMaxPages(ctx, s.db, job); err != nil {
		return nil, err
	}
	out, err := queryAll(ctx, s.core, `SELECT seq, url, idx, label, value, COALESCE(origin, job) FROM baton_items WHERE job = ? AND seq > ? ORDER BY seq LIMIT ?`,
		[]any{job, after, limit}, func(rows *sql.Rows) (jobs.ItemRecord, error) {
			var it jobs.ItemRecord
			var value, origin string
			if err := rows.Scan(&it.Seq, &it.URL, &it.Index, &it.Label, &value, &origin); err != nil {
				return it, err
			}
			it.Job = job
			it.Value = []byte(value)
			// An item carried over from a baseline keeps the ID it had
			// there: origin is the job that recorded it first.
			it.ID = crawler.ItemID(origin, it.URL, it.Index)
			return it, nil
		})
	if err != nil {
		return nil, fmt.Errorf("items of job %s after %d: %w", job, after, err)
	}
	return out, nil
}

const sinkCols = `job, sink, holder, lease_until_ms, cursor, delivered, failures, last_error`

func scanSink(row interface{ Scan(...any) error }) (jobs.SinkState, error) {
	var st jobs.SinkState
	var until int64
	err := row.Scan(&st.Job, &st.Sink, &st.Holder, &until, &st.Cursor, &st.Delivered, &st.Failures, &st.LastError)
	if until > 0 {
		st.LeaseUntil = time.UnixMilli(until).UTC()
	}
	return st, err
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

func checkSink(job, sink, holder string) error {
	switch {
	case sink == "":
		return fmt.Errorf("job %s: empty sink name", job)
	case holder == "":
		return fmt.Errorf("job %s sink %s: empty holder", job, sink)
	}
	return nil
}

// LeaseSink gives holder the lease of job's sink for ttl (see
// jobs.ItemStore). One statement: the sink's row is made, or taken over
// when its holder is holder or its lease ran out by the database's
// clock; else it is returned with jobs.ErrLeaseHeld.
func (s *itemStore) LeaseSink(ctx context.Context, job, sink, holder string, ttl time.Duration) (jobs.SinkState, error) {
	if err := checkSink(job, sink, holder); err != nil {
		return jobs.SinkState{}, err
	}
	ms := ttl.Milliseconds()
	if ms <= 0 {
		return jobs.SinkState{}, fmt.Errorf("job %s sink %s: lease of %v: want at least 1ms", job, sink, ttl)
	}
	if _, err := s.jobMaxPages(ctx, s.db, job); err != nil {
		return jobs.SinkState{}, err
	}
	var st jobs.SinkState
	held := false
	err := s.write(ctx, func(tx *sql.Tx) error {
		held = false
		// excluded.lease_until_ms - ttl is the database's now, read once.
		row := tx.QueryRowContext(ctx, s.q(`INSERT INTO baton_sinks (job, sink, holder, lease_until_ms) VALUES (?, ?, ?, `+s.d.nowMS+` + ?)
			ON CONFLICT (job, sink) DO UPDATE SET holder = excluded.holder, lease_until_ms = excluded.lease_until_ms
			WHERE baton_sinks.holder = excluded.holder OR baton_sinks.lease_until_ms <= excluded.lease_until_ms - ?
			RETURNING `+sinkCols), job, sink, holder, ms, ms)
		var err error
		st, err = scanSink(row)
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		held = true
		st, err = scanSink(tx.QueryRowContext(ctx, s.q(`SELECT `+sinkCols+` FROM baton_sinks WHERE job = ? AND sink = ?`), job, sink))
		return err
	})
	if err != nil {
		return jobs.SinkState{}, fmt.Errorf("job %s sink %s: lease for %s: %w", job, sink, holder, err)
	}
	if held {
		return st, fmt.Errorf("job %s sink %s: lease for %s: held by %s until %s: %w",
			job, sink, holder, st.Holder, st.LeaseUntil.Format(time.RFC3339Nano), jobs.ErrLeaseHeld)
	}
	return st, nil
}

// AckSink moves the sink's cursor to upTo (never back) for its holder
// (see jobs.ItemStore). The holder holds the lease while the sink's row
// names it: a lease that ran out is lost once another holder took it.
func (s *itemStore) AckSink(ctx context.Context, job, sink, holder string, upTo int64, n int) error {
	if err := checkSink(job, sink, holder); err != nil {
		return err
	}
	if n < 0 {
		return fmt.Errorf("job %s sink %s: ack of %d items", job, sink, n)
	}
	return s.sinkUpdate(ctx, job, sink, holder, "ack",
		`cursor = CASE WHEN cursor < ? THEN ? ELSE cursor END, delivered = delivered + ?, failures = 0, last_error = ''`,
		upTo, upTo, n)
}

// FailSink records a failed delivery for the sink's holder (see
// jobs.ItemStore).
func (s *itemStore) FailSink(ctx context.Context, job, sink, holder, reason string) error {
	if err := checkSink(job, sink, holder); err != nil {
		return err
	}
	if len(reason) > maxSinkError {
		i := maxSinkError
		for i > 0 && !utf8.RuneStart(reason[i]) { // not in the middle of a rune
			i--
		}
		reason = reason[:i] + "…"
	}
	reason = text(reason)
	return s.sinkUpdate(ctx, job, sink, holder, "fail", `failures = failures + 1, last_error = ?`, reason)
}

// sinkUpdate sets what set says on the sink's row if holder holds it, or
// returns jobs.ErrLeaseLost.
func (s *itemStore) sinkUpdate(ctx context.Context, job, sink, holder, what, set string, args ...any) error {
	lost := false
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, s.q(`UPDATE baton_sinks SET `+set+` WHERE job = ? AND sink = ? AND holder = ?`),
			append(args, job, sink, holder)...)
		if err != nil {
			return err
		}
		k, err := res.RowsAffected()
		lost = k == 0
		return err
	})
	switch {
	case err != nil:
		return fmt.Errorf("job %s sink %s: %s by %s: %w", job, sink, what, holder, err)
	case lost:
		return fmt.Errorf("job %s sink %s: %s by %s: the sink is not leased to it: %w", job, sink, what, holder, jobs.ErrLeaseLost)
	}
	return nil
}

// Sinks returns the states of a job's sinks, by name.
func (s *itemStore) Sinks(ctx context.Context, job string) ([]jobs.SinkState, error) {
	if _, err := s.jobMaxPages(ctx, s.db, job); err != nil {
		return nil, err
	}
	out, err := queryAll(ctx, s.core, `SELECT `+sinkCols+` FROM baton_sinks WHERE job = ? ORDER BY sink`, []any{job},
		func(rows *sql.Rows) (jobs.SinkState, error) { return scanSink(rows) })
	if err != nil {
		return nil, fmt.Errorf("sinks of job %s: %w", job, err)
	}
	return out, nil
}
