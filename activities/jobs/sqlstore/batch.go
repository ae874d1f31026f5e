package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/batoncrawl/baton/activities/jobs"
)

// This file holds the batches: hand-out from the frontier, claims and
// epochs, and how a batch ends (done, failed, re-queued).

// frontierStore keeps a job's frontier and its batches: the hand-outs
// (TakeBatch, Pull), claims and epochs, how a batch ends, and the URLs a
// process knows are in the frontier (known.go). A hand-out leases the
// hosts of the URLs it hands out (hosts).
type frontierStore struct {
	*core
	hosts *hostStore
	known sync.Map // job → *knownURLs: URLs known to be in its frontier (known.go)
	// waitersUntil: job → time.Time until which a hand-out from a short
	// queue looks for batches waiting for their first URLs (fairShare)
	waitersUntil sync.Map
}

// batchCols are the columns of a batch's row that batchFields scans.
const batchCols = "holder, epoch, size, state, error"

// batchFields are where a row's batchCols go in b.
func batchFields(b *jobs.BatchInfo) []any {
	return []any{&b.Holder, &b.Epoch, &b.Size, &b.State, &b.Error}
}

func (s *frontierStore) batchRow(ctx context.Context, q querier, job, id, lock string) (jobs.BatchInfo, error) {
	return scanBatch(q.QueryRowContext(ctx, s.q(batchRowQuery(lock)), job, id), job, id)
}

// batchRowQuery reads a batch's row (arguments job, id), with lock.
func batchRowQuery(lock string) string {
	return `SELECT ` + batchCols + ` FROM baton_batches WHERE job = ? AND id = ?` + lock
}

// scanBatch reads the row of batchRowQuery (database/sql's or pgx's: both
// no-rows errors are sql.ErrNoRows).
func scanBatch(row scanner, job, id string) (jobs.BatchInfo, error) {
	b := jobs.BatchInfo{Job: job, ID: id}
	err := row.Scan(batchFields(&b)...)
	if errors.Is(err, sql.ErrNoRows) {
		return b, fmt.Errorf("job %s batch %s: %w", job, id, jobs.ErrNoBatch)
	}
	return b, err
}

// TakeBatch hands out up to n queued URLs as batch id; idempotent per id.
// The batch takes URLs only of hosts it can lease (hosts.go), as a batch
// wanting n requests in flight.
func (s *frontierStore) TakeBatch(ctx context.Context, job, id string, n int) (jobs.BatchInfo, error) {
	var out jobs.BatchInfo
	err := s.write(ctx, func(tx *sql.Tx) error {
		// The job's lock first: a retried call waits for the first one and
		// then finds its batch. The hand-out below runs under it. (The
		// job's spec, read before it, never changes.)
		pol, err := s.policy(ctx, tx, job)
		if err != nil {
			return err
		}
		now, err := s.lockJobNow(ctx, tx, job, pol.shared)
		if err != nil {
			return err
		}
		b, err := s.batchRow(ctx, tx, job, id, "")
		if err == nil {
			out = b
			return nil
		}
		if !errors.Is(err, jobs.ErrNoBatch) {
			return err
		}
		out = jobs.BatchInfo{Job: job, ID: id, State: jobs.BatchRunning}
		// A new batch: no unfinished URL, so no open host.
		taken, _, err := s.pullLocked(ctx, tx, job, id, "~assign", n, n, pol, nil, now, false)
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

// OpenBatch stores batch id running and empty; idempotent per id (see
// jobs.SupervisorStore).
func (s *frontierStore) OpenBatch(ctx context.Context, job, id string) (jobs.BatchInfo, error) {
	var out jobs.BatchInfo
	err := s.write(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO baton_batches (job, id, holder, epoch, size, state) VALUES (?, ?, '', 0, 0, ?)
			ON CONFLICT (job, id) DO NOTHING`), job, id, jobs.BatchRunning); err != nil {
			return fmt.Errorf("open batch %s: %w", id, err)
		}
		b, err := s.batchRow(ctx, tx, job, id, "")
		out = b
		return err
	})
	return out, err
}

// ActiveBatches counts the job's running batches that were handed URLs
// (see jobs.RunnerStore).
func (s *frontierStore) ActiveBatches(ctx context.Context, job string) (int, error) {
	var n int
	err := s.read(ctx, func() error {
		return s.db.QueryRowContext(ctx, s.q(`SELECT COUNT(*) FROM baton_batches WHERE job = ? AND state = ? AND size > 0`),
			job, jobs.BatchRunning).Scan(&n)
	})
	if err != nil {
		return 0, fmt.Errorf("job %s: active batches: %w", job, err)
	}
	return n, nil
}

// Extend moves up to n more queued URLs into a running batch held at
// epoch (a Runner pulling work as it frees slots): Pull with want n.
func (s *frontierStore) Extend(ctx context.Context, job, id string, epoch int64, n int) ([]jobs.Entry, error) {
	p, err := s.Pull(ctx, job, id, epoch, n, n)
	return p.Entries, err
}

// Claim makes holder the batch's holder at epoch.
func (s *frontierStore) Claim(ctx context.Context, job, id, holder string, epoch int64) (jobs.BatchInfo, error) {
	return s.lockedBatch(ctx, job, id, func(tx *sql.Tx, b *jobs.BatchInfo) error {
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
		handOver := b.Holder != "" && b.Holder != holder
		b.Holder, b.Epoch = holder, epoch
		if handOver {
			// The host leases go with the batch.
			return s.hosts.handOver(ctx, tx, job, id)
		}
		return nil
	})
}

// lockedBatch runs fn in a write transaction on the batch's row, read
// under its lock, and returns that row as fn leaves it.
func (s *frontierStore) lockedBatch(ctx context.Context, job, id string, fn func(tx *sql.Tx, b *jobs.BatchInfo) error) (jobs.BatchInfo, error) {
	var out jobs.BatchInfo
	err := s.write(ctx, func(tx *sql.Tx) error {
		b, err := s.batchRow(ctx, tx, job, id, s.d.forUpdate)
		if err != nil {
			return err
		}
		out = b
		return fn(tx, &out)
	})
	return out, err
}

// Entries lists a batch's URLs: a read of the job's frontier rows (no
// index has the URLs a batch finished), for tests and inspection.
func (s *frontierStore) Entries(ctx context.Context, job, id string) ([]jobs.BatchEntry, error) {
	return queryAll(ctx, s.core, `SELECT `+entryCols+`, state FROM baton_frontier WHERE job = ? AND batch = ? ORDER BY `+s.d.seqCol,
		[]any{job, id}, func(rows *sql.Rows) (jobs.BatchEntry, error) {
			var state int
			e, err := scanEntry(rows, &state)
			return jobs.BatchEntry{Entry: e, Done: state == 2}, err
		})
}

// Unfinished lists a batch's URLs not finished yet (see jobs.Store).
func (s *frontierStore) Unfinished(ctx context.Context, job, id string) ([]jobs.Entry, error) {
	out, err := queryAll(ctx, s.core, `SELECT `+entryCols+` FROM baton_frontier WHERE job = ? AND batch = ? AND state = 1 ORDER BY `+s.d.seqCol,
		[]any{job, id}, func(rows *sql.Rows) (jobs.Entry, error) { return scanEntry(rows) })
	if err == nil {
		s.remember(job, out)
	}
	return out, err
}

func (s *frontierStore) checkEpoch(ctx context.Context, tx dbtx, job, id string, epoch int64, lock string) (jobs.BatchInfo, error) {
	b, err := s.batchRow(ctx, tx, job, id, lock)
	if err != nil {
		return b, err
	}
	return b, heldAt(b, epoch)
}

// growSQL grows a batch's size: the count, job, batch (growBatch; a
// pipelined commit's, whose batch row is locked by then).
const growSQL = `UPDATE baton_batches SET size = size + ? WHERE job = ? AND id = ?`

// growBatch adds n URLs handed to a running batch held at epoch to its
// size, and checks the epoch as checkEpoch does, in one statement: the
// row's lock is taken by the update, and a refusal rolls it back.
func (s *frontierStore) growBatch(ctx context.Context, tx dbtx, job, id string, epoch int64, n int) (jobs.BatchInfo, error) {
	b := jobs.BatchInfo{Job: job, ID: id}
	err := tx.QueryRowContext(ctx, s.q(growSQL+` RETURNING `+batchCols), n, job, id).
		Scan(batchFields(&b)...)
	if errors.Is(err, sql.ErrNoRows) {
		return b, fmt.Errorf("job %s batch %s: %w", job, id, jobs.ErrNoBatch)
	}
	if err != nil {
		return b, err
	}
	return b, heldAt(b, epoch)
}

// heldAt refuses a write at epoch to batch b unless b runs at that epoch.
func heldAt(b jobs.BatchInfo, epoch int64) error {
	job, id := b.Job, b.ID
	if b.Epoch != epoch || b.State != jobs.BatchRunning {
		return fmt.Errorf("job %s batch %s: write at epoch %d refused: batch is %s, held by %s at epoch %d: %w",
			job, id, epoch, b.State, b.Holder, b.Epoch, jobs.ErrStale)
	}
	return nil
}

// FinishBatch marks a batch whose URLs are all finished done.
func (s *frontierStore) FinishBatch(ctx context.Context, job, id string, epoch int64) (jobs.BatchInfo, error) {
	out, err := s.lockedBatch(ctx, job, id, func(tx *sql.Tx, b *jobs.BatchInfo) error {
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
		b.State = jobs.BatchDone
		return s.hosts.releaseBatch(ctx, tx, job, id)
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
func (s *frontierStore) FailBatch(ctx context.Context, job, id string, epoch int64, reason string) error {
	_, err := s.lockedBatch(ctx, job, id, func(tx *sql.Tx, b *jobs.BatchInfo) error {
		if b.State != jobs.BatchRunning {
			return nil
		}
		if epoch != 0 && b.Epoch != epoch {
			_, err := s.checkEpoch(ctx, tx, job, id, epoch, "")
			return err
		}
		if _, err := tx.ExecContext(ctx, s.q(`UPDATE baton_batches SET state = ?, error = ? WHERE job = ? AND id = ?`), jobs.BatchFailed, reason, job, id); err != nil {
			return err
		}
		return s.hosts.releaseBatch(ctx, tx, job, id)
	})
	return err
}

// Requeue fences a running batch at epoch and returns its unfinished URLs
// to the frontier. Two transactions: the first raises the epoch (from its
// commit on, every write of the old holder is refused), the second moves
// the URLs back, taking the frontier rows before the batch row as a
// holder's group commit does, so the two never wait for each other.
func (s *frontierStore) Requeue(ctx context.Context, job, id string, epoch int64) (int, error) {
	b, err := s.lockedBatch(ctx, job, id, func(tx *sql.Tx, b *jobs.BatchInfo) error {
		if b.State != jobs.BatchRunning {
			return nil
		}
		if b.Epoch > epoch {
			return fmt.Errorf("requeue job %s batch %s at epoch %d: held by %s at epoch %d: %w", job, id, epoch, b.Holder, b.Epoch, jobs.ErrStale)
		}
		_, err := tx.ExecContext(ctx, s.q(`UPDATE baton_batches SET epoch = ? WHERE job = ? AND id = ?`), epoch, job, id)
		return err
	})
	if err != nil || b.State != jobs.BatchRunning {
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
		// Its hosts are free at once: the fail-over, not a lease's TTL,
		// bounds how long a dead Runner holds them.
		if err := s.hosts.releaseBatch(ctx, tx, job, id); err != nil {
			return err
		}
		return s.count(ctx, tx, job, "~assign", counts{requeued: n})
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// Batches returns the named batches' rows.
func (s *frontierStore) Batches(ctx context.Context, job string, ids []string) ([]jobs.BatchInfo, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	args := []any{job}
	for _, id := range ids {
		args = append(args, id)
	}
	return queryAll(ctx, s.core, `SELECT id, `+batchCols+` FROM baton_batches
		WHERE job = ? AND id IN (?`+strings.Repeat(", ?", len(ids)-1)+`)`, args,
		func(rows *sql.Rows) (jobs.BatchInfo, error) {
			b := jobs.BatchInfo{Job: job}
			err := rows.Scan(append([]any{&b.ID}, batchFields(&b)...)...)
			return b, err
		})
}
