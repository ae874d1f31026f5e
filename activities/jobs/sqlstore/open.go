package sqlstore

import (
	"context"
	"fmt"
	"strings"
)

// Config chooses a job store: PostgreSQL when Store is a postgres:// DSN,
// else the embedded SQLite file under DataDir.
type Config struct {
	// Store is "" (or "sqlite") for SQLite under DataDir, or a
	// postgres://user@host:port/db DSN.
	Store string
	// DataDir holds the SQLite file.
	DataDir string
	// Password replaces the DSN's (read from a file or the environment).
	Password string
	// Existing opens SQLite only if its file exists, and PostgreSQL only
	// if its schema is set up at this version (read-only commands must not
	// create directories, files or tables: ErrNoSchema otherwise).
	Existing bool
	// MaxConns is the size of the PostgreSQL connection pool; 0 means
	// DefaultMaxConns.
	MaxConns int
	// Warm opens the whole PostgreSQL pool at once and keeps it open
	// (connections are still renewed after their lifetime): a worker's
	// first batches do not wait for connections to be set up (a
	// SCRAM handshake costs both sides milliseconds of CPU) at a crawl's
	// start. A CLI command opens only what it uses.
	Warm bool
	// Guards are the timeouts of the store's PostgreSQL transactions; 0s
	// mean DefaultGuards'.
	Guards Guards
}

// Validate names the bad setting.
func (c Config) Validate() error {
	switch {
	case c.Store == "" || c.Store == "sqlite":
		if c.DataDir == "" {
			return fmt.Errorf("data-dir: empty (the SQLite store lives there)")
		}
	case IsPostgresDSN(c.Store):
		if c.MaxConns < 0 {
			return fmt.Errorf("store-max-conns: %d is negative", c.MaxConns)
		}
	default:
		return fmt.Errorf("store: %q: want empty or sqlite (the embedded store under --data-dir), or a postgres://user@host:port/database DSN", redactDSN(c.Store))
	}
	return nil
}

// Open opens the store chosen by c.
func Open(ctx context.Context, c Config) (*Store, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if IsPostgresDSN(c.Store) {
		return openPostgres(ctx, c)
	}
	if c.Existing {
		return OpenSQLiteExisting(ctx, c.DataDir)
	}
	return OpenSQLite(ctx, c.DataDir)
}

// redactDSN hides a password written in a DSN.
func redactDSN(dsn string) string {
	scheme, rest, ok := strings.Cut(dsn, "://")
	if !ok {
		return dsn
	}
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return dsn
	}
	user, _, hasPw := strings.Cut(rest[:at], ":")
	if !hasPw {
		return dsn
	}
	return scheme + "://" + user + ":***" + rest[at:]
}
