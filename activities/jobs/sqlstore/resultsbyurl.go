package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/batoncrawl/baton/activities/jobs"
)

// urlOrder is the ORDER BY of a job's results in byte order of their URLs
// (Go's string order): SQLite compares TEXT with memcmp (BINARY) already;
// PostgreSQL compares with the database's collation unless told "C".
func (s *core) urlOrder() string {
	if s.d.name == "postgres" {
		return `url COLLATE "C"`
	}
	return `url`
}

// ResultsByURL calls fn for every page of a job in byte order of the
// URLs, streamed from one query: a caller holds one page at a time. An
// unreadable stored record is skipped and named at the end, as Results
// does.
func (s *resultStore) ResultsByURL(ctx context.Context, job string, fn func(jobs.PageRecord) error) error {
	if _, err := s.jobMaxPages(ctx, s.db, job); err != nil {
		return err
	}
	var rows *sql.Rows
	err := s.read(ctx, func() error {
		var err error
		rows, err = s.db.QueryContext(ctx, s.q(`SELECT url, record FROM baton_results WHERE job = ? ORDER BY `+s.urlOrder()), job)
		return err
	})
	if err != nil {
		return fmt.Errorf("results of job %s by URL: %w", job, err)
	}
	defer rows.Close()
	var bad []error // the first ten
	nbad := 0
	for rows.Next() {
		var url, data string
		if err := rows.Scan(&url, &data); err != nil {
			return fmt.Errorf("results of job %s by URL: %w", job, err)
		}
		p, err := decodeRecord(job, url, []byte(data))
		if err != nil {
			if nbad++; len(bad) < 10 {
				bad = append(bad, fmt.Errorf("record of %s: %w", url, err))
			}
			continue
		}
		if err := fn(p); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("results of job %s by URL: %w", job, err)
	}
	if nbad > 0 {
		return fmt.Errorf("results of job %s in %s: %d stored records skipped: %w", job, s.id, nbad, errors.Join(bad...))
	}
	return nil
}
