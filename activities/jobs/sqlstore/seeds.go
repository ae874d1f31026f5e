package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/batoncrawl/baton/activities/jobs"
)

// This file holds the bulk insert of a job's seeds (AddSeeds): a seed
// file of millions of URLs goes to the frontier in chunks.

// seedRows is how many frontier rows one statement of insertSeeds
// inserts (6,000 parameters: within both engines' limits).
const seedRows = 1000

// seedTuple is one frontier row of insertSeeds' statements.
const seedTuple = "(?, ?, ?, 0, ?, ?, ?)"

// insertSeeds queues entries new to the job's frontier, as insertEntries
// does, and returns how many were new; for many rows at once: the engine
// counts the rows it inserted (no URL comes back), and on SQLite the
// statement of a full chunk is parsed once per call and run again for
// every chunk (PostgreSQL's statements are unnamed: pgbouncer may sit
// between the workers and the server).
func (s *jobStore) insertSeeds(ctx context.Context, tx *sql.Tx, job string, entries []jobs.Entry) (int, error) {
	args := make([]any, 0, seedRows*6)
	var full *sql.Stmt
	defer func() {
		if full != nil {
			full.Close()
		}
	}()
	added := 0
	for len(entries) > 0 {
		n := min(seedRows, len(entries))
		args = args[:0]
		for _, e := range entries[:n] {
			if err := jobs.CheckURLLength(e.URL); err != nil {
				return 0, fmt.Errorf("queue URLs: %w", err)
			}
			args = append(args, entryRow(job, e)...)
		}
		entries = entries[n:]
		var res sql.Result
		var err error
		switch {
		case n == seedRows && !s.d.dollar:
			if full == nil {
				if full, err = tx.PrepareContext(ctx, seedInsert(n)); err != nil {
					return 0, fmt.Errorf("queue URLs: %w", err)
				}
			}
			res, err = full.ExecContext(ctx, args...)
		default:
			res, err = tx.ExecContext(ctx, s.q(seedInsert(n)), args...)
		}
		if err != nil {
			return 0, fmt.Errorf("queue URLs: %w", err)
		}
		k, err := res.RowsAffected()
		if err != nil {
			return 0, fmt.Errorf("queue URLs: %w", err)
		}
		added += int(k)
	}
	return added, nil
}

// seedInsert is the statement inserting n frontier rows, each new URL
// once (a URL queued already, or twice among the rows, is skipped).
func seedInsert(n int) string {
	var b strings.Builder
	b.WriteString(`INSERT INTO baton_frontier (job, url, depth, state, label, data, host) VALUES `)
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(seedTuple)
	}
	b.WriteString(` ON CONFLICT (job, url) DO NOTHING`)
	return b.String()
}
