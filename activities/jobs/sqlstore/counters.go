package sqlstore

import (
	"context"

	"github.com/batoncrawl/baton/activities/jobs"
)

// This file holds a job's counters: rows per writer (baton_counters),
// summed when read, so that writers of one job never wait for one row.

type counts struct{ seen, taken, requeued, recorded, failed, items int }

// A writer's counter row, added to: countsInsert, then the row's values
// (job, shard, seen, taken, requeued, recorded, failed, items), then
// countsAdd.
const (
	countsInsert = `INSERT INTO baton_counters (job, shard, seen, taken, requeued, recorded, failed, items) `
	countsAdd    = ` ON CONFLICT (job, shard) DO UPDATE SET
			seen = baton_counters.seen + excluded.seen,
			taken = baton_counters.taken + excluded.taken,
			requeued = baton_counters.requeued + excluded.requeued,
			recorded = baton_counters.recorded + excluded.recorded,
			failed = baton_counters.failed + excluded.failed,
			items = baton_counters.items + excluded.items`
	countSQL = countsInsert + `VALUES (?, ?, ?, ?, ?, ?, ?, ?)` + countsAdd
)

func (s *core) count(ctx context.Context, tx dbtx, job, shard string, c counts) error {
	if c == (counts{}) {
		return nil
	}
	_, err := tx.ExecContext(ctx, s.q(countSQL), job, shard, c.seen, c.taken, c.requeued, c.recorded, c.failed, c.items)
	return err
}

func (s *core) sums(ctx context.Context, q querier, job string) (counts, error) {
	var c counts
	err := q.QueryRowContext(ctx, s.q(`SELECT COALESCE(SUM(seen), 0), COALESCE(SUM(taken), 0), COALESCE(SUM(requeued), 0),
		COALESCE(SUM(recorded), 0), COALESCE(SUM(failed), 0), COALESCE(SUM(items), 0) FROM baton_counters WHERE job = ?`), job).
		Scan(&c.seen, &c.taken, &c.requeued, &c.recorded, &c.failed, &c.items)
	return c, err
}

func stats(c counts, maxPages int) jobs.Stats {
	st := jobs.Stats{Seen: c.seen, Queued: c.seen - c.taken + c.requeued, Recorded: c.recorded, Failed: c.failed, Items: c.items}
	if maxPages > 0 {
		st.Seen = min(st.Seen, maxPages)
		st.Queued = max(0, min(st.Queued, maxPages-(c.taken-c.requeued)))
	}
	return st
}

// Stats returns a job's counters.
func (s *jobStore) Stats(ctx context.Context, job string) (jobs.Stats, error) {
	var st jobs.Stats
	err := s.read(ctx, func() error {
		maxPages, err := s.jobMaxPages(ctx, s.db, job)
		if err != nil {
			return err
		}
		c, err := s.sums(ctx, s.db, job)
		if err != nil {
			return err
		}
		st = stats(c, maxPages)
		return nil
	})
	return st, err
}
