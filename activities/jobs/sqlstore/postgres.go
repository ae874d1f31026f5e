package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// DefaultMaxConns is the default size of a process's PostgreSQL
// connection pool. A Runner needs about four at once (two group commits, a
// pull, a job's supervisor); size max_connections for workers × pool, CLI
// runs and other clients.
const DefaultMaxConns = 8

// OpenPostgres opens the distributed store at dsn (postgres://…), with
// password, if not empty, replacing the DSN's (read from a file or the
// environment by the caller, never from the command line), and the
// default pool (DefaultMaxConns). It creates or upgrades the schema if it
// is missing or older; several workers may start at once.
func OpenPostgres(ctx context.Context, dsn, password string) (*Store, error) {
	return openPostgres(ctx, Config{Store: dsn, Password: password})
}

func openPostgres(ctx context.Context, c Config) (*Store, error) {
	dsn, password := c.Store, c.Password
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres store: bad DSN: %w", redact(err, password))
	}
	if password != "" {
		cfg.Password = password
	}
	// Statements are prepared once per connection and kept (pgx's
	// statement cache; the multi-row ones come in a few fixed sizes,
	// chunkSize), so the server does not parse and plan each anew. A DSN
	// with default_query_exec_mode=exec asks for unnamed statements
	// instead, parsed in the round trip that runs them: for a pooler in
	// transaction mode that does not track prepared statements (PgBouncer
	// before 1.21, or without max_prepared_statements).
	// The session guards are set in each transaction (guards.go), not
	// here: a pooler refuses or drops startup parameters. The client
	// notices a server that vanished in seconds.
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAliveConfig: net.KeepAliveConfig{
		Enable: true, Idle: 10 * time.Second, Interval: 3 * time.Second, Count: 3}}
	cfg.DialFunc = dialer.DialContext
	location := fmt.Sprintf("%s:%d/%s", cfg.Host, cfg.Port, cfg.Database)
	db := stdlib.OpenDB(*cfg)
	pool := c.MaxConns
	if pool <= 0 {
		pool = DefaultMaxConns
	}
	db.SetMaxOpenConns(pool)
	db.SetMaxIdleConns(pool)
	// Connections are renewed now and then (a server or pooler restarted
	// behind a load balancer, memory a long session holds).
	db.SetConnMaxLifetime(30 * time.Minute)
	if !c.Warm {
		db.SetConnMaxIdleTime(5 * time.Minute)
	}
	// A server still starting (or restarting) is waited for until ctx
	// ends; a refusal (bad password, no such database) fails at once.
	var last error
	for {
		err := db.PingContext(ctx)
		if err == nil {
			break
		}
		if !pgTransient(err) || ctx.Err() != nil {
			db.Close()
			if last != nil && ctx.Err() != nil {
				// The deadline says when; the last attempt says why.
				err = fmt.Errorf("%w; the last attempt: %v", ctx.Err(), last)
			}
			return nil, fmt.Errorf("postgres store %s (user %s): %w", location, cfg.User, redact(err, cfg.Password))
		}
		last = err
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
	s, err := newStore(ctx, &core{db: db, d: postgresDialect, guard: guardStatement(c.Guards), migrationGuard: guardStatement(c.Guards.migration())}, "postgres", location, c.Existing)
	if err != nil && preparedStatementsLost(err) {
		err = fmt.Errorf("%w: a pooler in transaction mode that does not keep prepared statements (PgBouncer before 1.21, or without max_prepared_statements) sits in front of the server: add default_query_exec_mode=exec to the DSN", err)
	}
	if err == nil && c.Warm {
		warmPool(ctx, db, pool)
	}
	return s, err
}

// warmPool opens n connections of db's pool (Config.Warm); one it cannot
// open is opened when it is needed, as without.
func warmPool(ctx context.Context, db *sql.DB, n int) {
	conns := make([]*sql.Conn, 0, n)
	for range n {
		c, err := db.Conn(ctx)
		if err != nil {
			break
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		_ = c.Close() // back to the pool, open
	}
}

// preparedStatementsLost reports whether err is the server refusing a
// prepared statement as already there or not there: the sign of a
// transaction-mode pooler handing a connection's statements to another.
func preparedStatementsLost(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "42P05" || pe.Code == "26000")
}

// IsPostgresDSN reports whether a --store value names PostgreSQL.
func IsPostgresDSN(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

func redact(err error, secret string) error {
	if secret == "" || !strings.Contains(err.Error(), secret) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), secret, "***"))
}

var postgresDialect = &dialect{
	name:         "postgres",
	dollar:       true,
	forUpdate:    " FOR UPDATE",
	skipLocked:   " FOR UPDATE SKIP LOCKED",
	seqCol:       "seq",
	seqDDL:       ", seq BIGINT GENERATED BY DEFAULT AS IDENTITY",
	seqIndex:     ", seq",
	rowRef:       "ctid",
	joinedWrites: true,
	pipeline:     true,
	itemSeqDDL:   "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY",
	bigint:       "BIGINT",
	blob:         "BYTEA",
	lockSchema:   "SELECT pg_advisory_xact_lock(73726564)",
	// A transaction-level advisory lock (released at the commit, so fine
	// behind PgBouncer in transaction mode), keyed by the job in the
	// two-int4 key space, apart from lockSchema's bigint one. Two jobs
	// whose names hash alike share it: they only wait for each other.
	lockItems: "SELECT pg_advisory_xact_lock(7, hashtext($1))",
	// The group's host leases: one lock per store (its schema), in the
	// two-int4 key space, apart from lockItems' jobs.
	lockHosts: "pg_advisory_xact_lock(8, hashtext(current_schema()))",
	nowMS:     "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)",
	// Once per statement, with the rows it inserted.
	pendingTrigger: []string{`CREATE OR REPLACE FUNCTION baton_items_pending() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			INSERT INTO baton_sink_pending (job, grp, seq)
				SELECT n.job, j.grp, MAX(n.seq) FROM baton_new_items n JOIN baton_jobs j ON j.id = n.job GROUP BY n.job, j.grp ORDER BY n.job
			ON CONFLICT (job) DO UPDATE SET seq = GREATEST(baton_sink_pending.seq, excluded.seq);
			RETURN NULL;
		END $$`,
		`CREATE OR REPLACE TRIGGER baton_items_pending AFTER INSERT ON baton_items
			REFERENCING NEW TABLE AS baton_new_items FOR EACH STATEMENT EXECUTE FUNCTION baton_items_pending()`},
	transient:  pgTransient,
	retryFirst: 50 * time.Millisecond, retryMax: time.Second,
}

// pgTransient: the server is restarting or unreachable, or a transaction
// conflicted; worth retrying.
func pgTransient(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == "40001", pe.Code == "40P01": // serialization failure, deadlock
			return true
		case strings.HasPrefix(pe.Code, "08"), strings.HasPrefix(pe.Code, "57P"): // connection, shutdown
			return true
		case pe.Code == "53300": // too many connections
			return true
		case pe.Code == "55P03": // lock_timeout: a lock held long (by a session ended soon)
			return true
		case pe.Code == "23505" && pe.ConstraintName == claimIndex: // a body hash claimed at once by another commit: claims.go
			return true
		}
		return false
	}
	var ne net.Error
	var ce *pgconn.ConnectError
	switch {
	case errors.Is(err, driver.ErrBadConn), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.As(err, &ne), errors.As(err, &ce), pgconn.SafeToRetry(err):
		return true
	}
	msg := err.Error()
	for _, s := range []string{"conn closed", "connection refused", "connection reset", "broken pipe", "unexpected EOF", "the database system is"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}
