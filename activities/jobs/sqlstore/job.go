package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/batoncrawl/baton/activities/jobs"
)

// This file holds a job's row: its spec, its seeds, the list of jobs.

// jobStore keeps the jobs: their rows and seeds, their counters and their
// control state (control.go).
type jobStore struct{ *core }

// insertEntries queues entries new to the job's frontier and returns how
// many were new. A URL already in the frontier, or repeated in entries,
// keeps the label and data it was queued with first.
func (s *jobStore) insertEntries(ctx context.Context, tx dbtx, job string, entries []jobs.Entry) (int, error) {
	rows := make([][]any, 0, len(entries))
	seen := make(map[string]bool, len(entries))
	for _, e := range entries {
		if err := jobs.CheckURLLength(e.URL); err != nil {
			return 0, fmt.Errorf("queue URLs: %w", err)
		}
		if seen[e.URL] {
			continue
		}
		seen[e.URL] = true
		rows = append(rows, entryRow(job, e))
	}
	added, err := s.returning(ctx, tx, `INSERT INTO baton_frontier (job, url, depth, state, label, data, host) VALUES `, nil, "(?, ?, ?, 0, ?, ?, ?)",
		` ON CONFLICT (job, url) DO NOTHING RETURNING url`, rows)
	if err != nil {
		return 0, fmt.Errorf("queue URLs: %w", err)
	}
	return len(added), nil
}

// entryRow is the values of a new frontier row (job, url, depth, label,
// data, host) for e; no data is NULL.
func entryRow(job string, e jobs.Entry) []any {
	return []any{job, e.URL, e.Depth, text(e.Label), entryData(e), jobs.HostOf(e.URL)}
}

// entryCols are the columns scanEntry reads, in its order.
const entryCols = `url, depth, label, data`

// scanner is a row being read: *sql.Rows, or pgx's in a pipeline.
type scanner interface{ Scan(dest ...any) error }

// scanEntry reads the entryCols of a frontier row, and more (a row's
// further columns, after them).
func scanEntry(rows scanner, more ...any) (jobs.Entry, error) {
	var e jobs.Entry
	var data sql.NullString
	if err := rows.Scan(append([]any{&e.URL, &e.Depth, &e.Label, &data}, more...)...); err != nil {
		return e, err
	}
	if data.Valid {
		e.Data = json.RawMessage(data.String)
	}
	return e, nil
}

// CreateJob stores the job and queues its seeds; idempotent.
func (s *jobStore) CreateJob(ctx context.Context, spec jobs.Spec, seeds []jobs.Entry) (jobs.Stats, error) {
	if err := jobs.ValidID(spec.ID); err != nil {
		return jobs.Stats{}, err
	}
	data, err := json.Marshal(spec)
	if err != nil {
		return jobs.Stats{}, err
	}
	err = s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, s.q(`INSERT INTO baton_jobs (id, grp, spec, max_pages, created_ms) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (id) DO NOTHING`), spec.ID, spec.Group, string(data), spec.MaxPages, time.Now().UnixMilli())
		if err != nil {
			return fmt.Errorf("create job %s: %w", spec.ID, err)
		}
		if k, _ := res.RowsAffected(); k == 0 {
			// Created before: by a retry of this call (same spec), or
			// another job under the same ID.
			var grp, stored string
			if err := tx.QueryRowContext(ctx, s.q(`SELECT grp, spec FROM baton_jobs WHERE id = ?`), spec.ID).Scan(&grp, &stored); err != nil {
				return err
			}
			if stored != string(data) {
				return fmt.Errorf("job %s in %s was created by group %s with another spec: %w", spec.ID, s.id, grp, jobs.ErrJobExists)
			}
			return nil
		}
		added, err := s.insertEntries(ctx, tx, spec.ID, seeds)
		if err != nil {
			return err
		}
		return s.count(ctx, tx, spec.ID, "~start", counts{seen: added})
	})
	if err != nil {
		return jobs.Stats{}, err
	}
	return s.Stats(ctx, spec.ID)
}

// AddSeeds queues more seeds of a stored job (see jobs.Store).
func (s *jobStore) AddSeeds(ctx context.Context, job string, seeds []jobs.Entry) (int, error) {
	if _, err := s.jobMaxPages(ctx, s.db, job); err != nil {
		return 0, err
	}
	n := 0
	err := s.write(ctx, func(tx *sql.Tx) error {
		added, err := s.insertSeeds(ctx, tx, job, seeds)
		if err != nil {
			return err
		}
		n = added
		return s.count(ctx, tx, job, "~start", counts{seen: added})
	})
	return n, err
}

// Spec returns a job's spec.
func (s *jobStore) Spec(ctx context.Context, job string) (jobs.Spec, error) {
	var data string
	err := s.read(ctx, func() error {
		return s.db.QueryRowContext(ctx, s.q(`SELECT spec FROM baton_jobs WHERE id = ?`), job).Scan(&data)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return jobs.Spec{}, fmt.Errorf("job %s in %s: %w", job, s.id, jobs.ErrNoJob)
	}
	if err != nil {
		return jobs.Spec{}, fmt.Errorf("job %s: %w", job, err)
	}
	spec, err := jobs.DecodeSpec([]byte(data))
	if err != nil {
		return spec, fmt.Errorf("job %s in %s: %w", job, s.id, err)
	}
	return spec, nil
}

func (s *core) jobMaxPages(ctx context.Context, q querier, job string) (int, error) {
	if v, ok := s.maxPages.Load(job); ok {
		return v.(int), nil
	}
	var n int
	err := q.QueryRowContext(ctx, s.q(`SELECT max_pages FROM baton_jobs WHERE id = ?`), job).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("job %s in %s: %w", job, s.id, jobs.ErrNoJob)
	}
	if err != nil {
		return 0, err
	}
	s.maxPages.Store(job, n)
	return n, nil
}

// Jobs lists the jobs, newest first.
func (s *jobStore) Jobs(ctx context.Context) ([]jobs.JobInfo, error) {
	out, err := queryAll(ctx, s.core, `SELECT id, grp, created_ms FROM baton_jobs ORDER BY created_ms DESC, id`, nil,
		func(rows *sql.Rows) (jobs.JobInfo, error) {
			var j jobs.JobInfo
			var ms int64
			err := rows.Scan(&j.ID, &j.Group, &ms)
			j.Created = time.UnixMilli(ms).UTC()
			return j, err
		})
	if err != nil {
		return nil, err
	}
	for i := range out {
		if out[i].Stats, err = s.Stats(ctx, out[i].ID); err != nil {
			return nil, err
		}
	}
	return out, nil
}
