package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/batoncrawl/baton/activities/jobs"
)

// This file holds PostgreSQL's pull in two round trips (pgx's pipeline):
// the reads a pull needs before it decides (the batch's row and its job's
// control state, the hosts of its unfinished URLs, the job's lock and
// clock, the job's host leases, the first page of queued URLs and the
// start batches waiting) go to the server with its BEGIN, each run in
// order as a statement of its own; its writes (host leases, the URLs
// moved into the batch, their counter and the batch's size) go with its
// COMMIT, their rows read after. A pull is what a Runner waits for when
// its queue runs dry, and the job's lock it holds is what every other
// hand-out of the job waits for: statement by statement a pull is a
// round trip per statement, most of them under the job's lock (between
// machines, a network round trip each); pipelined, the lock is held for
// one.

// pullPipelined is a try of Pull on PostgreSQL in two round trips; ok is false
// when it does not apply (SQLite; a renewal alone; a job with
// max_pages, whose remainder is read under the lock first) and the caller
// pulls statement by statement.
func (s *frontierStore) pullPipelined(ctx context.Context, job, id string, epoch int64, n, want int) (out jobs.Pulled, ok bool, err error) {
	if !s.d.pipeline || n <= 0 {
		return out, false, nil
	}
	// Both read once per job and process, outside the transaction (a
	// job's spec and max_pages never change).
	pol, err := s.policy(ctx, s.db, job)
	if err != nil {
		return out, false, nil // the pull statement by statement says what is wrong
	}
	if maxPages, err := s.jobMaxPages(ctx, s.db, job); err != nil || maxPages > 0 {
		return out, false, nil
	}
	want = max(want, 1)
	page := firstScanPage(n)
	err = s.pipelinedOnce(ctx, func(b *pgx.Batch) func(pgx.BatchResults) (rest, error) {
		// The batch's row, then the job's row: the lock order of every
		// hand-out (hosts.go).
		b.Queue(s.batchAndControlQuery(), job, id)
		b.Queue(s.q(openHostsQuery), job, id)
		b.Queue(s.lockJobNowQuery(pol.shared), job)
		b.Queue(s.q(leasesQuery(pol)), job)
		b.Queue(s.q(s.hosts.queuedQuery(s.d.seqCol+` > ?`)), job, firstSeq, page)
		b.Queue(s.q(waitingQuery), job, jobs.BatchRunning, id)
		return func(br pgx.BatchResults) (rest, error) {
			bi := jobs.BatchInfo{Job: job, ID: id}
			var control string
			if err := br.QueryRow().Scan(append(batchFields(&bi), &control)...); errors.Is(err, pgx.ErrNoRows) {
				return nil, fmt.Errorf("job %s batch %s: %w", job, id, jobs.ErrNoBatch)
			} else if err != nil {
				return nil, err
			}
			open, err := collect(br, scanOpenHost)
			if err != nil {
				return nil, fmt.Errorf("job %s batch %s: hosts of its URLs: %w", job, id, err)
			}
			v, err := s.readPullView(br, job, id, pol, page)
			if err != nil {
				return nil, err
			}
			if err := heldAt(bi, epoch); err != nil {
				return nil, err
			}
			if err := running(job, control); err != nil { // paused or cancelled: control.go
				return nil, err
			}
			if bi.Size == 0 {
				open = nil // never handed a URL: none unfinished
			}
			return func(tx dbtx, w *writes) (func() error, error) {
				v.q = tx
				done, err := s.pullView(ctx, tx, w, v, bi.Holder+"/pull", n, want, open, true)
				if err != nil {
					return nil, err
				}
				return func() error {
					out = jobs.Pulled{TTL: time.Duration(pol.ttlMS) * time.Millisecond}
					out.Entries, out.Hosts, err = done()
					return err
				}, nil
			}, nil
		}
	})
	return out, true, err
}

// readPullView reads the results of a pipelined pull's statements from the
// job's lock on (its clock, the job's leases, the first page of queued
// URLs, the start batches waiting) into a view of the leases for batch.
func (s *frontierStore) readPullView(br pgx.BatchResults, job, batch string, pol hostPolicy, page int) (*leaseView, error) {
	var now int64
	if err := br.QueryRow().Scan(&now); errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("job %s in %s: %w", job, s.id, jobs.ErrNoJob)
	} else if err != nil {
		return nil, fmt.Errorf("job %s: lock the job: %w", job, err)
	}
	v := s.hosts.newView(nil, job, batch, pol, now)
	if _, err := collect(br, func(row scanner) (struct{}, error) { return struct{}{}, v.add(row) }); err != nil {
		return nil, fmt.Errorf("job %s: host leases: %w", job, err)
	}
	var err error
	if v.first, err = collect(br, scanCandidate); err != nil {
		return nil, fmt.Errorf("job %s: queued URLs: %w", job, err)
	}
	v.firstPage, v.firstRead = page, true
	if err := br.QueryRow().Scan(&v.waiting); err != nil {
		return nil, fmt.Errorf("job %s: batches waiting for URLs: %w", job, err)
	}
	return v, nil
}

// collect reads every row of the next result of a pipeline with scan.
func collect[T any](br pgx.BatchResults, scan func(scanner) (T, error)) ([]T, error) {
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return scanAll(rows, func(r pgx.Rows) (T, error) { return scan(r) })
}

// rest is a pipelined transaction after its first round trip: it reads
// on tx, queues its writes on w, and returns what to call once they are
// committed.
type rest func(tx dbtx, w *writes) (func() error, error)

// pipelined runs a write transaction on PostgreSQL in two round trips
// (with no more reads than ahead's): ahead queues the first statements,
// which go to the server with its BEGIN, and returns how to read their
// results (in order), which returns the rest of the transaction; its
// writes go with the COMMIT. Retried as write is (every use is
// idempotent as write's are).
func (s *core) pipelined(ctx context.Context, ahead func(*pgx.Batch) func(pgx.BatchResults) (rest, error)) error {
	return s.retrying(ctx, func() error { return s.pipelinedOnce(ctx, ahead) })
}

func (s *core) pipelinedOnce(ctx context.Context, ahead func(*pgx.Batch) func(pgx.BatchResults) (rest, error)) (err error) {
	c, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	begun := false
	defer func() {
		if err != nil && begun {
			// A connection whose transaction stays open (the rollback
			// failed) is not reused: the driver refuses it at its next use.
			_, _ = c.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
		}
	}()
	// send sends b in one round trip and reads its results with read.
	send := func(b *pgx.Batch, read func(pgx.BatchResults) error) error {
		return c.Raw(func(dc any) error {
			pc, ok := dc.(*stdlib.Conn)
			if !ok {
				return fmt.Errorf("pipeline: a connection of %T, not pgx's", dc)
			}
			br := s.named.sendBatch(ctx, pc.Conn(), b)
			if err := read(br); err != nil {
				_ = br.Close()
				return err
			}
			return br.Close()
		})
	}
	var then rest
	first := &pgx.Batch{}
	first.Queue("BEGIN")
	if s.guard != "" {
		first.Queue(s.guard)
	}
	readFirst := ahead(first)
	if err = send(first, func(br pgx.BatchResults) error {
		if _, err := br.Exec(); err != nil {
			return err
		}
		begun = true
		if s.guard != "" {
			if _, err := br.Exec(); err != nil {
				return fmt.Errorf("session guards: %w", err)
			}
		}
		var err error
		then, err = readFirst(br)
		return err
	}); err != nil {
		return err
	}
	w := &writes{batch: &pgx.Batch{}}
	after, err := then(c, w)
	if err != nil {
		return err
	}
	w.batch.Queue("COMMIT")
	if err = send(w.batch, func(br pgx.BatchResults) error {
		if err := w.flush(br); err != nil {
			return err
		}
		tag, err := br.Exec()
		if err == nil && tag.String() != "COMMIT" {
			err = fmt.Errorf("commit: the transaction was rolled back (%s)", tag)
		}
		return err
	}); err != nil {
		return err
	}
	begun = false
	return after()
}

var _ dbtx = (*sql.Conn)(nil)
