package sqlstore

import (
	"context"
	crand "crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/batoncrawl/baton/activities/jobs"
)

// This file holds how the schema is set up or upgraded: its DDL in one
// transaction under the migration's own guards (a short lock timeout,
// tried again a few times, and a long statement timeout), then the rows
// of an older store filled in by lots, each a transaction of its own
// taking row locks only, then the version recorded. An upgrade cut short
// is run again at the next open: every step is idempotent.

// migrationTries is how many times a schema change waits for its locks
// (Guards.MigrationLock each) before it gives up.
const migrationTries = 3

// hostFillRows is how many frontier rows one transaction of the version
// 4 upgrade sets the host of.
const hostFillRows = 1000

func (s *schemaStore) migrate(ctx context.Context) error {
	err := s.migrateDDL(ctx)
	if errors.Is(err, errSchemaCurrent) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := s.fillHosts(ctx); err != nil {
		return err
	}
	if err := s.fillPending(ctx); err != nil {
		return err
	}
	return s.write(ctx, func(tx *sql.Tx) error {
		var v string
		err := tx.QueryRowContext(ctx, `SELECT value FROM baton_store WHERE key = 'schema'`).Scan(&v)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if n, _ := strconv.Atoi(v); n > schemaVersion {
			return fmt.Errorf("store schema version %s, this Baton knows %d: upgrade Baton", v, schemaVersion)
		}
		_, err = tx.ExecContext(ctx, s.q(`INSERT INTO baton_store (key, value) VALUES ('schema', ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value`),
			strconv.Itoa(schemaVersion))
		return err
	})
}

// migrateDDL creates the tables, columns and indexes missing, under the
// migration's guards; a lock not granted in time is waited for again, up
// to migrationTries times in all.
func (s *schemaStore) migrateDDL(ctx context.Context) error {
	tries := 0
	return s.retrying(ctx, func() error {
		err := s.writeOnceGuarded(ctx, s.migrationGuard, func(tx *sql.Tx) error { return s.ddl(ctx, tx) })
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "55P03" {
			if tries++; tries >= migrationTries {
				// Not transient any more: %v ends the retries.
				return fmt.Errorf("upgrade schema: a lock was not granted in time, %d times: another session holds it (a long transaction? see pg_stat_activity and pg_locks): %v",
					tries, err)
			}
		}
		return err
	})
}

// errSchemaCurrent says that another process set the schema up while
// this one waited for the write lock: nothing is left to do.
var errSchemaCurrent = errors.New("schema already current")

// ddl runs the schema's statements in tx, unless the store's version,
// read under tx's write lock, is already current: the processes of a
// fresh group that open the store at once then set it up once, the
// first, instead of each in turn.
func (s *schemaStore) ddl(ctx context.Context, tx *sql.Tx) error {
	if s.d.lockSchema != "" {
		if _, err := tx.ExecContext(ctx, s.d.lockSchema); err != nil {
			return err
		}
	}
	if current, err := s.versionInTx(ctx, tx); err != nil || current {
		if err == nil {
			err = errSchemaCurrent
		}
		return err
	}
	for _, st := range schema(s.d) {
		if _, err := tx.ExecContext(ctx, st); err != nil {
			return fmt.Errorf("create schema: %s: %w", statementHead(st), err)
		}
	}
	for _, c := range upgrades(s.d) {
		if err := s.addColumn(ctx, tx, c); err != nil {
			return err
		}
	}
	for _, st := range upgradedIndexes(s.d) {
		if _, err := tx.ExecContext(ctx, st); err != nil {
			return fmt.Errorf("create schema: %s: %w", statementHead(st), err)
		}
	}
	b := make([]byte, 16)
	_, _ = crand.Read(b)
	_, err := tx.ExecContext(ctx, s.q(`INSERT INTO baton_store (key, value) VALUES ('id', ?) ON CONFLICT (key) DO NOTHING`), hex.EncodeToString(b))
	return err
}

// versionInTx says whether the store's recorded schema version, read in
// tx, is this Baton's.
func (s *schemaStore) versionInTx(ctx context.Context, tx *sql.Tx) (bool, error) {
	q := `SELECT COUNT(*) FROM information_schema.tables WHERE table_name = 'baton_store' AND table_schema = current_schema()`
	if !s.d.dollar {
		q = `SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'baton_store'`
	}
	var n int
	if err := tx.QueryRowContext(ctx, q).Scan(&n); err != nil || n == 0 {
		return false, err
	}
	var v string
	err := tx.QueryRowContext(ctx, `SELECT value FROM baton_store WHERE key = 'schema'`).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return v == strconv.Itoa(schemaVersion), err
}

// statementHead is the first line of a DDL statement (it names the table).
func statementHead(st string) string {
	head, _, _ := strings.Cut(st, "\n")
	return strings.TrimSuffix(strings.TrimSpace(head), " (")
}

// fillHosts sets the host of the frontier rows that have none (rows of a
// store older than version 4), hostFillRows at a time in frontier key
// order, one transaction each (several processes upgrading at once take
// turns); a URL without one keeps ”.
func (s *schemaStore) fillHosts(ctx context.Context) error {
	afterJob, afterURL := "", ""
	for {
		var n int
		var lastJob, lastURL string
		err := s.write(ctx, func(tx *sql.Tx) error {
			if s.d.lockSchema != "" {
				if _, err := tx.ExecContext(ctx, s.d.lockSchema); err != nil {
					return err
				}
			}
			type row struct{ job, url string }
			rows, err := queryTx(ctx, s.core, tx, `SELECT job, url FROM baton_frontier WHERE host = '' AND (job > ? OR (job = ? AND url > ?))
				ORDER BY job, url LIMIT ?`, []any{afterJob, afterJob, afterURL, hostFillRows}, func(rows *sql.Rows) (row, error) {
				var r row
				return r, rows.Scan(&r.job, &r.url)
			})
			if err != nil {
				return err
			}
			var set [][]any
			for _, r := range rows {
				if h := jobs.HostOf(r.url); h != "" {
					set = append(set, []any{r.job, r.url, h})
				}
			}
			for _, st := range s.chunked(`WITH v (job, url, host) AS (VALUES `, nil, `(?, ?, ?)`, `)
				UPDATE baton_frontier SET host = (SELECT v.host FROM v WHERE v.job = baton_frontier.job AND v.url = baton_frontier.url)
				WHERE (job, url) IN (SELECT job, url FROM v)`, set) {
				if _, err := tx.ExecContext(ctx, st.query, st.args...); err != nil {
					return err
				}
			}
			if n = len(rows); n > 0 {
				lastJob, lastURL = rows[n-1].job, rows[n-1].url
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("upgrade schema: frontier hosts: %w", err)
		}
		if n < hostFillRows {
			return nil
		}
		afterJob, afterURL = lastJob, lastURL
	}
}

// pendingSince is the schema version that keeps baton_sink_pending: an
// older store's jobs with items are listed at its upgrade.
const pendingSince = 6

// fillPending lists, for delivery, the jobs of a store older than
// pendingSince that have items (the trigger lists those of the items
// inserted since the upgrade): one statement, reading baton_items' index
// by job; a job whose sinks have all its items is dropped from the list
// by the next worker that delivers its crawler's items.
func (s *schemaStore) fillPending(ctx context.Context) error {
	if s.found == 0 || s.found >= pendingSince {
		return nil
	}
	err := s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO baton_sink_pending (job, grp, seq)
			SELECT i.job, j.grp, MAX(i.seq) FROM baton_items i JOIN baton_jobs j ON j.id = i.job WHERE true GROUP BY i.job, j.grp
			ON CONFLICT (job) DO NOTHING`)
		return err
	})
	if err != nil {
		return fmt.Errorf("upgrade schema: jobs with items to deliver: %w", err)
	}
	return nil
}
