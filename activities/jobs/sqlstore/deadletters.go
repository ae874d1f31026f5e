package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/batoncrawl/baton/activities/jobs"
)

// This file holds the dead letters of sinks (baton_sink_dead: the
// batches a sink refused as many times as it allows, set aside) and the
// jobs with items to deliver (baton_sink_pending, kept by a trigger on
// baton_items: schema.go).

const deadCols = `first_seq, last_seq, items, failures, last_error, dead_ms, retry`

func scanDead(row interface{ Scan(...any) error }, before ...any) (jobs.DeadLetter, error) {
	var d jobs.DeadLetter
	var at int64
	var retry int
	err := row.Scan(append(before, &d.First, &d.Last, &d.Items, &d.Failures, &d.LastError, &at, &retry)...)
	d.At = time.UnixMilli(at).UTC()
	d.Retry = retry == 1
	return d, err
}

// DeadLetter sets d aside and moves the cursor past it, for the holder
// of l (see jobs.SinkDelivery). Retried, it finds its dead letter made.
func (s *itemStore) DeadLetter(ctx context.Context, l jobs.SinkLease, d jobs.DeadLetter) error {
	if err := checkSink(l.Job, l.Sink, l.Holder); err != nil {
		return err
	}
	if d.First > d.Last || d.Items <= 0 {
		return fmt.Errorf("job %s sink %s: dead letter of items %d to %d (%d): not a batch", l.Job, l.Sink, d.First, d.Last, d.Items)
	}
	return s.sinkUpdate(ctx, l, "dead letter", `cursor = CASE WHEN cursor < ? THEN ? ELSE cursor END, `+clearFailures,
		func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, s.q(`INSERT INTO baton_sink_dead (job, sink, `+deadCols+`)
				VALUES (?, ?, ?, ?, ?, ?, ?, `+s.d.nowMS+`, 0) ON CONFLICT (job, sink, last_seq) DO NOTHING`),
				l.Job, l.Sink, d.First, d.Last, d.Items, d.Failures, sinkError(d.LastError))
			return err
		}, d.Last, d.Last)
}

// AckDeadLetter records the delivery of a retried dead letter's items up
// to upTo (see jobs.SinkDelivery): the dead letter ends with its last
// item, else it keeps the items after upTo.
func (s *itemStore) AckDeadLetter(ctx context.Context, l jobs.SinkLease, last, upTo int64, n int) error {
	if err := checkSink(l.Job, l.Sink, l.Holder); err != nil {
		return err
	}
	return s.sinkUpdate(ctx, l, "ack dead letter", `delivered = delivered + ?`, func(tx *sql.Tx) error {
		if upTo >= last {
			_, err := tx.ExecContext(ctx, s.q(`DELETE FROM baton_sink_dead WHERE job = ? AND sink = ? AND last_seq = ?`), l.Job, l.Sink, last)
			return err
		}
		_, err := tx.ExecContext(ctx, s.q(`UPDATE baton_sink_dead SET first_seq = ?, items = CASE WHEN items > ? THEN items - ? ELSE 1 END
			WHERE job = ? AND sink = ? AND last_seq = ? AND first_seq <= ?`), upTo+1, n, n, l.Job, l.Sink, last, upTo)
		return err
	}, n)
}

// FailDeadLetter records a retried dead letter refused again (see
// jobs.SinkDelivery).
func (s *itemStore) FailDeadLetter(ctx context.Context, l jobs.SinkLease, last int64, reason string) error {
	if err := checkSink(l.Job, l.Sink, l.Holder); err != nil {
		return err
	}
	return s.sinkUpdate(ctx, l, "fail dead letter", `holder = holder`, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, s.q(`UPDATE baton_sink_dead SET retry = 0, failures = failures + 1, last_error = ?, dead_ms = `+s.d.nowMS+`
			WHERE job = ? AND sink = ? AND last_seq = ?`), sinkError(reason), l.Job, l.Sink, last)
		return err
	})
}

// SkipDeadLetters drops the dead letters of job's sink and counts their
// items as skipped (see jobs.SinkOperator).
func (s *itemStore) SkipDeadLetters(ctx context.Context, job, sink string) ([]jobs.DeadLetter, error) {
	return s.operate(ctx, job, sink, "skip", func(tx *sql.Tx, ds []jobs.DeadLetter) error {
		var n int64
		for _, d := range ds {
			n += int64(d.Items)
		}
		if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM baton_sink_dead WHERE job = ? AND sink = ?`), job, sink); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, s.q(`UPDATE baton_sinks SET skipped = skipped + ? WHERE job = ? AND sink = ?`), n, job, sink)
		return err
	})
}

// RetryDeadLetters marks the dead letters of job's sink to be delivered
// again and lists the job for delivery (see jobs.SinkOperator).
func (s *itemStore) RetryDeadLetters(ctx context.Context, job, sink string) ([]jobs.DeadLetter, error) {
	return s.operate(ctx, job, sink, "retry", func(tx *sql.Tx, ds []jobs.DeadLetter) error {
		if _, err := tx.ExecContext(ctx, s.q(`UPDATE baton_sink_dead SET retry = 1 WHERE job = ? AND sink = ?`), job, sink); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, s.q(`INSERT INTO baton_sink_pending (job, grp, seq)
			SELECT id, grp, (SELECT COALESCE(MAX(seq), 0) FROM baton_items WHERE job = ?) FROM baton_jobs WHERE id = ?
			ON CONFLICT (job) DO NOTHING`), job, job)
		return err
	})
}

// operate reads the dead letters of job's sink in a transaction, and
// runs fn with them there when there are some.
func (s *itemStore) operate(ctx context.Context, job, sink, what string, fn func(*sql.Tx, []jobs.DeadLetter) error) ([]jobs.DeadLetter, error) {
	if sink == "" {
		return nil, fmt.Errorf("job %s: empty sink name", job)
	}
	if _, err := s.jobMaxPages(ctx, s.db, job); err != nil {
		return nil, err
	}
	var ds []jobs.DeadLetter
	err := s.write(ctx, func(tx *sql.Tx) error {
		var err error
		ds, err = queryTx(ctx, s.core, tx, `SELECT `+deadCols+` FROM baton_sink_dead WHERE job = ? AND sink = ? ORDER BY last_seq`+s.d.forUpdate,
			[]any{job, sink}, func(rows *sql.Rows) (jobs.DeadLetter, error) { return scanDead(rows) })
		if err != nil || len(ds) == 0 {
			return err
		}
		return fn(tx, ds)
	})
	if err != nil {
		return nil, fmt.Errorf("job %s sink %s: %s dead letters: %w", job, sink, what, err)
	}
	return ds, nil
}

// PendingJobs lists the jobs of group with items to deliver (see
// jobs.SinkDelivery): an index range of baton_sink_pending.
func (s *itemStore) PendingJobs(ctx context.Context, group string) ([]jobs.PendingJob, error) {
	out, err := queryAll(ctx, s.core, `SELECT job, seq FROM baton_sink_pending WHERE grp = ? ORDER BY job`, []any{group},
		func(rows *sql.Rows) (jobs.PendingJob, error) {
			var p jobs.PendingJob
			return p, rows.Scan(&p.Job, &p.Seq)
		})
	if err != nil {
		return nil, fmt.Errorf("jobs of group %s with items to deliver: %w", group, err)
	}
	return out, nil
}

// SinkJobDone marks job delivered up to seq (see jobs.SinkDelivery): its
// row goes unless items past seq were recorded meanwhile.
func (s *itemStore) SinkJobDone(ctx context.Context, job string, seq int64) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, s.q(`DELETE FROM baton_sink_pending WHERE job = ? AND seq <= ?`), job, seq)
		return err
	})
	if err != nil {
		return fmt.Errorf("job %s: delivered up to %d: %w", job, seq, err)
	}
	return nil
}
