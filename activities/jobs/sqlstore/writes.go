package sqlstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// writes runs the writes of a hand-out whose results it needs only once
// the transaction commits (host leases, the URLs moved into the batch):
// at once on tx, or queued (batch set) to go to the server with the
// commit in one round trip (a pipelined pull, pipeline.go), their rows
// read after it, in order. The hand-out's reads run at once on its
// transaction either way: none of them reads what these write.
// Not for concurrent use.
type writes struct {
	tx    dbtx
	batch *pgx.Batch
	reads []func(pgx.BatchResults) error
}

// exec runs or queues a statement whose result is not read; what names
// it in an error.
func (w *writes) exec(ctx context.Context, what, query string, args ...any) error {
	if w.batch == nil {
		if _, err := w.tx.ExecContext(ctx, query, args...); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	}
	w.batch.Queue(query, args...)
	w.reads = append(w.reads, func(br pgx.BatchResults) error {
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	})
	return nil
}

// query runs or queues a statement and reads each of its rows with each
// (queued: once the pipeline's results come).
func (w *writes) query(ctx context.Context, what, query string, args []any, each func(scanner) error) error {
	if w.batch == nil {
		rows, err := w.tx.QueryContext(ctx, query, args...)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		defer rows.Close()
		return eachRow(what, rows, each)
	}
	w.batch.Queue(query, args...)
	w.reads = append(w.reads, func(br pgx.BatchResults) error {
		rows, err := br.Query()
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		defer rows.Close()
		return eachRow(what, rows, each)
	})
	return nil
}

// rowIter is the rows of a query: *sql.Rows, or pgx's.
type rowIter interface {
	scanner
	Next() bool
	Err() error
}

// eachRow reads every row of rows with each.
func eachRow(what string, rows rowIter, each func(scanner) error) error {
	for rows.Next() {
		if err := each(rows); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// flush reads the results of the statements queued, in order (a
// pipeline sent with br).
func (w *writes) flush(br pgx.BatchResults) error {
	for _, r := range w.reads {
		if err := r(br); err != nil {
			return err
		}
	}
	w.reads = nil
	return nil
}
