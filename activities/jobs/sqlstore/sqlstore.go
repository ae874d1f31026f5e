// Package sqlstore implements jobs.Store on SQL: SQLite (embedded, one
// file under a data directory, safe for several worker processes on one
// host) and PostgreSQL (distributed, through pgx). Both share one schema
// and one implementation, made of parts by concern on one core (Store);
// a dialect holds what differs (placeholders, row locks, the sequence
// column).
package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/batoncrawl/baton/activities/jobs"
)

// dialect is what differs between the engines.
type dialect struct {
	name string
	// dollar: placeholders are $1, $2… (PostgreSQL); else ?.
	dollar bool
	// forUpdate is appended to a SELECT of a batch or job row (row
	// locks; empty where the engine locks the whole database per write).
	forUpdate string
	// skipLocked is appended to the frontier hand-out's inner SELECT.
	skipLocked string
	// seqCol orders rows by insertion; seqDDL declares it (", seq …").
	seqCol, seqDDL string
	// rowRef is the column holding a row's physical address, where the
	// hand-out finds the rows it chose by it (PostgreSQL's ctid; empty for
	// SQLite, whose seqCol is that address already).
	rowRef string
	// joinedWrites: the engine takes data-modifying statements in WITH
	// and an INSERT from a VALUES list with named columns (PostgreSQL): a
	// hand-out writes in one statement (handTo, acquire) what SQLite,
	// in-process, writes in several.
	joinedWrites bool
	// pipeline: the engine's driver sends several statements in one
	// round trip (pgx on PostgreSQL: pipeline.go).
	pipeline bool
	// seqIndex follows job in the indexes that order by seqCol (SQLite's
	// rowid is in every index already).
	seqIndex string
	// itemSeqDDL declares baton_items.seq: increasing, never reused.
	itemSeqDDL string
	bigint     string
	blob       string
	// nowMS is the database's clock in ms since the Unix epoch (sink
	// leases: every worker reads the same clock).
	nowMS string
	// lockItems, if set, is run (with the job) before a group commit
	// inserts items, and holds a lock of the job's items up to the
	// commit: the items of a job are then committed in seq order, so a
	// reader never sees an item while one of a lower seq is still to
	// come (a sink's cursor would skip it). SQLite commits one writer at
	// a time.
	lockItems string
	// lockHosts, if set, is an expression that holds the lock of the
	// group's host leases up to the commit (hosts.go); SQLite commits one
	// writer at a time.
	lockHosts string
	// pendingTrigger keeps baton_sink_pending as items are inserted
	// (schema.go): a job's row holds the highest seq of its items.
	pendingTrigger []string
	// lockSchema serialises schema creation among processes.
	lockSchema string
	// serialWrites: one write transaction at a time per process (SQLite
	// has one writer; waiting in Go is cheaper than its busy handler).
	serialWrites bool
	// transient reports errors worth retrying (a server restarting, a
	// lock held by another process); retryFirst and retryMax bound the
	// jittered, doubling wait between tries.
	transient            func(error) bool
	retryFirst, retryMax time.Duration
}

// core is what every part of the store holds: the database and its
// dialect, the store's identity, how writes are retried, and the caches of
// a job's settings, which never change once the job is created.
type core struct {
	db *sql.DB
	d  *dialect
	// guard, if set, is run first in every write transaction: the
	// session guards (guards.go).
	guard string
	// migrationGuard is guard for a schema change's DDL (its own lock
	// and statement timeouts).
	migrationGuard string
	id             jobs.Identity
	writeMu        sync.Mutex
	maxPages       sync.Map // job → int
	policies       sync.Map // job → hostPolicy
	// RetryFor bounds how long a write is retried while the database is
	// unreachable (a PostgreSQL restart); 0 means 30 s.
	RetryFor time.Duration

	// named, on PostgreSQL, names a pipeline's statements (pgnamed.go).
	named *namedStatements
}

// Store is a jobs.Store on a SQL database. It is safe for concurrent use.
// It is made of one part per concern, each behind the narrow interfaces
// of package jobs that use it, all on one core.
type Store struct {
	*core
	*jobStore      // jobs, seeds, counters, control state: job.go, counters.go, control.go
	*frontierStore // the frontier and its batches: batch.go, pull.go, handto.go, pipeline.go, known.go
	*hostStore     // host leases and robots.txt files: hosts.go, leases.go, robots.go
	*resultStore   // group commits and the results they write: record.go, recordpipe.go, results.go
	*itemStore     // user crawlers' items and their sinks: items.go
	*secretStore   // sealed job secrets: secrets.go
	*schemaStore   // the schema and its upgrades: schema.go
}

var _ jobs.Store = (*Store)(nil)

// ErrNoSchema: the database has no Baton schema, or an older one, and the
// store was opened without creating it (Config.Existing).
var ErrNoSchema = errors.New("no Baton schema of this version")

func newStore(ctx context.Context, c *core, engine, location string, existing bool) (*Store, error) {
	s, db := assemble(c), c.db
	fail := func(err error) (*Store, error) {
		db.Close()
		return nil, err
	}
	// The schema is set up once (by the first worker of a version, or
	// `baton store migrate`), not at every open: DDL takes locks that wait
	// for writers and block new ones, and needs rights a reader lacks.
	v, err := s.schemaVersion(ctx)
	if err != nil {
		return fail(fmt.Errorf("%s store %s: read schema version: %w", engine, location, err))
	}
	s.schemaStore.found = v
	switch {
	case v == schemaVersion:
	case v > schemaVersion:
		return fail(fmt.Errorf("%s store %s: schema version %d, this Baton knows %d: upgrade Baton", engine, location, v, schemaVersion))
	case existing:
		what := "no Baton schema"
		if v > 0 {
			what = fmt.Sprintf("Baton schema version %d, this Baton needs %d", v, schemaVersion)
		}
		return fail(fmt.Errorf("%s store %s: %s (is it the workers' store? a worker of this version sets it up when it starts, or run `baton store migrate`): %w",
			engine, location, what, ErrNoSchema))
	default:
		if err := s.migrate(ctx); err != nil {
			return fail(fmt.Errorf("%s store %s: %w", engine, location, err))
		}
	}
	var id string
	if err := s.read(ctx, func() error {
		return db.QueryRowContext(ctx, s.q(`SELECT value FROM baton_store WHERE key = 'id'`)).Scan(&id)
	}); err != nil {
		return fail(fmt.Errorf("%s store %s: read identity: %w", engine, location, err))
	}
	s.id = jobs.Identity{ID: id, Engine: engine, Location: location}
	return s, nil
}

// assemble makes the store's parts on c.
func assemble(c *core) *Store {
	hosts := &hostStore{core: c}
	frontier := &frontierStore{core: c, hosts: hosts}
	return &Store{
		core:          c,
		jobStore:      &jobStore{core: c},
		frontierStore: frontier,
		hostStore:     hosts,
		resultStore:   &resultStore{core: c, frontier: frontier},
		itemStore:     &itemStore{core: c},
		secretStore:   &secretStore{core: c},
		schemaStore:   &schemaStore{core: c},
	}
}

// Identity names the store.
func (s *Store) Identity() jobs.Identity { return s.id }

// DB is the underlying database (for tests and tools, e.g. an integrity
// check).
func (s *Store) DB() *sql.DB { return s.db }

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }
