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

// Session guards set on every PostgreSQL connection unless the DSN sets
// them itself (as options or runtime parameters): a worker whose machine
// vanished in the middle of a transaction holds the batch row's lock, and
// without them its server session would hold it until the kernel's TCP
// keepalive gives up, about two hours later, blocking the backup's Claim
// and the job's Requeue for as long.
var sessionGuards = map[string]string{
	// A session idle inside a transaction (its client gone between two
	// statements) is ended, and its locks released, after this long. The
	// store's transactions are milliseconds long.
	"idle_in_transaction_session_timeout": "10s",
	// No statement waits longer than this for a lock (retried: SQLSTATE
	// 55P03 is transient) or runs longer than statement_timeout.
	"lock_timeout":      "15s",
	"statement_timeout": "60s",
	// The server probes an idle client's TCP connection after 10 s, every
	// 3 s, and drops it after 3 unanswered probes.
	"tcp_keepalives_idle":     "10",
	"tcp_keepalives_interval": "3",
	"tcp_keepalives_count":    "3",
	// And a connection whose last reply is never acknowledged (the client
	// vanished right after a statement) is dropped after 19 s, not after
	// the kernel's 15 minutes of retransmissions.
	"tcp_user_timeout": "19000",
}

// SessionBound is how long a PostgreSQL session whose client vanished can
// hold a lock at most (idle_in_transaction_session_timeout, or the TCP
// keepalive's 10 s + 3 × 3 s for a client gone while no transaction was
// open); the README documents it.
const SessionBound = 19 * time.Second

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
	// No named prepared statements: a statement is parsed in the round
	// trip that runs it (the extended protocol's unnamed statement), so the
	// store works behind PgBouncer in transaction mode, and no server
	// keeps hundreds of cached statements (one per VALUES size) per
	// connection.
	cfg.DefaultQueryExecMode = pgx.QueryExecModeExec
	options := cfg.RuntimeParams["options"]
	for k, v := range sessionGuards {
		if _, set := cfg.RuntimeParams[k]; !set && !strings.Contains(options, k) {
			cfg.RuntimeParams[k] = v
		}
	}
	// The client side too: a server that vanished is noticed in seconds.
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
	s, err := newStore(ctx, db, postgresDialect, "postgres", location, c.Existing)
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
	lockItems:  "SELECT pg_advisory_xact_lock(7, hashtext($1))",
	nowMS:      "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)",
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
