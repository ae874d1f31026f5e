package sqlstore

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/batoncrawl/baton/activities/jobs"
)

// jobTables lists the store's tables that hold rows of a job (a job
// column), found in the database's catalogue: a table added by a later
// schema version is deleted from too.
func (s *jobStore) jobTables(ctx context.Context, tx *sql.Tx) ([]string, error) {
	query := `SELECT m.name FROM sqlite_master m JOIN pragma_table_info(m.name) c
		WHERE m.type = 'table' AND m.name LIKE 'baton\_%' ESCAPE '\' AND c.name = 'job' ORDER BY m.name`
	if s.d.name == "postgres" {
		query = `SELECT table_name FROM information_schema.columns
			WHERE table_schema = current_schema() AND table_name LIKE 'baton\_%' AND column_name = 'job' ORDER BY table_name`
	}
	rows, err := tx.QueryContext(ctx, query)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var t string
		if err := rows.Scan(&t); err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// DeleteJob deletes every row of a job, in every table (its sealed
// secrets included), in one transaction, and returns how many there
// were; jobs.ErrNoJob when it has none.
func (s *jobStore) DeleteJob(ctx context.Context, job string) (int64, error) {
	if err := jobs.ValidID(job); err != nil {
		return 0, err
	}
	var n int64
	err := s.write(ctx, func(tx *sql.Tx) error {
		n = 0
		tables, err := s.jobTables(ctx, tx)
		if err != nil {
			return fmt.Errorf("job %s: list the store's tables: %w", job, err)
		}
		for _, t := range tables {
			res, err := tx.ExecContext(ctx, s.q(`DELETE FROM `+t+` WHERE job = ?`), job)
			if err != nil {
				return fmt.Errorf("job %s: delete its rows of %s: %w", job, t, err)
			}
			k, _ := res.RowsAffected()
			n += k
		}
		res, err := tx.ExecContext(ctx, s.q(`DELETE FROM baton_jobs WHERE id = ?`), job)
		if err != nil {
			return fmt.Errorf("job %s: delete it: %w", job, err)
		}
		k, _ := res.RowsAffected()
		n += k
		return nil
	})
	if err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, fmt.Errorf("job %s in %s: %w", job, s.id, jobs.ErrNoJob)
	}
	s.maxPages.Delete(job)
	s.policies.Delete(job)
	return n, nil
}
