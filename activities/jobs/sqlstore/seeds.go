package sqlstore

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"

	"github.com/batoncrawl/baton/activities/jobs"
)

// This file holds the bulk insert of a job's seeds (AddSeeds): a seed
// file of millions of URLs goes to the frontier in chunks.

// seedRows is how many frontier rows one statement of insertSeeds
// inserts (at most 5,001 parameters: within both engines' limits).
const seedRows = 1000

// insertSeeds queues entries new to the job's frontier, as insertEntries
// does, and returns how many were new; for many rows at once: the engine
// counts the rows it inserted (no URL comes back), and on SQLite the
// statement of a full chunk is parsed once per call and run again for
// every chunk (PostgreSQL's statements are unnamed: pgbouncer may sit
// between the workers and the server). The job is bound once per
// statement, and so are the depth, label and data its rows share (a seed
// file's rows all do): the SQLite driver's binding of a parameter copies
// it into memory of its own. The rows of the next statement (each
// URL's host parsed) are made while the engine runs the one before.
func (s *jobStore) insertSeeds(ctx context.Context, tx *sql.Tx, job string, entries []jobs.Entry) (int, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rows := make(chan seedArgs, 1)
	go seedStatements(ctx, job, entries, rows)
	var full [2]*sql.Stmt // of seedRows rows: each row's own values, shared ones
	defer func() {
		for _, st := range full {
			if st != nil {
				st.Close()
			}
		}
	}()
	added := 0
	for st := range rows {
		if st.err != nil {
			return 0, fmt.Errorf("queue URLs: %w", st.err)
		}
		var res sql.Result
		var err error
		switch shape := 0; {
		case st.rows == seedRows && !s.d.dollar:
			if st.shared {
				shape = 1
			}
			if full[shape] == nil {
				if full[shape], err = tx.PrepareContext(ctx, seedInsert(st.rows, st.shared, false)); err != nil {
					return 0, fmt.Errorf("queue URLs: %w", err)
				}
			}
			res, err = full[shape].ExecContext(ctx, st.args...)
		default:
			res, err = tx.ExecContext(ctx, seedInsert(st.rows, st.shared, s.d.dollar), st.args...)
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

// seedArgs are the parameters of one statement of insertSeeds (rows
// rows; shared: the rows' depth, label and data are bound once), or why
// they could not be made.
type seedArgs struct {
	args   []any
	rows   int
	shared bool
	err    error
}

// seedStatements sends the parameters of entries' rows on out, seedRows
// rows a statement, until they are all sent, one is refused (a URL too
// long) or ctx is done; it closes out.
func seedStatements(ctx context.Context, job string, entries []jobs.Entry, out chan<- seedArgs) {
	defer close(out)
	for len(entries) > 0 {
		n := min(seedRows, len(entries))
		st := seedRowArgs(job, entries[:n])
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

// seedRowArgs are the parameters of the statement inserting entries, in
// the order of seedInsert's placeholders: the job, then, when the
// entries share them, their depth, label and data, then each entry's URL
// and host; otherwise each entry's URL, depth, label, data and host.
func seedRowArgs(job string, entries []jobs.Entry) seedArgs {
	st := seedArgs{rows: len(entries), shared: sameQueueing(entries)}
	if st.shared {
		e := entries[0]
		st.args = make([]any, 0, 4+2*len(entries))
		st.args = append(st.args, job, e.Depth, text(e.Label), entryData(e))
	} else {
		st.args = make([]any, 0, 1+5*len(entries))
		st.args = append(st.args, job)
	}
	for _, e := range entries {
		if st.err = jobs.CheckURLLength(e.URL); st.err != nil {
			return st
		}
		if st.shared {
			st.args = append(st.args, e.URL, jobs.HostOf(e.URL))
		} else {
			st.args = append(st.args, e.URL, e.Depth, text(e.Label), entryData(e), jobs.HostOf(e.URL))
		}
	}
	return st
}

// sameQueueing reports whether entries all have the depth, label and
// data of the first.
func sameQueueing(entries []jobs.Entry) bool {
	for _, e := range entries[1:] {
		if e.Depth != entries[0].Depth || e.Label != entries[0].Label || !bytes.Equal(e.Data, entries[0].Data) {
			return false
		}
	}
	return true
}

// entryData is the data column of e's frontier row (nil: NULL).
func entryData(e jobs.Entry) any {
	if len(e.Data) == 0 {
		return nil
	}
	return text(string(e.Data))
}

// seedInsert is the statement inserting n frontier rows with the
// parameters seedRowArgs makes (shared: the rows' depth, label and data
// are shared), so that a shared one is bound once. On PostgreSQL every
// parameter is numbered ($n). On SQLite only those of the first row are
// (?n), those of the rows after it are not (?, the next number): SQLite
// keeps a list of the numbered ones, which it scans whenever a
// parameter's name is asked for, as the driver does for each parameter
// it binds. Each new URL is inserted once (a URL queued already, or twice
// among the rows, is skipped).
func seedInsert(n int, shared, dollar bool) string {
	var b strings.Builder
	b.Grow(80 + n*48)
	b.WriteString(`INSERT INTO baton_frontier (job, url, depth, state, label, data, host) VALUES `)
	for i := range n {
		url, depth, label, data, host := 2+5*i, 3+5*i, 4+5*i, 5+5*i, 6+5*i
		if shared {
			url, depth, label, data, host = 5+2*i, 2, 3, 4, 6+2*i
		}
		if i > 0 {
			b.WriteString(", ")
		}
		for j, k := range []int{1, url, depth, 0, label, data, host} {
			if j > 0 {
				b.WriteString(", ")
			} else {
				b.WriteString("(")
			}
			switch {
			case j == 3:
				b.WriteString("0") // state: queued
			case dollar:
				b.WriteString("$" + strconv.Itoa(k))
			case i == 0 || k <= 4: // the first row, a shared one
				b.WriteString("?" + strconv.Itoa(k))
			default:
				b.WriteString("?")
			}
		}
		b.WriteString(")")
	}
	b.WriteString(` ON CONFLICT (job, url) DO NOTHING`)
	return b.String()
}
