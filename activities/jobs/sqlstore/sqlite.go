package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"modernc.org/sqlite"
)

// SQLiteFile is the database file of the embedded store in a data
// directory.
const SQLiteFile = "baton.db"

// OpenSQLite opens (creating it) the embedded store in dir/baton.db: WAL
// mode, synchronous=FULL (a killed process or a machine crash loses no
// committed page), a busy timeout so several worker processes on one host
// share it, immediate write transactions, statement journals in memory
// (temp_store: they only undo a statement that fails inside its
// transaction, and a multi-row statement wrote one to a temporary file)
// and its statements kept compiled per connection (sqlitestmts.go). It refuses a directory on a
// network file system, where SQLite's locks are not reliable: use
// PostgreSQL there.
func OpenSQLite(ctx context.Context, dir string) (*Store, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("sqlite store %s: %w", dir, err)
	}
	// The crawl data is the users' business: only the workers' user may
	// read it (a new directory 0700, a new database 0600; SQLite gives
	// its -wal and -shm files the database's mode).
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return nil, fmt.Errorf("sqlite store: data directory %s: %w", abs, err)
	}
	if fs, ok := networkFS(abs); ok {
		return nil, fmt.Errorf("sqlite store: data directory %s is on a network file system (%s), where SQLite's locking is unsafe: "+
			"keep --data-dir on a local disk, or give the workers a shared PostgreSQL with --store postgres://…", abs, fs)
	}
	path := filepath.Join(abs, SQLiteFile)
	if f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o600); err == nil {
		f.Close() // an empty file: SQLite makes it a new database, keeping its mode
	}
	return openSQLiteDSN(ctx, path, sqliteDSN(path))
}

// OpenSQLiteExisting opens the store in dir only if its file exists (for
// read-only commands, which must not create anything).
func OpenSQLiteExisting(ctx context.Context, dir string) (*Store, error) {
	path := filepath.Join(dir, SQLiteFile)
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("no Baton store in %s (%w): set --data-dir to the workers' one, or --store to their PostgreSQL", dir, err)
	}
	return OpenSQLite(ctx, dir)
}

func sqliteDSN(path string) string {
	q := url.Values{}
	for _, p := range []string{"busy_timeout(5)", "journal_mode(WAL)", "synchronous(FULL)", "temp_store(MEMORY)"} {
		q.Add("_pragma", p)
	}
	q.Set("_txlock", "immediate")
	return "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + q.Encode()
}

func openSQLiteDSN(ctx context.Context, path, dsn string) (*Store, error) {
	db, err := sql.Open(cachedSQLite, dsn) // its statements kept: sqlitestmts.go
	if err != nil {
		return nil, fmt.Errorf("sqlite store %s: %w", path, err)
	}
	db.SetMaxOpenConns(8)
	// Kept open, not closed past database/sql's two idle ones: each
	// connection keeps its compiled statements.
	db.SetMaxIdleConns(8)
	// Several workers opening the file at once take turns (a connection
	// sets WAL mode under the file's lock).
	for {
		err := db.PingContext(ctx)
		if err == nil {
			break
		}
		if !sqliteDialect.transient(err) || ctx.Err() != nil {
			db.Close()
			return nil, fmt.Errorf("sqlite store %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(1+rand.IntN(8)) * time.Millisecond):
		}
	}
	return newStore(ctx, &core{db: db, d: sqliteDialect}, "sqlite", path, false)
}

var sqliteDialect = &dialect{
	name:         "sqlite",
	seqCol:       "rowid",
	itemSeqDDL:   "INTEGER PRIMARY KEY AUTOINCREMENT",
	bigint:       "INTEGER",
	nowMS:        "CAST(unixepoch('subsec') * 1000 AS INTEGER)",
	blob:         "BLOB",
	serialWrites: true,
	pendingTrigger: []string{`CREATE TRIGGER IF NOT EXISTS baton_items_pending AFTER INSERT ON baton_items BEGIN
		INSERT INTO baton_sink_pending (job, grp, seq) SELECT NEW.job, grp, NEW.seq FROM baton_jobs WHERE id = NEW.job
		ON CONFLICT (job) DO UPDATE SET seq = MAX(seq, excluded.seq);
	END`},
	// Another process holding the write lock is waited for here, in short
	// jittered steps (SQLite's own busy handler sleeps up to 100 ms at a
	// time, long after a short commit freed the lock).
	retryFirst: time.Millisecond, retryMax: 8 * time.Millisecond,
	transient: func(err error) bool {
		var se *sqlite.Error
		if errors.As(err, &se) {
			switch se.Code() & 0xff {
			case 5, 6: // SQLITE_BUSY, SQLITE_LOCKED
				return true
			}
		}
		return false
	},
}
