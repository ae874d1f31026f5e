package sqlstore_test

import (
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/jobs/sqlstore"
	"github.com/batoncrawl/baton/testsuite"
)

// TestPostgresGuardsThroughPgBouncer: behind PgBouncer in transaction
// mode, configured with no startup parameter of the store's, the store
// opens and its transactions run under its guards: a statement past the
// statement timeout is cancelled, in a transaction statement by
// statement and in a pipelined one; and the guards end with the
// transaction (the pooled server connection keeps none).
func TestPostgresGuardsThroughPgBouncer(t *testing.T) {
	pg := testsuite.StartPostgres(t)
	openPostgres(t, pg).Close() // the schema, set up directly
	bouncer := testsuite.StartPgBouncer(t, pg, 2)
	ctx := testCtx(t, time.Minute)
	s, err := sqlstore.Open(ctx, sqlstore.Config{Store: bouncer.DSN(), Guards: sqlstore.Guards{Statement: 300 * time.Millisecond}})
	require.NoError(t, err, "open through pgbouncer")
	t.Cleanup(func() { _ = s.Close() })

	show := func(tx *sql.Tx, name string) string {
		var v string
		require.NoError(t, tx.QueryRowContext(ctx, "SHOW "+name).Scan(&v))
		return v
	}
	require.NoError(t, sqlstore.InTransaction(ctx, s, func(tx *sql.Tx) error {
		assert.Equal(t, "300ms", show(tx, "statement_timeout"))
		assert.Equal(t, "15s", show(tx, "lock_timeout"))
		assert.Equal(t, "10s", show(tx, "idle_in_transaction_session_timeout"))
		return nil
	}))
	err = sqlstore.InTransaction(ctx, s, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "SELECT pg_sleep(5)")
		return err
	})
	var pe *pgconn.PgError
	require.True(t, errors.As(err, &pe), "a statement past the statement timeout: %v", err)
	assert.Equal(t, "57014", pe.Code, "cancelled by statement_timeout: %v", err)

	v, err := sqlstore.ShowPipelined(ctx, s, "statement_timeout")
	require.NoError(t, err)
	assert.Equal(t, "300ms", v, "in a pipelined transaction")

	for range 4 { // both server connections of the pool, outside a transaction
		require.NoError(t, s.DB().QueryRowContext(ctx, "SHOW statement_timeout").Scan(&v))
		assert.Equal(t, "0", v, "no guard outlives its transaction")
	}
}

// TestPostgresGuardsKeepStricterSettings: a stricter timeout the operator
// set on the role stays in the store's transactions; the others get the
// store's guards.
func TestPostgresGuardsKeepStricterSettings(t *testing.T) {
	pg := testsuite.StartPostgres(t)
	// The schema is made first: its statements may take longer than the
	// role's 250 ms on a loaded machine.
	require.NoError(t, openPostgres(t, pg).Close())
	pg.Admin(t, `ALTER ROLE `+pg.User()+` SET statement_timeout = '250ms'`)
	ctx := testCtx(t, time.Minute)
	s := openPostgres(t, pg)
	require.NoError(t, sqlstore.InTransaction(ctx, s, func(tx *sql.Tx) error {
		var st, lt string
		require.NoError(t, tx.QueryRowContext(ctx, "SHOW statement_timeout").Scan(&st))
		require.NoError(t, tx.QueryRowContext(ctx, "SHOW lock_timeout").Scan(&lt))
		assert.Equal(t, "250ms", st, "the role's, stricter than the store's 60 s")
		assert.Equal(t, "15s", lt, "the store's")
		return nil
	}))
}
