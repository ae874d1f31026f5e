package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/batoncrawl/baton/activities/jobs"
)

// This file holds the batches: hand-out from the frontier, claims and
// epochs, and how a batch ends (done, failed, re-queued).

func (s *Store) batchRow(ctx context.Context, q querier, job, id, lock string) (jobs.BatchInfo, error) {
	b := jobs.BatchInfo{Job: job, ID: id}
	err := q.QueryRowContext(ctx, s.q(`SELECT holder, epoch, size, state, error FROM baton_batches WHERE job = ? AND id = ?`+lock), job, id).
		Scan(&b.Holder, &b.Epoch, &b.Size, &b.State, &b.Error)
	if errors.Is(err, sql.ErrNoRows) {
		return b, fmt.Errorf("job %s batch %s: %w", job, id, jobs.ErrNoBatch)
	}
	return b, err
}

// TakeBatch hands out up to n queued URLs as batch id; idempotent per id.
func (s *Store) TakeBatch(ctx context.Context, job, id string, n int) (jobs.BatchInfo, error) {
	var out jobs.BatchInfo
	err := s.write(ctx, func(tx *sql.Tx) error {
		b, err := s.batchRow(ctx, tx, job, id, "")
		if err == nil {
			out = b
			return nil
		}
		if !errors.Is(err, jobs.ErrNoBatch) {
			return err
		}
		out = jobs.BatchInfo{Job: job, ID: id, State: jobs.BatchRunning}
		taken, err := s.handOut(ctx, tx, job, id, "~assign", n)
		if err != nil || len(taken) == 0 {
			return err
		}
		out.Size = len(taken)
		if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO baton_batches (job, id, holder, epoch, size, state) VALUES (?, ?, '', 0, ?, ?)`),
			job, id, out.Size, jobs.BatchRunning); err != nil {
			return fmt.Errorf("take batch %s: %w", id, err)
		}
		return nil
	})
	return out, err
}

// handOut moves up to n queued URLs of job into batch id (within
// max_pages URLs handed out in all), counts them as taken by shard, and
// returns them in frontier order.
func (s *Store) handOut(ctx context.Context, tx *sql.Tx, job, id, shard string, n int) ([]jobs.Entry, error) {
	maxPages, err := s.jobMaxPages(ctx, tx, job)
	if err != nil {
		return nil, err
	}
	if maxPages > 0 {
		if s.d.forUpdate != "" {
			// Serialise the job's hand-outs: two transactions reading the
			// same counters would both take the remainder and hand out
			// more than max_pages URLs. (SQLite has one writer.)
			var one int
			if err := tx.QueryRowContext(ctx, s.q(`SELECT 1 FROM baton_jobs WHERE id = ?`+s.d.forUpdate), job).Scan(&one); err != nil {
				return nil, fmt.Errorf("hand out job %s: lock the job: %w", job, err)
			}
		}
		c, err := s.sums(ctx, tx, job) // a new snapshot, after the lock
		if err != nil {
			return nil, err
		}
		n = min(n, maxPages-(c.taken-c.requeued))
	}
	if n <= 0 {
		return nil, nil
	}
	rows, err := tx.QueryContext(ctx, s.q(`UPDATE baton_frontier SET state = 1, batch = ?
		WHERE job = ? AND url IN (SELECT url FROM baton_frontier WHERE job = ? AND state = 0
			ORDER BY `+s.d.seqCol+` LIMIT ?`+s.d.skipLocked+`)
		RETURNING `+entryCols), id, job, job, n)
	if err != nil {
		return nil, fmt.Errorf("hand out job %s batch %s: %w", job, id, err)
	}
	var out []jobs.Entry
	for rows.Next() {
		e, err := scanEntry(rows)
		if err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, e)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, s.count(ctx, tx, job, shard, counts{taken: len(out)})
}

// Extend moves up to n more queued URLs into a running batch held at
// epoch (a Runner pulling work as it frees slots).
func (s *Store) Extend(ctx context.Context, job, id string, epoch int64, n int) ([]jobs.Entry, error) {
	var out []jobs.Entry
	err := s.write(ctx, func(tx *sql.Tx) error {
		out = nil
		b, err := s.checkEpoch(ctx, tx, job, id, epoch, s.d.forUpdate)
		if err != nil {
			return err
		}
		if err := s.checkRunning(ctx, tx, job); err != nil { // paused or cancelled: control.go
			return err
		}
		// Counted on a row of its own, not the holder's: a group commit of
		// the holder holds that one while it queues for the batch's lock,
		// which this transaction holds.
		if out, err = s.handOut(ctx, tx, job, id, b.Holder+"/pull", n); err != nil || len(out) == 0 {
			return err
		}
		_, err = tx.ExecContext(ctx, s.q(`UPDATE baton_batches SET size = size + ? WHERE job = ? AND id = ?`), len(out), job, id)
		return err
	})
	return out, err
}

// Claim makes holder the batch's holder at epoch.
func (s *Store) Claim(ctx context.Context, job, id, holder string, epoch int64) (jobs.BatchInfo, error) {
	var out jobs.BatchInfo
	err := s.write(ctx, func(tx *sql.Tx) error {
		b, err := s.batchRow(ctx, tx, job, id, s.d.forUpdate)
		if err != nil {
			return err
		}
		out = b
		if b.State != jobs.BatchRunning || b.Epoch == epoch && b.Holder == holder {
			return nil
		}
		if b.Epoch >= epoch {
			return fmt.Errorf("claim job %s batch %s for %s at epoch %d: held by %s at epoch %d: %w",
				job, id, holder, epoch, b.Holder, b.Epoch, jobs.ErrStale)
		}
		if _, err := tx.ExecContext(ctx, s.q(`UPDATE baton_batches SET holder = ?, epoch = ? WHERE job = ? AND id = ?`),
			holder, epoch, job, id); err != nil {
			return err
		}
		out.Holder, out.Epoch = holder, epoch
		return nil
	})
	return out, err
}

// Entries lists a batch's URLs.
func (s *Store) Entries(ctx context.Context, job, id string) ([]jobs.BatchEntry, error) {
	return queryAll(ctx, s, `SELECT `+entryCols+`, state FROM baton_frontier WHERE job = ? AND batch = ? ORDER BY `+s.d.seqCol,
		[]any{job, id}, func(rows *sql.Rows) (jobs.BatchEntry, error) {
			var state int
			e, err := scanEntry(rows, &state)
			return jobs.BatchEntry{Entry: e, Done: state == 2}, err
		})
}

// Unfinished lists a batch's URLs not finished yet (see jobs.Store).
func (s *Store) Unfinished(ctx context.Context, job, id string) ([]jobs.Entry, error) {
	return queryAll(ctx, s, `SELECT `+entryCols+` FROM baton_frontier WHERE job = ? AND batch = ? AND state = 1 ORDER BY `+s.d.seqCol,
		[]any{job, id}, func(rows *sql.Rows) (jobs.Entry, error) { return scanEntry(rows) })
}

func (s *Store) checkEpoch(ctx context.Context, tx *sql.Tx, job, id string, epoch int64, lock string) (jobs.BatchInfo, error) {
	b, err := s.batchRow(ctx, tx, job, id, lock)
	if err != nil {
		return b, err
	}
	if b.Epoch != epoch || b.State != jobs.BatchRunning {
		return b, fmt.Errorf("job %s batch %s: write at epoch %d refused: batch is %s, held by %s at epoch %d: %w",
			job, id, epoch, b.State, b.Holder, b.Epoch, jobs.ErrStale)
	}
	return b, nil
}

// FinishBatch marks a batch whose URLs are all finished done.
func (s *Store) FinishBatch(ctx context.Context, job, id string, epoch int64) (jobs.BatchInfo, error) {
	var out jobs.BatchInfo
	err := s.write(ctx, func(tx *sql.Tx) error {
		b, err := s.batchRow(ctx, tx, job, id, s.d.forUpdate)
		if err != nil {
			return err
		}
		out = b
		if b.State == jobs.BatchDone {
			return nil
		}
		if _, err := s.checkEpoch(ctx, tx, job, id, epoch, ""); err != nil {
			return err
		}
		var open int
		if err := tx.QueryRowContext(ctx, s.q(`SELECT COUNT(*) FROM baton_frontier WHERE job = ? AND batch = ? AND state = 1`), job, id).Scan(&open); err != nil {
			return err
		}
		if open > 0 {
			return fmt.Errorf("finish job %s batch %s: %d URLs are not finished", job, id, open)
		}
		if _, err := tx.ExecContext(ctx, s.q(`UPDATE baton_batches SET state = ? WHERE job = ? AND id = ?`), jobs.BatchDone, job, id); err != nil {
			return err
		}
		out.State = jobs.BatchDone
		return nil
	})
	if err != nil {
		return out, err
	}
	err = s.read(ctx, func() error {
		return s.db.QueryRowContext(ctx, s.q(`SELECT COUNT(*), COALESCE(SUM(failed), 0) FROM baton_results WHERE job = ? AND batch = ?`), job, id).
			Scan(&out.Success, &out.Failed)
	})
	out.Success -= out.Failed
	return out, err
}

// FailBatch marks a running batch failed.
func (s *Store) FailBatch(ctx context.Context, job, id string, epoch int64, reason string) error {
	return s.write(ctx, func(tx *sql.Tx) error {
		b, err := s.batchRow(ctx, tx, job, id, s.d.forUpdate)
		if err != nil {
			return err
		}
		if b.State != jobs.BatchRunning {
			return nil
		}
		if epoch != 0 && b.Epoch != epoch {
			_, err := s.checkEpoch(ctx, tx, job, id, epoch, "")
			return err
		}
		_, err = tx.ExecContext(ctx, s.q(`UPDATE baton_batches SET state = ?, error = ? WHERE job = ? AND id = ?`), jobs.BatchFailed, reason, job, id)
		return err
	})
}

// Requeue fences a running batch at epoch and returns its unfinished URLs
// to the frontier. Two transactions: the first raises the epoch (from its
// commit on, every write of the old holder is refused), the second moves
// the URLs back, taking the frontier rows before the batch row as a
// holder's group commit does, so the two never wait for each other.
func (s *Store) Requeue(ctx context.Context, job, id string, epoch int64) (int, error) {
	running := true
	err := s.write(ctx, func(tx *sql.Tx) error {
		b, err := s.batchRow(ctx, tx, job, id, s.d.forUpdate)
		if err != nil {
			return err
		}
		if running = b.State == jobs.BatchRunning; !running {
			return nil
		}
		if b.Epoch > epoch {
			return fmt.Errorf("requeue job %s batch %s at epoch %d: held by %s at epoch %d: %w", job, id, epoch, b.Holder, b.Epoch, jobs.ErrStale)
		}
		_, err = tx.ExecContext(ctx, s.q(`UPDATE baton_batches SET epoch = ? WHERE job = ? AND id = ?`), epoch, job, id)
		return err
	})
	if err != nil || !running {
		return 0, err
	}
	n := 0
	err = s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, s.q(`UPDATE baton_frontier SET state = 0, batch = NULL WHERE job = ? AND batch = ? AND state = 1`), job, id)
		if err != nil {
			return err
		}
		k, _ := res.RowsAffected()
		n = int(k)
		res, err = tx.ExecContext(ctx, s.q(`UPDATE baton_batches SET state = ? WHERE job = ? AND id = ? AND state = ? AND epoch = ?`),
			jobs.BatchRequeued, job, id, jobs.BatchRunning, epoch)
		if err != nil {
			return err
		}
		if k, _ := res.RowsAffected(); k == 0 {
			return fmt.Errorf("requeue job %s batch %s at epoch %d: claimed meanwhile: %w", job, id, epoch, jobs.ErrStale)
		}
		return s.count(ctx, tx, job, "~assign", counts{requeued: n})
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// Batches returns the named batches' rows.
func (s *Store) Batches(ctx context.Context, job string, ids []string) ([]jobs.BatchInfo, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	args := []any{job}
	for _, id := range ids {
		args = append(args, id)
	}
	return queryAll(ctx, s, `SELECT id, holder, epoch, size, state, error FROM baton_batches
		WHERE job = ? AND id IN (?`+strings.Repeat(", ?", len(ids)-1)+`)`, args,
		func(rows *sql.Rows) (jobs.BatchInfo, error) {
			b := jobs.BatchInfo{Job: job}
			err := rows.Scan(&b.ID, &b.Holder, &b.Epoch, &b.Size, &b.State, &b.Error)
			return b, err
		})
}
