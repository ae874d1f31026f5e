package sqlstore

import (
	"context"
	"database/sql"

	"github.com/jackc/pgx/v5"
)

// WithoutPipeline makes s run every transaction statement by statement,
// without pipelines (a benchmark's second arm). Not safe while s is in
// use.
func WithoutPipeline(s *Store) {
	d := *s.d
	d.pipeline = false
	s.d = &d
}

// InTransaction runs fn in one of s's write transactions, once.
func InTransaction(ctx context.Context, s *Store, fn func(*sql.Tx) error) error {
	return s.writeOnce(ctx, fn)
}

// Begin begins one of s's write transactions.
func Begin(ctx context.Context, s *Store) (*sql.Tx, error) { return s.begin(ctx) }

// ShowPipelined returns the value of setting inside one of s's pipelined
// transactions (PostgreSQL).
func ShowPipelined(ctx context.Context, s *Store, setting string) (string, error) {
	var v string
	err := s.pipelinedOnce(ctx, func(b *pgx.Batch) func(pgx.BatchResults) (rest, error) {
		b.Queue("SHOW " + setting)
		return func(br pgx.BatchResults) (rest, error) {
			if err := br.QueryRow().Scan(&v); err != nil {
				return nil, err
			}
			return func(dbtx, *writes) (func() error, error) { return func() error { return nil }, nil }, nil
		}
	})
	return v, err
}
