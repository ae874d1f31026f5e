package testsuite

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// This file holds what runs as the superuser, over the unix socket: the
// bootstrap of the client role and database, and the tests' inspections.

// adminConn connects as the superuser over the unix socket.
func (pg *Postgres) adminConn(ctx context.Context) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig("sslmode=disable")
	if err != nil {
		return nil, err
	}
	// Override whatever PG* environment variables ParseConfig picked up.
	cfg.Host = pg.sockDir
	cfg.Port = uint16(pg.port)
	cfg.User = pgSuperuser
	cfg.Password = ""
	cfg.Database = "postgres"
	cfg.TLSConfig = nil
	cfg.Fallbacks = nil
	return pgx.ConnectConfig(ctx, cfg)
}

// bootstrap creates the client role and its database, then checks that
// DSN works (password authentication over TCP).
func (pg *Postgres) bootstrap() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pg.adminConn(ctx)
	if err != nil {
		return fmt.Errorf("bootstrap: connect as %s: %w", pgSuperuser, err)
	}
	defer conn.Close(context.Background())
	for _, stmt := range []string{
		fmt.Sprintf("CREATE ROLE %s LOGIN CREATEDB PASSWORD '%s'", pgx.Identifier{pgUser}.Sanitize(), pgPassword),
		fmt.Sprintf("CREATE DATABASE %s OWNER %s", pgx.Identifier{pgDatabase}.Sanitize(), pgx.Identifier{pgUser}.Sanitize()),
	} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("bootstrap: %s: %w", stmt, err)
		}
	}
	pg.mu.Lock()
	pg.bootstrapped = true
	pg.mu.Unlock()
	if err := pg.ping(); err != nil {
		return fmt.Errorf("bootstrap: connect with %s: %w", pg.DSN(), err)
	}
	return nil
}

// Deadlocks waits until no session of the client user is left (so every
// backend has flushed its statistics: close the stores first), then
// returns pg_stat_database.deadlocks of the client database: how many
// deadlocks PostgreSQL detected there since the server was initialised,
// however the clients retried them.
func (pg *Postgres) Deadlocks(t testing.TB) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pg.adminConn(ctx)
	if err != nil {
		t.Fatalf("testsuite: postgres: deadlocks: connect: %v", err)
	}
	defer conn.Close(context.Background())
	for {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE usename = $1`, pgUser).Scan(&n); err != nil {
			t.Fatalf("testsuite: postgres: deadlocks: sessions: %v", err)
		}
		if n == 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("testsuite: postgres: deadlocks: %d sessions of %s still open after 30 s (close every store first)", n, pgUser)
		case <-time.After(20 * time.Millisecond):
		}
	}
	var d int64
	if err := conn.QueryRow(ctx, `SELECT deadlocks FROM pg_stat_database WHERE datname = $1`, pgDatabase).Scan(&d); err != nil {
		t.Fatalf("testsuite: postgres: deadlocks: %v", err)
	}
	return d
}

// Admin runs statements as the superuser in the client database (e.g. to
// make a read-only role for a test).
func (pg *Postgres) Admin(t testing.TB, stmts ...string) {
	t.Helper()
	pg.inClientDB(t, func(ctx context.Context, db *pgx.Conn) {
		for _, s := range stmts {
			if _, err := db.Exec(ctx, s); err != nil {
				t.Fatalf("testsuite: postgres: admin: %s: %v", s, err)
			}
		}
	})
}

// AdminInt runs a query returning one integer as the superuser in the
// client database (e.g. a counter of PostgreSQL's statistics views).
func (pg *Postgres) AdminInt(t testing.TB, query string, args ...any) int64 {
	t.Helper()
	var n int64
	pg.inClientDB(t, func(ctx context.Context, db *pgx.Conn) {
		if err := db.QueryRow(ctx, query, args...).Scan(&n); err != nil {
			t.Fatalf("testsuite: postgres: admin: %s: %v", query, err)
		}
	})
	return n
}

// AdminText runs a query returning one text value as the superuser in
// the client database.
func (pg *Postgres) AdminText(t testing.TB, query string, args ...any) string {
	t.Helper()
	var v string
	pg.inClientDB(t, func(ctx context.Context, db *pgx.Conn) {
		if err := db.QueryRow(ctx, query, args...).Scan(&v); err != nil {
			t.Fatalf("testsuite: postgres: admin: %s: %v", query, err)
		}
	})
	return v
}

// inClientDB runs fn on a superuser connection to the client database,
// with a context of 30 s.
func (pg *Postgres) inClientDB(t testing.TB, fn func(context.Context, *pgx.Conn)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pg.adminConn(ctx)
	if err != nil {
		t.Fatalf("testsuite: postgres: admin: connect: %v", err)
	}
	defer conn.Close(context.Background())
	cfg := conn.Config().Copy()
	cfg.Database = pgDatabase
	db, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("testsuite: postgres: admin: connect to %s: %v", pgDatabase, err)
	}
	defer db.Close(context.Background())
	fn(ctx, db)
}

// Sessions counts the open sessions of a user.
func (pg *Postgres) Sessions(t testing.TB, user string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pg.adminConn(ctx)
	if err != nil {
		t.Fatalf("testsuite: postgres: sessions: %v", err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE usename = $1`, user).Scan(&n); err != nil {
		t.Fatalf("testsuite: postgres: sessions: %v", err)
	}
	return n
}
