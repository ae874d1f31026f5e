package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/batoncrawl/baton/activities/jobs"
)

// This file holds the delivery state of the sinks of user crawlers
// (baton_sinks): cursors, failures, and leases timed by the database's
// clock so that workers on several machines agree on when one ran out,
// fenced by an epoch that changes each time a lease is taken anew.

// maxSinkError bounds the last error kept for a sink or a dead letter.
const maxSinkError = 2 << 10

// sinkCols are the columns scanSink reads; retry_ms is shown only while
// it is ahead of the database's clock (sinkColsNow).
const sinkCols = `job, sink, holder, lease_until_ms, cursor, delivered, failures, refusals, last_error, retry_ms, skipped, epoch`

func (s *itemStore) sinkColsNow() string {
	return `job, sink, holder, lease_until_ms, cursor, delivered, failures, refusals, last_error,
		CASE WHEN retry_ms > ` + s.d.nowMS + ` THEN retry_ms ELSE 0 END, skipped, epoch`
}

func scanSink(row interface{ Scan(...any) error }, more ...any) (jobs.SinkState, error) {
	var st jobs.SinkState
	var until, retry int64
	err := row.Scan(append([]any{&st.Job, &st.Sink, &st.Holder, &until, &st.Cursor, &st.Delivered, &st.Failures, &st.Refusals,
		&st.LastError, &retry, &st.Skipped, &st.Epoch}, more...)...)
	if until > 0 {
		st.LeaseUntil = time.UnixMilli(until).UTC()
	}
	if retry > 0 {
		st.RetryAt = time.UnixMilli(retry).UTC()
	}
	return st, err
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
// jobs.SinkDelivery). One statement: the sink's row is made, or taken
// over when its holder is holder or its lease ran out by the database's
// clock, and the sink is not waiting after a failure; else it is returned
// with jobs.ErrLeaseHeld or jobs.ErrSinkBackoff.
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
	var held, waiting bool
	err := s.write(ctx, func(tx *sql.Tx) error {
		held, waiting = false, false
		// excluded.lease_until_ms - ttl is the database's now, read once.
		// The epoch stays for a holder renewing its running lease and
		// changes for any other taking.
		row := tx.QueryRowContext(ctx, s.q(`INSERT INTO baton_sinks (job, sink, holder, lease_until_ms, epoch) VALUES (?, ?, ?, `+s.d.nowMS+` + ?, 1)
			ON CONFLICT (job, sink) DO UPDATE SET holder = excluded.holder, lease_until_ms = excluded.lease_until_ms,
				epoch = CASE WHEN baton_sinks.holder = excluded.holder AND baton_sinks.lease_until_ms > excluded.lease_until_ms - ?
					THEN baton_sinks.epoch ELSE baton_sinks.epoch + 1 END
			WHERE (baton_sinks.holder = excluded.holder OR baton_sinks.lease_until_ms <= excluded.lease_until_ms - ?)
				AND baton_sinks.retry_ms <= excluded.lease_until_ms - ?
			RETURNING `+sinkCols), job, sink, holder, ms, ms, ms, ms)
		var err error
		st, err = scanSink(row)
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		var heldN, waitN int
		st, err = scanSink(tx.QueryRowContext(ctx, s.q(`SELECT `+s.sinkColsNow()+`,
			CASE WHEN holder <> ? AND lease_until_ms > `+s.d.nowMS+` THEN 1 ELSE 0 END,
			CASE WHEN retry_ms > `+s.d.nowMS+` THEN 1 ELSE 0 END
			FROM baton_sinks WHERE job = ? AND sink = ?`), holder, job, sink), &heldN, &waitN)
		// Neither (the lease ran out between the two statements): held,
		// for the next pass.
		held = heldN == 1 || waitN == 0
		waiting = !held
		return err
	})
	switch {
	case err != nil:
		return jobs.SinkState{}, fmt.Errorf("job %s sink %s: lease for %s: %w", job, sink, holder, err)
	case held:
		return st, fmt.Errorf("job %s sink %s: lease for %s: held by %s until %s: %w",
			job, sink, holder, st.Holder, st.LeaseUntil.Format(time.RFC3339Nano), jobs.ErrLeaseHeld)
	case waiting:
		return st, fmt.Errorf("job %s sink %s: lease for %s: waiting until %s after %d failures: %w",
			job, sink, holder, st.RetryAt.Format(time.RFC3339Nano), st.Failures, jobs.ErrSinkBackoff)
	}
	return st, nil
}

// RenewSink extends l for ttl while it runs (see jobs.SinkDelivery).
func (s *itemStore) RenewSink(ctx context.Context, l jobs.SinkLease, ttl time.Duration) error {
	if err := checkSink(l.Job, l.Sink, l.Holder); err != nil {
		return err
	}
	ms := ttl.Milliseconds()
	if ms <= 0 {
		return fmt.Errorf("job %s sink %s: lease of %v: want at least 1ms", l.Job, l.Sink, ttl)
	}
	return s.sinkUpdate(ctx, l, "renew", `lease_until_ms = `+s.d.nowMS+` + ?`, nil, ms)
}

// AckSink moves the sink's cursor to upTo (never back) for the holder of
// l (see jobs.SinkDelivery).
func (s *itemStore) AckSink(ctx context.Context, l jobs.SinkLease, upTo int64, n int) error {
	if err := checkSink(l.Job, l.Sink, l.Holder); err != nil {
		return err
	}
	if n < 0 {
		return fmt.Errorf("job %s sink %s: ack of %d items", l.Job, l.Sink, n)
	}
	return s.sinkUpdate(ctx, l, "ack",
		`cursor = CASE WHEN cursor < ? THEN ? ELSE cursor END, delivered = delivered + ?, `+clearFailures, nil,
		upTo, upTo, n)
}

// clearFailures ends the failures of the batch at the cursor.
const clearFailures = `failures = 0, refusals = 0, last_error = '', retry_ms = 0`

// FailSink records a failed delivery for the holder of l (see
// jobs.SinkDelivery).
func (s *itemStore) FailSink(ctx context.Context, l jobs.SinkLease, f jobs.SinkFailure) error {
	if err := checkSink(l.Job, l.Sink, l.Holder); err != nil {
		return err
	}
	refused := 0
	if f.Refused {
		refused = 1
	}
	return s.sinkUpdate(ctx, l, "fail",
		`failures = failures + 1, refusals = refusals + ?, last_error = ?, retry_ms = `+s.d.nowMS+` + ?`, nil,
		refused, sinkError(f.Reason), max(f.Backoff.Milliseconds(), 0))
}

// sinkError is reason as a sink's last error is kept: at most
// maxSinkError bytes, as a text column.
func sinkError(reason string) string {
	if len(reason) > maxSinkError {
		i := maxSinkError
		for i > 0 && !utf8.RuneStart(reason[i]) { // not in the middle of a rune
			i--
		}
		reason = reason[:i] + "…"
	}
	return text(reason)
}

// sinkUpdate sets what set says on the sink's row if l is its lease and
// has not run out, then runs then (if any) in the same transaction; else
// it returns jobs.ErrLeaseLost.
func (s *itemStore) sinkUpdate(ctx context.Context, l jobs.SinkLease, what, set string, then func(*sql.Tx) error, args ...any) error {
	lost := false
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, s.q(`UPDATE baton_sinks SET `+set+`
			WHERE job = ? AND sink = ? AND holder = ? AND epoch = ? AND lease_until_ms > `+s.d.nowMS),
			append(args, l.Job, l.Sink, l.Holder, l.Epoch)...)
		if err != nil {
			return err
		}
		k, err := res.RowsAffected()
		if lost = k == 0; lost || err != nil || then == nil {
			return err
		}
		return then(tx)
	})
	switch {
	case err != nil:
		return fmt.Errorf("job %s sink %s: %s by %s: %w", l.Job, l.Sink, what, l.Holder, err)
	case lost:
		return fmt.Errorf("job %s sink %s: %s by %s: the sink's lease is not its own or ran out: %w", l.Job, l.Sink, what, l.Holder, jobs.ErrLeaseLost)
	}
	return nil
}

// Sinks returns the states of a job's sinks, by name, with their dead
// letters.
func (s *itemStore) Sinks(ctx context.Context, job string) ([]jobs.SinkState, error) {
	if _, err := s.jobMaxPages(ctx, s.db, job); err != nil {
		return nil, err
	}
	out, err := queryAll(ctx, s.core, `SELECT `+s.sinkColsNow()+` FROM baton_sinks WHERE job = ? ORDER BY sink`, []any{job},
		func(rows *sql.Rows) (jobs.SinkState, error) { return scanSink(rows) })
	if err != nil {
		return nil, fmt.Errorf("sinks of job %s: %w", job, err)
	}
	type dead struct {
		sink string
		d    jobs.DeadLetter
	}
	ds, err := queryAll(ctx, s.core, `SELECT sink, `+deadCols+` FROM baton_sink_dead WHERE job = ? ORDER BY sink, last_seq`, []any{job},
		func(rows *sql.Rows) (dead, error) {
			var d dead
			var err error
			d.d, err = scanDead(rows, &d.sink)
			return d, err
		})
	if err != nil {
		return nil, fmt.Errorf("dead letters of job %s: %w", job, err)
	}
	for _, d := range ds {
		for i := range out {
			if out[i].Sink == d.sink {
				out[i].DeadLetters = append(out[i].DeadLetters, d.d)
			}
		}
	}
	return out, nil
}
