// Package sqlstore implements jobs.Store on SQL: SQLite (embedded, one
// file under a data directory, safe for several worker processes on one
// host) and PostgreSQL (distributed, through pgx). Both share one schema
// and one implementation; a dialect holds what differs (placeholders, row
// locks, the sequence column).
package sqlstore

import (
	"context"
	crand "crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
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
	// seqIndex follows job in the indexes that order by seqCol (SQLite's
	// rowid is in every index already).
	seqIndex string
	bigint   string
	blob     string
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

// Store is a jobs.Store on a SQL database. It is safe for concurrent use.
type Store struct {
	db       *sql.DB
	d        *dialect
	id       jobs.Identity
	writeMu  sync.Mutex
	found    int      // the schema version found at the open (0: none)
	maxPages sync.Map // job → int (immutable once created)
	// RetryFor bounds how long a write is retried while the database is
	// unreachable (a PostgreSQL restart); 0 means 30 s.
	RetryFor time.Duration
}

var _ jobs.Store = (*Store)(nil)

// ErrNoSchema: the database has no Baton schema, or an older one, and the
// store was opened without creating it (Config.Existing).
var ErrNoSchema = errors.New("no Baton schema of this version")

func newStore(ctx context.Context, db *sql.DB, d *dialect, engine, location string, existing bool) (*Store, error) {
	s := &Store{db: db, d: d}
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
	s.found = v
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

// schemaVersion reads the store's schema version: 0 when it has none.
func (s *Store) schemaVersion(ctx context.Context) (int, error) {
	var v string
	err := s.read(ctx, func() error {
		var n int
		// Whether baton_store exists, without an error that would abort a
		// transaction or need a right a reader lacks.
		q := `SELECT COUNT(*) FROM information_schema.tables WHERE table_name = 'baton_store' AND table_schema = current_schema()`
		if !s.d.dollar {
			q = `SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'baton_store'`
		}
		if err := s.db.QueryRowContext(ctx, q).Scan(&n); err != nil || n == 0 {
			v = ""
			return err
		}
		err := s.db.QueryRowContext(ctx, `SELECT value FROM baton_store WHERE key = 'schema'`).Scan(&v)
		if errors.Is(err, sql.ErrNoRows) {
			v, err = "", nil
		}
		return err
	})
	if err != nil || v == "" {
		return 0, err
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("schema version %q is not a number", v)
	}
	return n, nil
}

// SchemaVersion is the schema version this Baton sets up.
func (s *Store) SchemaVersion() int { return schemaVersion }

// Migrate creates the schema, or upgrades an older one, and returns the
// version the store had when it was opened (0: none; an open without
// Config.Existing has upgraded it already). Safe to run from several processes at
// once, and again.
func (s *Store) Migrate(ctx context.Context) (from int, err error) {
	v, err := s.schemaVersion(ctx)
	if err != nil || v == schemaVersion {
		return s.found, err
	}
	return s.found, s.migrate(ctx)
}

func (s *Store) migrate(ctx context.Context) error {
	return s.write(ctx, func(tx *sql.Tx) error {
		if s.d.lockSchema != "" {
			if _, err := tx.ExecContext(ctx, s.d.lockSchema); err != nil {
				return err
			}
		}
		for _, st := range schema(s.d) {
			if _, err := tx.ExecContext(ctx, st); err != nil {
				return fmt.Errorf("create schema: %w", err)
			}
		}
		b := make([]byte, 16)
		_, _ = crand.Read(b)
		if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO baton_store (key, value) VALUES ('id', ?) ON CONFLICT (key) DO NOTHING`), hex.EncodeToString(b)); err != nil {
			return err
		}
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

// q rewrites ? placeholders for the dialect.
func (s *Store) q(query string) string {
	if !s.d.dollar {
		return query
	}
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// write runs fn in a write transaction, retrying while the database is
// unreachable or a transaction conflicted. fn must be idempotent (every
// write here is: a retried commit whose outcome was unknown finds its rows
// written and changes nothing).
func (s *Store) write(ctx context.Context, fn func(*sql.Tx) error) error {
	retryFor := s.RetryFor
	if retryFor == 0 {
		retryFor = 30 * time.Second
	}
	deadline := time.Now().Add(retryFor)
	backoff := s.d.retryFirst
	for {
		err := s.writeOnce(ctx, fn)
		if err == nil || !s.d.transient(err) || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		t := time.NewTimer(backoff/2 + rand.N(backoff/2+1)) // jittered: writers in other processes retry too
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		backoff = min(2*backoff, s.d.retryMax)
	}
}

func (s *Store) writeOnce(ctx context.Context, fn func(*sql.Tx) error) (err error) {
	if s.d.serialWrites {
		s.writeMu.Lock()
		defer s.writeMu.Unlock()
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if err = fn(tx); err != nil {
		return err
	}
	return tx.Commit()
}

// read retries a read while the database is unreachable.
func (s *Store) read(ctx context.Context, fn func() error) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := fn()
		if err == nil || !s.d.transient(err) || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(s.d.retryMax):
		}
	}
}

// Identity names the store.
func (s *Store) Identity() jobs.Identity { return s.id }

// DB is the underlying database (for tests and tools, e.g. an integrity
// check).
func (s *Store) DB() *sql.DB { return s.db }

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

type counts struct{ seen, taken, requeued, recorded, failed int }

func (s *Store) count(ctx context.Context, tx *sql.Tx, job, shard string, c counts) error {
	if c == (counts{}) {
		return nil
	}
	_, err := tx.ExecContext(ctx, s.q(`INSERT INTO baton_counters (job, shard, seen, taken, requeued, recorded, failed)
		VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (job, shard) DO UPDATE SET
			seen = baton_counters.seen + excluded.seen,
			taken = baton_counters.taken + excluded.taken,
			requeued = baton_counters.requeued + excluded.requeued,
			recorded = baton_counters.recorded + excluded.recorded,
			failed = baton_counters.failed + excluded.failed`),
		job, shard, c.seen, c.taken, c.requeued, c.recorded, c.failed)
	return err
}

type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func (s *Store) sums(ctx context.Context, q querier, job string) (counts, error) {
	var c counts
	err := q.QueryRowContext(ctx, s.q(`SELECT COALESCE(SUM(seen), 0), COALESCE(SUM(taken), 0), COALESCE(SUM(requeued), 0),
		COALESCE(SUM(recorded), 0), COALESCE(SUM(failed), 0) FROM baton_counters WHERE job = ?`), job).
		Scan(&c.seen, &c.taken, &c.requeued, &c.recorded, &c.failed)
	return c, err
}

func stats(c counts, maxPages int) jobs.Stats {
	st := jobs.Stats{Seen: c.seen, Queued: c.seen - c.taken + c.requeued, Recorded: c.recorded, Failed: c.failed}
	if maxPages > 0 {
		st.Seen = min(st.Seen, maxPages)
		st.Queued = max(0, min(st.Queued, maxPages-(c.taken-c.requeued)))
	}
	return st
}

// returning runs a statement over rows in chunks (head with headArgs,
// then one tuple per row, then tail, which ends in "RETURNING url") and
// returns the URLs it reports, so one statement serves many rows.
func (s *Store) returning(ctx context.Context, tx *sql.Tx, head string, headArgs []any, tuple, tail string, rows [][]any) (map[string]bool, error) {
	const chunk = 200
	out := map[string]bool{}
	for len(rows) > 0 {
		n := min(chunk, len(rows))
		var b strings.Builder
		b.WriteString(head)
		args := append([]any(nil), headArgs...)
		for i, r := range rows[:n] {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(tuple)
			args = append(args, r...)
		}
		b.WriteString(tail)
		res, err := tx.QueryContext(ctx, s.q(b.String()), args...)
		if err != nil {
			return nil, err
		}
		for res.Next() {
			var u string
			if err := res.Scan(&u); err != nil {
				res.Close()
				return nil, err
			}
			out[u] = true
		}
		res.Close()
		if err := res.Err(); err != nil {
			return nil, err
		}
		rows = rows[n:]
	}
	return out, nil
}

// insertEntries queues entries new to the job's frontier and returns how
// many were new.
func (s *Store) insertEntries(ctx context.Context, tx *sql.Tx, job string, entries []jobs.Entry) (int, error) {
	rows := make([][]any, len(entries))
	for i, e := range entries {
		if err := jobs.CheckURLLength(e.URL); err != nil {
			return 0, fmt.Errorf("queue URLs: %w", err)
		}
		rows[i] = []any{job, e.URL, e.Depth}
	}
	added, err := s.returning(ctx, tx, `INSERT INTO baton_frontier (job, url, depth, state) VALUES `, nil, "(?, ?, ?, 0)",
		` ON CONFLICT (job, url) DO NOTHING RETURNING url`, rows)
	if err != nil {
		return 0, fmt.Errorf("queue URLs: %w", err)
	}
	return len(added), nil
}

// CreateJob stores the job and queues its seeds; idempotent.
func (s *Store) CreateJob(ctx context.Context, spec jobs.Spec, seeds []jobs.Entry) (jobs.Stats, error) {
	if err := jobs.ValidID(spec.ID); err != nil {
		return jobs.Stats{}, err
	}
	data, err := json.Marshal(spec)
	if err != nil {
		return jobs.Stats{}, err
	}
	err = s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, s.q(`INSERT INTO baton_jobs (id, grp, spec, max_pages, created_ms) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (id) DO NOTHING`), spec.ID, spec.Group, string(data), spec.MaxPages, time.Now().UnixMilli())
		if err != nil {
			return fmt.Errorf("create job %s: %w", spec.ID, err)
		}
		if k, _ := res.RowsAffected(); k == 0 {
			// Created before: by a retry of this call (same spec), or
			// another job under the same ID.
			var grp, stored string
			if err := tx.QueryRowContext(ctx, s.q(`SELECT grp, spec FROM baton_jobs WHERE id = ?`), spec.ID).Scan(&grp, &stored); err != nil {
				return err
			}
			if stored != string(data) {
				return fmt.Errorf("job %s in %s was created by group %s with another spec: %w", spec.ID, s.id, grp, jobs.ErrJobExists)
			}
			return nil
		}
		added, err := s.insertEntries(ctx, tx, spec.ID, seeds)
		if err != nil {
			return err
		}
		return s.count(ctx, tx, spec.ID, "~start", counts{seen: added})
	})
	if err != nil {
		return jobs.Stats{}, err
	}
	return s.Stats(ctx, spec.ID)
}

// AddSeeds queues more seeds of a stored job (see jobs.Store).
func (s *Store) AddSeeds(ctx context.Context, job string, seeds []jobs.Entry) (int, error) {
	if _, err := s.jobMaxPages(ctx, s.db, job); err != nil {
		return 0, err
	}
	n := 0
	err := s.write(ctx, func(tx *sql.Tx) error {
		added, err := s.insertEntries(ctx, tx, job, seeds)
		if err != nil {
			return err
		}
		n = added
		return s.count(ctx, tx, job, "~start", counts{seen: added})
	})
	return n, err
}

// Spec returns a job's spec.
func (s *Store) Spec(ctx context.Context, job string) (jobs.Spec, error) {
	var data string
	err := s.read(ctx, func() error {
		return s.db.QueryRowContext(ctx, s.q(`SELECT spec FROM baton_jobs WHERE id = ?`), job).Scan(&data)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return jobs.Spec{}, fmt.Errorf("job %s in %s: %w", job, s.id, jobs.ErrNoJob)
	}
	if err != nil {
		return jobs.Spec{}, fmt.Errorf("job %s: %w", job, err)
	}
	spec, err := jobs.DecodeSpec([]byte(data))
	if err != nil {
		return spec, fmt.Errorf("job %s in %s: %w", job, s.id, err)
	}
	return spec, nil
}

func (s *Store) jobMaxPages(ctx context.Context, q querier, job string) (int, error) {
	if v, ok := s.maxPages.Load(job); ok {
		return v.(int), nil
	}
	var n int
	err := q.QueryRowContext(ctx, s.q(`SELECT max_pages FROM baton_jobs WHERE id = ?`), job).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("job %s in %s: %w", job, s.id, jobs.ErrNoJob)
	}
	if err != nil {
		return 0, err
	}
	s.maxPages.Store(job, n)
	return n, nil
}

func (s *Store) batchRow(ctx context.Context, q querier, job, id, lock string) (jobs.BatchInfo, error) {
	b := jobs.BatchInfo{Job: job, ID: id}
	err := q.QueryRowContext(ctx, s.q(`SELECT holder, epoch, size, state, error FROM baton_batches WHERE job = ? AND id = ?`+lock), job, id).
		Scan(&b.Holder, &b.Epoch, &b.Size, &b.State, &b.Error)
	if errors.Is(err, sql.ErrNoRows) {
		return b, fmt.Errorf("job %s batch %s: %w", job, id, jobs.ErrNoBatch)
	}
	return b, err
}

// TakeBatch hands out up to n queued URLs as batch id; idempotent per id.
func (s *Store) TakeBatch(ctx context.Context, job, id string, n int) (jobs.BatchInfo, error) {
	var out jobs.BatchInfo
	err := s.write(ctx, func(tx *sql.Tx) error {
		b, err := s.batchRow(ctx, tx, job, id, "")
		if err == nil {
			out = b
			return nil
		}
		if !errors.Is(err, jobs.ErrNoBatch) {
			return err
		}
		out = jobs.BatchInfo{Job: job, ID: id, State: jobs.BatchRunning}
		taken, err := s.handOut(ctx, tx, job, id, "~assign", n)
		if err != nil || len(taken) == 0 {
			return err
		}
		out.Size = len(taken)
		if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO baton_batches (job, id, holder, epoch, size, state) VALUES (?, ?, '', 0, ?, ?)`),
			job, id, out.Size, jobs.BatchRunning); err != nil {
			return fmt.Errorf("take batch %s: %w", id, err)
		}
		return nil
	})
	return out, err
}

// handOut moves up to n queued URLs of job into batch id (within
// max_pages URLs handed out in all), counts them as taken by shard, and
// returns them in frontier order.
func (s *Store) handOut(ctx context.Context, tx *sql.Tx, job, id, shard string, n int) ([]jobs.Entry, error) {
	maxPages, err := s.jobMaxPages(ctx, tx, job)
	if err != nil {
		return nil, err
	}
	if maxPages > 0 {
		if s.d.forUpdate != "" {
			// Serialise the job's hand-outs: two transactions reading the
			// same counters would both take the remainder and hand out
			// more than max_pages URLs. (SQLite has one writer.)
			var one int
			if err := tx.QueryRowContext(ctx, s.q(`SELECT 1 FROM baton_jobs WHERE id = ?`+s.d.forUpdate), job).Scan(&one); err != nil {
				return nil, fmt.Errorf("hand out job %s: lock the job: %w", job, err)
			}
		}
		c, err := s.sums(ctx, tx, job) // a new snapshot, after the lock
		if err != nil {
			return nil, err
		}
		n = min(n, maxPages-(c.taken-c.requeued))
	}
	if n <= 0 {
		return nil, nil
	}
	rows, err := tx.QueryContext(ctx, s.q(`UPDATE baton_frontier SET state = 1, batch = ?
		WHERE job = ? AND url IN (SELECT url FROM baton_frontier WHERE job = ? AND state = 0
			ORDER BY `+s.d.seqCol+` LIMIT ?`+s.d.skipLocked+`)
		RETURNING url, depth`), id, job, job, n)
	if err != nil {
		return nil, fmt.Errorf("hand out job %s batch %s: %w", job, id, err)
	}
	var out []jobs.Entry
	for rows.Next() {
		var e jobs.Entry
		if err := rows.Scan(&e.URL, &e.Depth); err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, e)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, s.count(ctx, tx, job, shard, counts{taken: len(out)})
}

// Extend moves up to n more queued URLs into a running batch held at
// epoch (a Runner pulling work as it frees slots).
func (s *Store) Extend(ctx context.Context, job, id string, epoch int64, n int) ([]jobs.Entry, error) {
	var out []jobs.Entry
	err := s.write(ctx, func(tx *sql.Tx) error {
		out = nil
		b, err := s.checkEpoch(ctx, tx, job, id, epoch, s.d.forUpdate)
		if err != nil {
			return err
		}
		if err := s.checkRunning(ctx, tx, job); err != nil { // paused or cancelled: control.go
			return err
		}
		// Counted on a row of its own, not the holder's: a group commit of
		// the holder holds that one while it queues for the batch's lock,
		// which this transaction holds.
		if out, err = s.handOut(ctx, tx, job, id, b.Holder+"/pull", n); err != nil || len(out) == 0 {
			return err
		}
		_, err = tx.ExecContext(ctx, s.q(`UPDATE baton_batches SET size = size + ? WHERE job = ? AND id = ?`), len(out), job, id)
		return err
	})
	return out, err
}

// Claim makes holder the batch's holder at epoch.
func (s *Store) Claim(ctx context.Context, job, id, holder string, epoch int64) (jobs.BatchInfo, error) {
	var out jobs.BatchInfo
	err := s.write(ctx, func(tx *sql.Tx) error {
		b, err := s.batchRow(ctx, tx, job, id, s.d.forUpdate)
		if err != nil {
			return err
		}
		out = b
		if b.State != jobs.BatchRunning || b.Epoch == epoch && b.Holder == holder {
			return nil
		}
		if b.Epoch >= epoch {
			return fmt.Errorf("claim job %s batch %s for %s at epoch %d: held by %s at epoch %d: %w",
				job, id, holder, epoch, b.Holder, b.Epoch, jobs.ErrStale)
		}
		if _, err := tx.ExecContext(ctx, s.q(`UPDATE baton_batches SET holder = ?, epoch = ? WHERE job = ? AND id = ?`),
			holder, epoch, job, id); err != nil {
			return err
		}
		out.Holder, out.Epoch = holder, epoch
		return nil
	})
	return out, err
}

// Entries lists a batch's URLs.
func (s *Store) Entries(ctx context.Context, job, id string) ([]jobs.BatchEntry, error) {
	return queryAll(ctx, s, `SELECT url, depth, state FROM baton_frontier WHERE job = ? AND batch = ? ORDER BY `+s.d.seqCol,
		[]any{job, id}, func(rows *sql.Rows) (jobs.BatchEntry, error) {
			var e jobs.BatchEntry
			var state int
			err := rows.Scan(&e.URL, &e.Depth, &state)
			e.Done = state == 2
			return e, err
		})
}

// Unfinished lists a batch's URLs not finished yet (see jobs.Store).
func (s *Store) Unfinished(ctx context.Context, job, id string) ([]jobs.Entry, error) {
	return queryAll(ctx, s, `SELECT url, depth FROM baton_frontier WHERE job = ? AND batch = ? AND state = 1 ORDER BY `+s.d.seqCol,
		[]any{job, id}, func(rows *sql.Rows) (jobs.Entry, error) {
			var e jobs.Entry
			err := rows.Scan(&e.URL, &e.Depth)
			return e, err
		})
}

func (s *Store) checkEpoch(ctx context.Context, tx *sql.Tx, job, id string, epoch int64, lock string) (jobs.BatchInfo, error) {
	b, err := s.batchRow(ctx, tx, job, id, lock)
	if err != nil {
		return b, err
	}
	if b.Epoch != epoch || b.State != jobs.BatchRunning {
		return b, fmt.Errorf("job %s batch %s: write at epoch %d refused: batch is %s, held by %s at epoch %d: %w",
			job, id, epoch, b.State, b.Holder, b.Epoch, jobs.ErrStale)
	}
	return b, nil
}

// Record writes one finished URL of a batch (see jobs.Store).
func (s *Store) Record(ctx context.Context, r jobs.Record) (jobs.Recorded, error) {
	out, err := s.RecordAll(ctx, []jobs.Record{r})
	if err != nil {
		return jobs.Recorded{}, err
	}
	return out[0], nil
}

// RecordAll writes finished URLs of one batch at one epoch in one
// transaction (a group commit: one fsync for them all); see Record.
func (s *Store) RecordAll(ctx context.Context, rs []jobs.Record) ([]jobs.Recorded, error) {
	if len(rs) == 0 {
		return nil, nil
	}
	job, batch, epoch := rs[0].Job, rs[0].Batch, rs[0].Epoch
	for _, r := range rs {
		if r.Job != job || r.Batch != batch || r.Epoch != epoch {
			return nil, fmt.Errorf("record: %s/%s@%d and %s/%s@%d in one call: one batch at one epoch per call", job, batch, epoch, r.Job, r.Batch, r.Epoch)
		}
	}
	out := make([]jobs.Recorded, len(rs))
	// The links of the group, each once, owned by the first page that
	// found it, in URL order.
	var links [][]any
	owner := map[string]int{}
	refused := map[int][]jobs.RefusedLink{}
	for i, r := range rs {
		for _, l := range r.Links {
			if err := jobs.CheckURLLength(l.URL); err != nil {
				refused[i] = append(refused[i], jobs.RefusedLink{URL: l.URL[:256], Reason: err.Error()})
				continue
			}
			if _, ok := owner[l.URL]; !ok {
				owner[l.URL] = i
				links = append(links, []any{job, l.URL, l.Depth})
			}
		}
	}
	slices.SortFunc(links, func(a, b []any) int { return strings.Compare(a[1].(string), b[1].(string)) })
	urls := make([][]any, len(rs))
	for i, r := range rs {
		urls[i] = []any{r.URL}
	}
	slices.SortFunc(urls, func(a, b []any) int { return strings.Compare(a[0].(string), b[0].(string)) })
	err := s.write(ctx, func(tx *sql.Tx) error {
		clear(out)
		// One statement per kind of row for the whole group, not per page,
		// and every kind of row taken in one order by every recording, so
		// no two recordings ever wait for each other in a cycle:
		//  1. the links, new frontier rows, in URL order. An insert waits
		//     only for a transaction that inserted or changed the same URL:
		//     another recording's new link (URL order: no cycle), or a
		//     recording, hand-out or re-queue past this step, which waits
		//     for nothing this transaction holds;
		//  2. the group's own URLs finished, in URL order (rows no other
		//     recording holds: they are this batch's);
		//  3. hashes (hash order), results (the group's own URLs), the
		//     writer's counter row, and last the batch row.
		// (Finishing the own URLs before the links, as before, made two
		// groups whose pages link to each other wait in a cycle: each held
		// its own finished row the other's link insert waited for.)
		var c counts
		if len(links) > 0 {
			queue := links
			maxPages, err := s.jobMaxPages(ctx, tx, job)
			if err != nil {
				return err
			}
			if maxPages > 0 {
				// URLs beyond max_pages are never handed out (handOut
				// counts exactly): once max_pages URLs are seen, queue no
				// more. Until then every new link is queued, so known
				// links never use up the quota of new ones.
				sc, err := s.sums(ctx, tx, job)
				if err != nil {
					return err
				}
				if sc.seen >= maxPages {
					queue = nil
				}
			}
			added, err := s.returning(ctx, tx, `INSERT INTO baton_frontier (job, url, depth, state) VALUES `, nil, "(?, ?, ?, 0)",
				` ON CONFLICT (job, url) DO NOTHING RETURNING url`, queue)
			if err != nil {
				return fmt.Errorf("record: queue links: %w", err)
			}
			for u := range added {
				out[owner[u]].Added++
			}
			c.seen = len(added)
		}
		finished, err := s.returning(ctx, tx, `UPDATE baton_frontier SET state = 2 WHERE job = ? AND batch = ? AND state = 1 AND url IN (`,
			[]any{job, batch}, "?", `) RETURNING url`, urls)
		if err != nil {
			return fmt.Errorf("record: finish URLs: %w", err)
		}
		dups, err := s.duplicates(ctx, tx, job, rs, finished)
		if err != nil {
			return fmt.Errorf("record: body hashes: %w", err)
		}
		var results, bodies [][]any
		for i, r := range rs {
			if !finished[r.URL] || r.Page == nil {
				continue // finished before (a retried write), or no page
			}
			failed := 0
			if r.Page.Error != "" {
				failed = 1
			}
			p := *r.Page // the caller's record is left as it is
			p.DuplicateOf = dups[i]
			p.LinksRefused = append(p.LinksRefused[:len(p.LinksRefused):len(p.LinksRefused)], refused[i]...)
			rec, err := json.Marshal(&p)
			if err != nil {
				return fmt.Errorf("record %s: %w", r.URL, err)
			}
			results = append(results, []any{job, r.URL, batch, failed, string(rec)})
			if r.Body != nil {
				bodies = append(bodies, []any{job, r.URL, r.Body})
			}
		}
		slices.SortFunc(results, func(a, b []any) int { return strings.Compare(a[1].(string), b[1].(string)) })
		wrote, err := s.returning(ctx, tx, `INSERT INTO baton_results (job, url, batch, failed, record) VALUES `, nil, "(?, ?, ?, ?, ?)",
			` ON CONFLICT (job, url) DO NOTHING RETURNING url`, results)
		if err != nil {
			return fmt.Errorf("record: results: %w", err)
		}
		if len(bodies) > 0 {
			slices.SortFunc(bodies, func(a, b []any) int { return strings.Compare(a[1].(string), b[1].(string)) })
			if _, err := s.returning(ctx, tx, `INSERT INTO baton_bodies (job, url, body) VALUES `, nil, "(?, ?, ?)",
				` ON CONFLICT (job, url) DO NOTHING RETURNING url`, bodies); err != nil {
				return fmt.Errorf("record: bodies: %w", err)
			}
		}
		for i, r := range rs {
			if finished[r.URL] && r.Page != nil && wrote[r.URL] {
				out[i].Wrote = true
				c.recorded++
				if r.Page.Error != "" {
					c.failed++
				}
			}
		}
		if err := s.count(ctx, tx, job, rs[0].Runner, c); err != nil {
			return err
		}
		// FOR UPDATE, not FOR SHARE: PostgreSQL grants a share lock next
		// to other share lockers ahead of a queued FOR UPDATE, so a holder
		// recording from several goroutines would starve the Claim or
		// Requeue that fences it. Held from here to the commit, so no
		// group commits after a Claim or Requeue raised the epoch.
		_, err = s.checkEpoch(ctx, tx, job, batch, epoch, s.d.forUpdate)
		return err
	})
	return out, err
}

// duplicates claims the body hashes of the group's new pages fetched
// without error (the first page of a hash owns it, in baton_hashes) and
// returns, by index in rs, the URL each duplicate duplicates.
func (s *Store) duplicates(ctx context.Context, tx *sql.Tx, job string, rs []jobs.Record, finished map[string]bool) (map[int]string, error) {
	first := map[string]int{} // hash → index of its first page in the group
	var claims [][]any
	for i, r := range rs {
		if !finished[r.URL] || r.Page == nil || r.Page.Error != "" || r.Page.BodyHash == "" {
			continue
		}
		if _, ok := first[r.Page.BodyHash]; !ok {
			first[r.Page.BodyHash] = i
			claims = append(claims, []any{job, r.Page.BodyHash, r.URL})
		}
	}
	out := map[int]string{}
	if len(claims) == 0 {
		return out, nil
	}
	// Claimed in hash order, the same in every transaction, so two groups
	// never wait for each other's rows in a cycle.
	slices.SortFunc(claims, func(a, b []any) int { return strings.Compare(a[1].(string), b[1].(string)) })
	claimed, err := s.returning(ctx, tx, `INSERT INTO baton_hashes (job, hash, url) VALUES `, nil, "(?, ?, ?)",
		` ON CONFLICT (job, hash) DO NOTHING RETURNING url`, claims)
	if err != nil {
		return nil, err
	}
	owner := map[string]string{} // hash → URL of the page that owns it
	var lost []any
	for _, c := range claims {
		h, u := c[1].(string), c[2].(string)
		if claimed[u] {
			owner[h] = u
		} else {
			lost = append(lost, h)
		}
	}
	if len(lost) > 0 {
		rows, err := queryTx(ctx, s, tx, `SELECT hash, url FROM baton_hashes WHERE job = ? AND hash IN (?`+strings.Repeat(", ?", len(lost)-1)+`)`,
			append([]any{job}, lost...), func(rows *sql.Rows) ([2]string, error) {
				var hu [2]string
				err := rows.Scan(&hu[0], &hu[1])
				return hu, err
			})
		if err != nil {
			return nil, err
		}
		for _, hu := range rows {
			owner[hu[0]] = hu[1]
		}
	}
	for i, r := range rs {
		if !finished[r.URL] || r.Page == nil || r.Page.Error != "" || r.Page.BodyHash == "" {
			continue
		}
		if o := owner[r.Page.BodyHash]; o != "" && o != r.URL {
			out[i] = o
		}
	}
	return out, nil
}

// queryTx runs a query in tx and scans every row with scan.
func queryTx[T any](ctx context.Context, s *Store, tx *sql.Tx, query string, args []any, scan func(*sql.Rows) (T, error)) ([]T, error) {
	rows, err := tx.QueryContext(ctx, s.q(query), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// Body returns the stored (compressed) body of a job's page.
func (s *Store) Body(ctx context.Context, job, url string) ([]byte, error) {
	var b []byte
	err := s.read(ctx, func() error {
		return s.db.QueryRowContext(ctx, s.q(`SELECT body FROM baton_bodies WHERE job = ? AND url = ?`), job, url).Scan(&b)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("job %s page %s: %w", job, url, jobs.ErrNoBody)
	}
	if err != nil {
		return nil, fmt.Errorf("job %s page %s: body: %w", job, url, err)
	}
	return b, nil
}

// Refused counts a job's page URLs finished without a result.
func (s *Store) Refused(ctx context.Context, job string) (int, error) {
	if _, err := s.jobMaxPages(ctx, s.db, job); err != nil {
		return 0, err
	}
	var n int
	err := s.read(ctx, func() error {
		return s.db.QueryRowContext(ctx, s.q(`SELECT COUNT(*) FROM baton_frontier f WHERE f.job = ? AND f.state = 2 AND f.depth >= 0
			AND NOT EXISTS (SELECT 1 FROM baton_results r WHERE r.job = f.job AND r.url = f.url)`), job).Scan(&n)
	})
	if err != nil {
		return 0, fmt.Errorf("job %s: refused pages: %w", job, err)
	}
	return n, nil
}

// FinishBatch marks a batch whose URLs are all finished done.
func (s *Store) FinishBatch(ctx context.Context, job, id string, epoch int64) (jobs.BatchInfo, error) {
	var out jobs.BatchInfo
	err := s.write(ctx, func(tx *sql.Tx) error {
		b, err := s.batchRow(ctx, tx, job, id, s.d.forUpdate)
		if err != nil {
			return err
		}
		out = b
		if b.State == jobs.BatchDone {
			return nil
		}
		if _, err := s.checkEpoch(ctx, tx, job, id, epoch, ""); err != nil {
			return err
		}
		var open int
		if err := tx.QueryRowContext(ctx, s.q(`SELECT COUNT(*) FROM baton_frontier WHERE job = ? AND batch = ? AND state = 1`), job, id).Scan(&open); err != nil {
			return err
		}
		if open > 0 {
			return fmt.Errorf("finish job %s batch %s: %d URLs are not finished", job, id, open)
		}
		if _, err := tx.ExecContext(ctx, s.q(`UPDATE baton_batches SET state = ? WHERE job = ? AND id = ?`), jobs.BatchDone, job, id); err != nil {
			return err
		}
		out.State = jobs.BatchDone
		return nil
	})
	if err != nil {
		return out, err
	}
	err = s.read(ctx, func() error {
		return s.db.QueryRowContext(ctx, s.q(`SELECT COUNT(*), COALESCE(SUM(failed), 0) FROM baton_results WHERE job = ? AND batch = ?`), job, id).
			Scan(&out.Success, &out.Failed)
	})
	out.Success -= out.Failed
	return out, err
}

// FailBatch marks a running batch failed.
func (s *Store) FailBatch(ctx context.Context, job, id string, epoch int64, reason string) error {
	return s.write(ctx, func(tx *sql.Tx) error {
		b, err := s.batchRow(ctx, tx, job, id, s.d.forUpdate)
		if err != nil {
			return err
		}
		if b.State != jobs.BatchRunning {
			return nil
		}
		if epoch != 0 && b.Epoch != epoch {
			_, err := s.checkEpoch(ctx, tx, job, id, epoch, "")
			return err
		}
		_, err = tx.ExecContext(ctx, s.q(`UPDATE baton_batches SET state = ?, error = ? WHERE job = ? AND id = ?`), jobs.BatchFailed, reason, job, id)
		return err
	})
}

// Requeue fences a running batch at epoch and returns its unfinished URLs
// to the frontier. Two transactions: the first raises the epoch (from its
// commit on, every write of the old holder is refused), the second moves
// the URLs back, taking the frontier rows before the batch row as a
// holder's group commit does, so the two never wait for each other.
func (s *Store) Requeue(ctx context.Context, job, id string, epoch int64) (int, error) {
	running := true
	err := s.write(ctx, func(tx *sql.Tx) error {
		b, err := s.batchRow(ctx, tx, job, id, s.d.forUpdate)
		if err != nil {
			return err
		}
		if running = b.State == jobs.BatchRunning; !running {
			return nil
		}
		if b.Epoch > epoch {
			return fmt.Errorf("requeue job %s batch %s at epoch %d: held by %s at epoch %d: %w", job, id, epoch, b.Holder, b.Epoch, jobs.ErrStale)
		}
		_, err = tx.ExecContext(ctx, s.q(`UPDATE baton_batches SET epoch = ? WHERE job = ? AND id = ?`), epoch, job, id)
		return err
	})
	if err != nil || !running {
		return 0, err
	}
	n := 0
	err = s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, s.q(`UPDATE baton_frontier SET state = 0, batch = NULL WHERE job = ? AND batch = ? AND state = 1`), job, id)
		if err != nil {
			return err
		}
		k, _ := res.RowsAffected()
		n = int(k)
		res, err = tx.ExecContext(ctx, s.q(`UPDATE baton_batches SET state = ? WHERE job = ? AND id = ? AND state = ? AND epoch = ?`),
			jobs.BatchRequeued, job, id, jobs.BatchRunning, epoch)
		if err != nil {
			return err
		}
		if k, _ := res.RowsAffected(); k == 0 {
			return fmt.Errorf("requeue job %s batch %s at epoch %d: claimed meanwhile: %w", job, id, epoch, jobs.ErrStale)
		}
		return s.count(ctx, tx, job, "~assign", counts{requeued: n})
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// Batches returns the named batches' rows.
func (s *Store) Batches(ctx context.Context, job string, ids []string) ([]jobs.BatchInfo, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	args := []any{job}
	for _, id := range ids {
		args = append(args, id)
	}
	return queryAll(ctx, s, `SELECT id, holder, epoch, size, state, error FROM baton_batches
		WHERE job = ? AND id IN (?`+strings.Repeat(", ?", len(ids)-1)+`)`, args,
		func(rows *sql.Rows) (jobs.BatchInfo, error) {
			b := jobs.BatchInfo{Job: job}
			err := rows.Scan(&b.ID, &b.Holder, &b.Epoch, &b.Size, &b.State, &b.Error)
			return b, err
		})
}

// Recorded reports whether url has a page in the results.
func (s *Store) Recorded(ctx context.Context, job, url string) (bool, error) {
	var n int
	err := s.read(ctx, func() error {
		return s.db.QueryRowContext(ctx, s.q(`SELECT COUNT(*) FROM baton_results WHERE job = ? AND url = ?`), job, url).Scan(&n)
	})
	return n > 0, err
}

// Stats returns a job's counters.
func (s *Store) Stats(ctx context.Context, job string) (jobs.Stats, error) {
	var st jobs.Stats
	err := s.read(ctx, func() error {
		maxPages, err := s.jobMaxPages(ctx, s.db, job)
		if err != nil {
			return err
		}
		c, err := s.sums(ctx, s.db, job)
		if err != nil {
			return err
		}
		st = stats(c, maxPages)
		return nil
	})
	return st, err
}

// Jobs lists the jobs, newest first.
func (s *Store) Jobs(ctx context.Context) ([]jobs.JobInfo, error) {
	out, err := queryAll(ctx, s, `SELECT id, grp, created_ms FROM baton_jobs ORDER BY created_ms DESC, id`, nil,
		func(rows *sql.Rows) (jobs.JobInfo, error) {
			var j jobs.JobInfo
			var ms int64
			err := rows.Scan(&j.ID, &j.Group, &ms)
			j.Created = time.UnixMilli(ms).UTC()
			return j, err
		})
	if err != nil {
		return nil, err
	}
	for i := range out {
		if out[i].Stats, err = s.Stats(ctx, out[i].ID); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Results calls fn for every page of a job in the order recorded. A
// stored record that cannot be read (ErrBadRecord) does not stop the
// others: it is skipped, and the error returned at the end names the
// records skipped.
func (s *Store) Results(ctx context.Context, job string, fn func(jobs.PageRecord) error) error {
	if _, err := s.jobMaxPages(ctx, s.db, job); err != nil {
		return err
	}
	var rows *sql.Rows
	err := s.read(ctx, func() error {
		var err error
		rows, err = s.db.QueryContext(ctx, s.q(`SELECT url, record FROM baton_results WHERE job = ? ORDER BY `+s.d.seqCol), job)
		return err
	})
	if err != nil {
		return fmt.Errorf("results of job %s: %w", job, err)
	}
	defer rows.Close()
	var bad []error // the first ten
	nbad := 0
	for rows.Next() {
		var url, data string
		if err := rows.Scan(&url, &data); err != nil {
			return err
		}
		p, err := decodeRecord(job, url, []byte(data))
		if err != nil {
			if nbad++; len(bad) < 10 {
				bad = append(bad, fmt.Errorf("record of %s: %w", url, err))
			}
			continue
		}
		if err := fn(p); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if nbad > 0 {
		return fmt.Errorf("results of job %s in %s: %d stored records skipped: %w", job, s.id, nbad, errors.Join(bad...))
	}
	return nil
}

// queryAll runs a query (retried while the database is unreachable) and
// scans every row with scan.
func queryAll[T any](ctx context.Context, s *Store, query string, args []any, scan func(*sql.Rows) (T, error)) ([]T, error) {
	var out []T
	err := s.read(ctx, func() error {
		out = out[:0]
		rows, err := s.db.QueryContext(ctx, s.q(query), args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			v, err := scan(rows)
			if err != nil {
				return err
			}
			out = append(out, v)
		}
		return rows.Err()
	})
	return out, err
}
