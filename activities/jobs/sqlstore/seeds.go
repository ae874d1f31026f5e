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
// between the workers and the server). The rows of the next statement
// (each URL's host parsed) are made while the engine runs the one
// before.
func (s *jobStore) insertSeeds(ctx context.Context, tx *sql.Tx, job string, entries []jobs.Entry) (int, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rows := make(chan seedArgs, 1)
	go seedStatements(ctx, job, entries, rows)
	var full *sql.Stmt
	defer func() {
		if full != nil {
			full.Close()
		}
	}()
	added := 0
	for st := range rows {
		if st.err != nil {
			return 0, fmt.Errorf("queue URLs: %w", st.err)
		}
		n := len(st.args) / 6
		var res sql.Result
		var err error
		switch {
		case n == seedRows && !s.d.dollar:
			if full == nil {
				if full, err = tx.PrepareContext(ctx, seedInsert(n)); err != nil {
					return 0, fmt.Errorf("queue URLs: %w", err)
				}
			}
			res, err = full.ExecContext(ctx, st.args...)
		default:
			res, err = tx.ExecContext(ctx, s.q(seedInsert(n)), st.args...)
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

// seedArgs are the parameters of one statement of insertSeeds, or why
// they could not be made.
type seedArgs struct {
	args []any
	err  error
}

// seedStatements sends the parameters of entries' rows on out, seedRows
// rows a statement, until they are all sent, one is refused (a URL too
// long) or ctx is done; it closes out.
func seedStatements(ctx context.Context, job string, entries []jobs.Entry, out chan<- seedArgs) {
	defer close(out)
	for len(entries) > 0 {
		n := min(seedRows, len(entries))
		st := seedArgs{args: make([]any, 0, n*6)}
		for _, e := range entries[:n] {
			if st.err = jobs.CheckURLLength(e.URL); st.err != nil {
				break
			}
			st.args = append(st.args, entryRow(job, e)...)
		}
		entries = entries[n:]
		select {
		case out <- st:
		case <-ctx.Done():
			return
		}
		if st.err != nil {
			return
		}
	}
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
