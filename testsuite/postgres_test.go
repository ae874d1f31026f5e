package testsuite

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

func pgConnect(t *testing.T, ctx context.Context, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect %s: %v", dsn, err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func pgIDs(t *testing.T, ctx context.Context, conn *pgx.Conn) []int {
	t.Helper()
	rows, err := conn.Query(ctx, "SELECT id FROM items ORDER BY id")
	if err != nil {
		t.Fatalf("select: %v", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		t.Fatalf("select: %v", err)
	}
	return ids
}

// TestPostgresKillRestart checks that committed rows survive a SIGKILL of
// the server and uncommitted ones do not, and that Stop/Restart keep the
// data, address and credentials.
func TestPostgresKillRestart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pg := StartPostgres(t)
	dsn, addr := pg.DSN(), pg.Address()

	conn := pgConnect(t, ctx, dsn)
	if _, err := conn.Exec(ctx, "CREATE TABLE items (id int PRIMARY KEY)"); err != nil {
		t.Fatalf("create table: %v", err)
	}
	if _, err := conn.Exec(ctx, "INSERT INTO items VALUES (1)"); err != nil {
		t.Fatalf("insert: %v", err)
	}
	// A transaction still open at the crash must be rolled back.
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatalf("begin: %v", err)
	}
	if _, err := tx.Exec(ctx, "INSERT INTO items VALUES (2)"); err != nil {
		t.Fatalf("insert in tx: %v", err)
	}

	pg.Kill()
	if p := pg.Process(); !p.Exited() {
		t.Fatalf("postmaster still running after Kill")
	}
	if procs := pg.serverProcesses(); len(procs) > 0 {
		t.Fatalf("server processes %v still running after Kill", procs)
	}
	if err := conn.Ping(ctx); err == nil {
		t.Fatalf("ping succeeded after Kill")
	}

	pg.Restart()
	if pg.DSN() != dsn || pg.Address() != addr {
		t.Fatalf("after restart DSN %s, address %s; want %s, %s", pg.DSN(), pg.Address(), dsn, addr)
	}
	conn = pgConnect(t, ctx, dsn)
	if got := pgIDs(t, ctx, conn); !slices.Equal(got, []int{1}) {
		t.Fatalf("after kill and restart: ids %v, want [1]", got)
	}
	if _, err := conn.Exec(ctx, "INSERT INTO items VALUES (3)"); err != nil {
		t.Fatalf("insert after restart: %v", err)
	}

	pg.Stop()
	pg.Stop() // no-op
	pg.Restart()
	conn = pgConnect(t, ctx, dsn)
	if got := pgIDs(t, ctx, conn); !slices.Equal(got, []int{1, 3}) {
		t.Fatalf("after stop and restart: ids %v, want [1 3]", got)
	}
}

// TestPostgresAuth checks that DSN carries working credentials and that a
// wrong password is refused.
func TestPostgresAuth(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pg := StartPostgres(t)

	conn := pgConnect(t, ctx, pg.DSN())
	var user, db string
	var super bool
	if err := conn.QueryRow(ctx, "SELECT current_user, current_database(), usesuper FROM pg_user WHERE usename = current_user").
		Scan(&user, &db, &super); err != nil {
		t.Fatalf("query: %v", err)
	}
	if user != pg.User() || db != "baton" || super {
		t.Fatalf("connected as %s to %s (superuser %v); want %s to baton, no superuser", user, db, super, pg.User())
	}
	var maxConns string
	if err := conn.QueryRow(ctx, "SHOW max_connections").Scan(&maxConns); err != nil || maxConns != "200" {
		t.Fatalf("max_connections = %q (%v), want 200", maxConns, err)
	}
	var fsync string
	if err := conn.QueryRow(ctx, "SHOW fsync").Scan(&fsync); err != nil || fsync != "on" {
		t.Fatalf("fsync = %q (%v), want on", fsync, err)
	}

	u, err := url.Parse(pg.DSN())
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(pg.User(), pg.Password()+"-wrong")
	bad, err := pgx.Connect(ctx, u.String())
	if err == nil {
		bad.Close(ctx)
		t.Fatalf("connected with a wrong password")
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "28P01" { // invalid_password
		t.Fatalf("wrong password: got %v, want SQLSTATE 28P01", err)
	}
}
