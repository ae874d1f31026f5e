package sqlstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// This file holds PostgreSQL's named statements: the statements of a
// pipeline (pipeline.go: a pull, a group commit, their writes) are
// prepared once per connection and run by name after, so the server
// parses them once, not at every run (it still plans them per run until
// its plan cache settles on a generic plan: plan_cache_mode). The Parse of a statement
// not yet prepared on the connection goes in the pipeline that first
// runs it by name, so naming costs no round trip. A statement is named
// at its second run on a connection (one run once, such as an IN list
// of an unusual length, stays unnamed), and a connection names at most
// maxNamed statements: the multi-row statements come in a few fixed
// sizes (chunked), so the hot ones fit.
//
// Behind a pooler that does not keep a client's named statements (a
// PgBouncer before 1.21 in transaction mode) the server answers that a
// statement does not exist, or already does: the transaction, rolled
// back, is retried unnamed, and the store names nothing from then on.
// The DSN's default_query_exec_mode=exec (or simple_protocol) says so
// from the start.

// maxNamed bounds the statements one connection keeps prepared.
const maxNamed = 128

// namedStatements is a store's use of named statements; nil names none.
type namedStatements struct {
	off    atomic.Bool // the server lost a named statement: a pooler's
	warned sync.Once
}

// connNames is what one connection has prepared, kept with the
// connection (a renewed or reopened connection starts empty).
type connNames struct {
	named map[string]bool // names prepared on the server
	seen  map[string]bool // names of statements run once, unnamed
}

const connNamesKey = "baton.named"

func namesOf(pc *pgconn.PgConn) *connNames {
	data := pc.CustomData()
	cn, _ := data[connNamesKey].(*connNames)
	if cn == nil {
		cn = &connNames{named: map[string]bool{}, seen: map[string]bool{}}
		data[connNamesKey] = cn
	}
	return cn
}

// statementName is the name of the statement query on every connection.
func statementName(query string) string {
	sum := sha256.Sum256([]byte(query))
	return "baton_" + hex.EncodeToString(sum[:12])
}

// namedLost is an error of a transaction whose named statement the
// server did not have as the connection thought: retried (pgTransient).
type namedLost struct{ err error }

func (e *namedLost) Error() string { return "named statement: " + e.err.Error() }
func (e *namedLost) Unwrap() error { return e.err }

// sendBatch sends b on conn in one round trip, its statements named
// where ns says so, as conn.SendBatch does otherwise.
func (ns *namedStatements) sendBatch(ctx context.Context, conn *pgx.Conn, b *pgx.Batch) pgx.BatchResults {
	if ns == nil || ns.off.Load() {
		return conn.SendBatch(ctx, b)
	}
	type encoded struct {
		values         [][]byte
		formats, rfmts []int16
	}
	// A builder of its own for each statement: its values stay as
	// encoded, in one buffer, until the pipeline is sent.
	enc := make([]encoded, len(b.QueuedQueries))
	for i, qq := range b.QueuedQueries {
		var eqb pgx.ExtendedQueryBuilder
		if err := eqb.Build(conn.TypeMap(), nil, qq.Arguments); err != nil {
			return &namedResults{err: fmt.Errorf("batch statement %d: %w", i+1, err), closed: true}
		}
		enc[i] = encoded{values: eqb.ParamValues, formats: eqb.ParamFormats, rfmts: eqb.ResultFormats}
	}
	cn := namesOf(conn.PgConn())
	br := &namedResults{ns: ns, cn: cn, typeMap: conn.TypeMap(), conn: conn.PgConn(), pipeline: conn.PgConn().StartPipeline(ctx)}
	parsing := map[string]bool{}
	for i, qq := range b.QueuedQueries {
		e, it := enc[i], namedItem{}
		// BEGIN and COMMIT stay unnamed; a SELECT without arguments
		// (the session guards) is named as the others.
		if len(qq.Arguments) > 0 || strings.HasPrefix(qq.SQL, "SELECT ") {
			it.name = statementName(qq.SQL)
		}
		switch {
		case it.name == "":
		case cn.named[it.name] || parsing[it.name]:
		case cn.seen[it.name] && len(cn.named)+len(parsing) < maxNamed:
			parsing[it.name], it.parse = true, true
			br.pipeline.SendPrepare(it.name, qq.SQL, nil)
		default:
			if len(cn.seen) >= 4*maxNamed {
				clear(cn.seen)
			}
			cn.seen[it.name], it.name = true, ""
		}
		if it.name == "" {
			br.pipeline.SendQueryParams(qq.SQL, e.values, nil, e.formats, e.rfmts)
		} else {
			br.pipeline.SendQueryPrepared(it.name, e.values, e.formats, e.rfmts)
		}
		br.items = append(br.items, it)
	}
	if err := br.pipeline.Sync(); err != nil {
		br.err = err
	}
	return br
}

// namedItem is a statement of a pipeline: its name ("" unnamed) and
// whether its Parse goes before it.
type namedItem struct {
	name  string
	parse bool
}

// namedResults reads the results of sendBatch's pipeline in order, as
// pgx's batch results do, and notes each statement the server prepared.
type namedResults struct {
	ns       *namedStatements
	cn       *connNames
	typeMap  *pgtype.Map
	conn     *pgconn.PgConn
	pipeline *pgconn.Pipeline
	items    []namedItem
	next     int
	last     pgx.Rows
	err      error // from the server or the connection: nothing more is read
	closed   bool
	stale    bool // close the connection after the batch
}

// result reads the next statement's result (its Parse's first).
func (br *namedResults) result() (*pgconn.ResultReader, error) {
	if br.err != nil {
		return nil, br.err
	}
	if br.closed {
		return nil, errors.New("batch already closed")
	}
	if br.last != nil {
		br.last.Close()
		var pe *pgconn.PgError
		if err := br.last.Err(); errors.As(err, &pe) {
			return nil, br.fail(err) // the server skips the rest
		}
		br.last = nil
	}
	if br.next >= len(br.items) {
		return nil, errors.New("no more results in batch")
	}
	it := br.items[br.next]
	br.next++
	if it.parse {
		if _, err := br.pipeline.GetResults(); err != nil {
			return nil, br.fail(err)
		}
		br.cn.named[it.name] = true
	}
	res, err := br.pipeline.GetResults()
	if err != nil {
		return nil, br.fail(err)
	}
	rr, ok := res.(*pgconn.ResultReader)
	if !ok {
		return nil, br.fail(fmt.Errorf("unexpected pipeline result: %T", res))
	}
	return rr, nil
}

// fail notes err, after which the pipeline is not read; an error saying
// the connection's named statements are not what it noted is retried.
func (br *namedResults) fail(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == "26000" || pe.Code == "42P05": // no such statement; already exists
			br.ns.off.Store(true)
			br.ns.warned.Do(func() {
				slog.Warn("postgres store: the server does not keep the connection's named statements (a pooler in transaction mode?); running statements unnamed from now on; set default_query_exec_mode=exec in the DSN to say so", "code", pe.Code)
			})
			err = &namedLost{err}
		case pe.Code == "0A000" && strings.Contains(pe.Message, "cached plan"):
			// The schema changed under a statement: the connection,
			// closed after the batch, takes its statements with it.
			br.cn.named, br.cn.seen = map[string]bool{}, map[string]bool{}
			br.stale = true
			err = &namedLost{err}
		}
	}
	br.err = err
	return err
}

func (br *namedResults) Exec() (pgconn.CommandTag, error) {
	rr, err := br.result()
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	tag, err := rr.Close()
	if err != nil {
		return tag, br.fail(err)
	}
	return tag, nil
}

func (br *namedResults) Query() (pgx.Rows, error) {
	rr, err := br.result()
	if err != nil {
		return nil, err
	}
	br.last = pgx.RowsFromResultReader(br.typeMap, rr)
	return br.last, nil
}

func (br *namedResults) QueryRow() pgx.Row {
	rows, err := br.Query()
	return namedRow{rows, err}
}

// Close reads the results not read yet (noting the statements prepared)
// and ends the pipeline.
func (br *namedResults) Close() error {
	if br.closed {
		return br.err
	}
	for br.err == nil && br.next < len(br.items) {
		_, _ = br.Exec()
	}
	if br.err == nil && br.last != nil {
		br.last.Close()
		if err := br.last.Err(); err != nil {
			br.err = err
		}
	}
	br.closed = true
	if br.pipeline != nil {
		if err := br.pipeline.Close(); err != nil && br.err == nil {
			br.err = err
		}
	}
	if br.stale {
		_ = br.conn.Close(context.Background())
	}
	return br.err
}

// namedRow is a row of QueryRow, as pgx's.
type namedRow struct {
	rows pgx.Rows
	err  error
}

func (r namedRow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	r.rows.Close()
	return r.rows.Err()
}

func (br *namedResults) Tx() pgx.Tx { return nil }
