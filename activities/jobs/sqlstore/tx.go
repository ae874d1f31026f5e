package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// This file holds how the store runs its statements: placeholders for
// the dialect, write transactions and reads retried while the database is
// unreachable, one statement for many rows.

// q rewrites ? placeholders for the dialect.
func (s *core) q(query string) string {
	if !s.d.dollar {
		return query
	}
	if d, ok := dollared.Load(query); ok {
		return d.(string)
	}
	d := dollarPlaceholders(query)
	if dollaredN.Add(1) <= maxDollared {
		dollared.Store(query, d)
	}
	return d
}

// dollared holds the statements q rewrote, maxDollared at most: the
// store's statements come in a bounded set of shapes (chunked).
var (
	dollared  sync.Map
	dollaredN atomic.Int64
)

const maxDollared = 4096

// dollarPlaceholders numbers the ? placeholders of query: $1, $2, …
func dollarPlaceholders(query string) string {
	b := make([]byte, 0, len(query)+len(query)/4)
	n := 0
	for i := 0; i < len(query); i++ {
		if c := query[i]; c != '?' {
			b = append(b, c)
			continue
		}
		n++
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(n), 10)
	}
	return string(b)
}

// write runs fn in a write transaction, retrying while the database is
// unreachable or a transaction conflicted. fn should be idempotent: a
// retried commit whose outcome was unknown finds its rows written and
// changes nothing; a retried hand-out (Pull, Extend, RecordTake) finds
// what its committed try handed out by its token (handout.go).
func (s *core) write(ctx context.Context, fn func(*sql.Tx) error) error {
	return s.retrying(ctx, func() error { return s.writeOnce(ctx, fn) })
}

// retrying runs once, a write transaction, again while the database is
// unreachable or a transaction conflicted (write), for RetryFor at most.
func (s *core) retrying(ctx context.Context, once func() error) error {
	retryFor := s.RetryFor
	if retryFor == 0 {
		retryFor = 30 * time.Second
	}
	deadline := time.Now().Add(retryFor)
	backoff := s.d.retryFirst
	h := handoutIn(ctx) // a hand-out's tries are counted: handout.go
	for {
		if h != nil {
			h.tries.Add(1)
		}
		err := once()
		if err == nil || !s.d.transient(err) || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		t := time.NewTimer(backoff/2 + rand.N(backoff/2+1)) // jittered: writers in other processes retry too
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		backoff = min(2*backoff, s.d.retryMax)
	}
}

func (s *core) writeOnce(ctx context.Context, fn func(*sql.Tx) error) error {
	return s.writeOnceGuarded(ctx, s.guard, fn)
}

// writeOnceGuarded is writeOnce under guard (PostgreSQL's session guards:
// guards.go).
func (s *core) writeOnceGuarded(ctx context.Context, guard string, fn func(*sql.Tx) error) (err error) {
	if s.d.serialWrites {
		s.writeMu.Lock()
		defer s.writeMu.Unlock()
	}
	tx, err := s.beginGuarded(ctx, guard)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if err = fn(tx); err != nil {
		return err
	}
	return tx.Commit()
}

// begin begins a write transaction under the session guards.
func (s *core) begin(ctx context.Context) (*sql.Tx, error) { return s.beginGuarded(ctx, s.guard) }

func (s *core) beginGuarded(ctx context.Context, guard string) (*sql.Tx, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil || guard == "" {
		return tx, err
	}
	if _, err := tx.ExecContext(ctx, guard); err != nil {
		_ = tx.Rollback()
		return nil, fmt.Errorf("session guards: %w", err)
	}
	return tx, nil
}

// read retries a read while the database is unreachable.
func (s *core) read(ctx context.Context, fn func() error) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := fn()
		if err == nil || !s.d.transient(err) || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(s.d.retryMax):
		}
	}
}

type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// returning runs a statement over rows in chunks (head with headArgs,
// then one tuple per row, then tail, which ends in "RETURNING url") and
// returns the URLs it reports, so one statement serves many rows.
func (s *core) returning(ctx context.Context, tx dbtx, head string, headArgs []any, tuple, tail string, rows [][]any) (map[string]bool, error) {
	out := map[string]bool{}
	for _, st := range s.chunked(head, headArgs, tuple, tail, rows) {
		res, err := tx.QueryContext(ctx, st.query, st.args...)
		if err != nil {
			return nil, err
		}
		for res.Next() {
			var u string
			if err := res.Scan(&u); err != nil {
				res.Close()
				return nil, err
			}
			out[u] = true
		}
		res.Close()
		if err := res.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// statement is a query for the dialect and its arguments.
type statement struct {
	query string
	args  []any
}

// rowsPerStatement is how many rows one statement of chunked writes.
const rowsPerStatement = 200

// chunked returns the statements writing rows in chunks of chunkSize:
// head with headArgs, then one tuple per row,
// then tail with tailArgs.
func (s *core) chunked(head string, headArgs []any, tuple, tail string, rows [][]any, tailArgs ...any) []statement {
	var out []statement
	for len(rows) > 0 {
		n := chunkSize(len(rows))
		var b strings.Builder
		b.WriteString(head)
		args := append([]any(nil), headArgs...)
		for i, r := range rows[:n] {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(tuple)
			args = append(args, r...)
		}
		b.WriteString(tail)
		out = append(out, statement{s.q(b.String()), append(args, tailArgs...)})
		rows = rows[n:]
	}
	return out
}

// exactRows is how many rows a statement of chunked takes as they come
// more are taken in chunks of the sizes of chunkLadder, so that a
// connection keeps a few shapes of each statement compiled (SQLite:
// sqlitestmts.go) or prepared (PostgreSQL: pgnamed.go), at most five
// statements for up to 255 rows.
const exactRows = 16

var chunkLadder = []int{rowsPerStatement, 128, 64, 32, 16}

// chunkSize is the size of the next chunk of n rows.
func chunkSize(n int) int {
	if n <= exactRows {
		return n
	}
	for _, l := range chunkLadder {
		if l <= n {
			return l
		}
	}
	return n
}

// queryAll runs a query (retried while the database is unreachable) and
// scans every row with scan.
func queryAll[T any](ctx context.Context, s *core, query string, args []any, scan func(*sql.Rows) (T, error)) ([]T, error) {
	var out []T
	err := s.read(ctx, func() error {
		out = out[:0]
		rows, err := s.db.QueryContext(ctx, s.q(query), args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			v, err := scan(rows)
			if err != nil {
				return err
			}
			out = append(out, v)
		}
		return rows.Err()
	})
	return out, err
}

// queryTx runs a query in tx and scans every row with scan.
func queryTx[T any](ctx context.Context, s *core, tx queryer, query string, args []any, scan func(*sql.Rows) (T, error)) ([]T, error) {
	rows, err := tx.QueryContext(ctx, s.q(query), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return scanAll(rows, scan)
}

// scanAll reads every row of rows with scan.
func scanAll[R rowIter, T any](rows R, scan func(R) (T, error)) ([]T, error) {
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// dbtx runs the statements of a write transaction: a *sql.Tx, or the
// *sql.Conn of a transaction begun in a pipeline (pipeline.go).
type dbtx interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}
