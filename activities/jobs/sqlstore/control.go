package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/batoncrawl/baton/activities/jobs"
)

// This file holds what pause, resume, cancel and re-runs need of the
// store: a job's control state (baton_job_control), the hand-back of a
// paused batch's unfetched URLs, and the re-queue of a job's failed URLs.

// SetControl records a job's control state (see jobs.Store).
func (s *jobStore) SetControl(ctx context.Context, job, state string) error {
	if err := jobs.ValidControl(state); err != nil {
		return err
	}
	return s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, s.q(`INSERT INTO baton_job_control (job, state, updated_ms) VALUES (?, ?, ?)
			ON CONFLICT (job) DO UPDATE SET state = excluded.state, updated_ms = excluded.updated_ms`),
			job, state, time.Now().UnixMilli())
		if err != nil {
			return fmt.Errorf("job %s: set control state %s: %w", job, state, err)
		}
		return nil
	})
}

// Control returns a job's control state (see jobs.Store).
func (s *jobStore) Control(ctx context.Context, job string) (string, error) {
	var state string
	err := s.read(ctx, func() error {
		return s.db.QueryRowContext(ctx, s.q(`SELECT state FROM baton_job_control WHERE job = ?`), job).Scan(&state)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return jobs.ControlRunning, nil
	}
	if err != nil {
		return "", fmt.Errorf("job %s: control state: %w", job, err)
	}
	return state, nil
}

// running refuses, with jobs.ErrHalted, to hand out URLs of a job whose
// control state is paused or cancelled (Pull); "" is running (no row).
func running(job, state string) error {
	if state != "" && state != jobs.ControlRunning {
		return fmt.Errorf("job %s is %s: %w", job, state, jobs.ErrHalted)
	}
	return nil
}

// batchAndControl reads a batch's row under its lock (PostgreSQL) and its
// job's control state ("" without a row) in one statement: a pull's first
// round trip. The control state is read as the statement starts, before
// the row's lock is granted (a pause committed meanwhile stops the next
// pull).
func (s *frontierStore) batchAndControl(ctx context.Context, tx dbtx, job, id string) (jobs.BatchInfo, string, error) {
	b := jobs.BatchInfo{Job: job, ID: id}
	var control string
	err := tx.QueryRowContext(ctx, s.batchAndControlQuery(), job, id).Scan(append(batchFields(&b), &control)...)
	if errors.Is(err, sql.ErrNoRows) {
		return b, "", fmt.Errorf("job %s batch %s: %w", job, id, jobs.ErrNoBatch)
	}
	return b, control, err
}

// batchAndControlQuery is batchAndControl's statement: job, batch.
func (s *frontierStore) batchAndControlQuery() string {
	return s.q(`SELECT ` + batchCols + `,
		COALESCE((SELECT c.state FROM baton_job_control c WHERE c.job = baton_batches.job), '')
		FROM baton_batches WHERE job = ? AND id = ?` + s.d.forUpdate)
}

// Release puts the unfinished URLs of a running batch held at epoch back
// in the frontier (see jobs.Store). The frontier rows are taken before the
// batch row, as a group commit and Requeue take them, so none of them
// waits for another in a cycle; the epoch is checked last, under the
// batch row's lock, and a refusal rolls the hand-back back.
func (s *frontierStore) Release(ctx context.Context, job, id string, epoch int64) (int, error) {
	n := 0
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, s.q(`UPDATE baton_frontier SET state = 0, batch = NULL WHERE job = ? AND batch = ? AND state = 1`), job, id)
		if err != nil {
			return fmt.Errorf("release job %s batch %s: %w", job, id, err)
		}
		k, err := res.RowsAffected()
		if err != nil {
			return err
		}
		n = int(k)
		b, err := s.checkEpoch(ctx, tx, job, id, epoch, s.d.forUpdate)
		if err != nil {
			return err
		}
		if err := s.hosts.releaseBatch(ctx, tx, job, id); err != nil {
			return err
		}
		// Counted on the row Extend counts the holder's pulls on: both
		// hold the batch's lock while they write it.
		return s.count(ctx, tx, job, b.Holder+"/pull", counts{requeued: n})
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// RequeueFailed queues a job's failed URLs again (see jobs.Store).
func (s *jobStore) RequeueFailed(ctx context.Context, job string) (int, error) {
	if _, err := s.jobMaxPages(ctx, s.db, job); err != nil {
		return 0, err
	}
	n := 0
	err := s.write(ctx, func(tx *sql.Tx) error {
		failed := `SELECT url FROM baton_results WHERE job = ? AND failed = 1`
		res, err := tx.ExecContext(ctx, s.q(`UPDATE baton_frontier SET state = 0, batch = NULL
			WHERE job = ? AND state = 2 AND url IN (`+failed+`)`), job, job)
		if err != nil {
			return fmt.Errorf("job %s: queue failed URLs again: %w", job, err)
		}
		queued, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM baton_bodies WHERE job = ? AND url IN (`+failed+`)`), job, job); err != nil {
			return fmt.Errorf("job %s: drop the bodies of failed pages: %w", job, err)
		}
		res, err = tx.ExecContext(ctx, s.q(`DELETE FROM baton_results WHERE job = ? AND failed = 1`), job)
		if err != nil {
			return fmt.Errorf("job %s: drop failed pages: %w", job, err)
		}
		dropped, err := res.RowsAffected()
		if err != nil {
			return err
		}
		n = int(queued)
		return s.count(ctx, tx, job, "~rerun", counts{requeued: int(queued), recorded: -int(dropped), failed: -int(dropped)})
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}
