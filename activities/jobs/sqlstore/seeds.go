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
// statement, and so are the depth, label, data and host its rows share
// (a seed file's rows share all but the host, a one-site file's the
// host too): the SQLite driver's binding of a parameter copies it into
// memory of its own. The rows of the next statement (each URL's host
// parsed) are made while the engine runs the one before.
func (s *jobStore) insertSeeds(ctx context.Context, tx *sql.Tx, job string, entries []jobs.Entry) (int, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rows := make(chan seedArgs, 1)
	go seedStatements(ctx, job, entries, rows)
	var full [seedShapes]*sql.Stmt // of seedRows rows, by shape
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
		switch {
		case st.rows == seedRows && !s.d.dollar:
			if full[st.shape] == nil {
				if full[st.shape], err = tx.PrepareContext(ctx, seedInsert(st.rows, st.shape, false)); err != nil {
					return 0, fmt.Errorf("queue URLs: %w", err)
				}
			}
			res, err = full[st.shape].ExecContext(ctx, st.args...)
		default:
			res, err = tx.ExecContext(ctx, seedInsert(st.rows, st.shape, s.d.dollar), st.args...)
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

// seedShape is which values the rows of a seed statement share, each
// bound once: the job always.
type seedShape int

const (
	ownValues    seedShape = iota // each row its URL, depth, label, data, host
	sharedValues                  // the depth, label and data; each row its URL and host
	sharedHost                    // the depth, label, data and host; each row its URL
	seedShapes
)

// params are the numbers of the parameters of row i (from 0) of a
// statement of this shape: its job, URL, depth, label, data and host.
func (sh seedShape) params(i int) [6]int {
	switch sh {
	case sharedValues:
		return [6]int{1, 5 + 2*i, 2, 3, 4, 6 + 2*i}
	case sharedHost:
		return [6]int{1, 6 + i, 2, 3, 4, 5}
	}
	return [6]int{1, 2 + 5*i, 3 + 5*i, 4 + 5*i, 5 + 5*i, 6 + 5*i}
}

// seedArgs are the parameters of one statement of insertSeeds (rows
// rows of that shape), or why they could not be made.
type seedArgs struct {
	args  []any
	rows  int
	shape seedShape
	err   error
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
// the order of their numbers (seedShape.params).
func seedRowArgs(job string, entries []jobs.Entry) seedArgs {
	hosts := make([]string, len(entries))
	for i, e := range entries {
		if err := jobs.CheckURLLength(e.URL); err != nil {
			return seedArgs{err: err}
		}
		hosts[i] = jobs.HostOf(e.URL)
	}
	st := seedArgs{rows: len(entries), shape: seedShapeOf(entries, hosts)}
	e := entries[0]
	switch st.shape {
	case sharedHost:
		st.args = make([]any, 0, 5+len(entries))
		st.args = append(st.args, job, e.Depth, text(e.Label), entryData(e), hosts[0])
		for _, e := range entries {
			st.args = append(st.args, e.URL)
		}
	case sharedValues:
		st.args = make([]any, 0, 4+2*len(entries))
		st.args = append(st.args, job, e.Depth, text(e.Label), entryData(e))
		for i, e := range entries {
			st.args = append(st.args, e.URL, hosts[i])
		}
	default:
		st.args = make([]any, 0, 1+5*len(entries))
		st.args = append(st.args, job)
		for i, e := range entries {
			st.args = append(st.args, e.URL, e.Depth, text(e.Label), entryData(e), hosts[i])
		}
	}
	return st
}

// seedShapeOf is the shape of the statement inserting entries (with
// those hosts): what all its rows share.
func seedShapeOf(entries []jobs.Entry, hosts []string) seedShape {
	first := entries[0]
	for _, e := range entries[1:] {
		if e.Depth != first.Depth || e.Label != first.Label || !bytes.Equal(e.Data, first.Data) {
			return ownValues
		}
	}
	for _, h := range hosts[1:] {
		if h != hosts[0] {
			return sharedValues
		}
	}
	return sharedHost
}

// entryData is the data column of e's frontier row (nil: NULL).
func entryData(e jobs.Entry) any {
	if len(e.Data) == 0 {
		return nil
	}
	return text(string(e.Data))
}

// seedInsert is the statement inserting n frontier rows of that shape,
// its parameters numbered as the shape's params, so that a shared one is
// bound once. On PostgreSQL every parameter is written with its number
// ($n). On SQLite only the first row's are (?n), and those of the rows
// after it but the shared ones are not (?, the next number): SQLite keeps
// a list of the numbered ones, which it scans whenever a parameter's
// name is asked for, as the driver does for each parameter it binds.
// Each new URL is inserted once (a URL queued already, or twice among
// the rows, is skipped).
func seedInsert(n int, shape seedShape, dollar bool) string {
	first := shape.params(0)
	var b strings.Builder
	b.Grow(80 + n*48)
	b.WriteString(`INSERT INTO baton_frontier (job, url, depth, state, label, data, host) VALUES `)
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(")
		for j, k := range shape.params(i) {
			if j > 0 {
				b.WriteString(", ")
			}
			if j == 3 {
				b.WriteString("0, ") // the state (queued), before the label
			}
			switch {
			case dollar:
				b.WriteString("$" + strconv.Itoa(k))
			case i == 0 || k == first[j]: // the first row's, a shared one
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
