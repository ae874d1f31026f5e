package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// schemaStore sets up and upgrades the schema.
type schemaStore struct {
	*core
	found int // the schema version found at the open (0: none)
}

// schemaVersion is recorded in baton_store; a store made by a newer Baton
// is refused. Raise it whenever schema() changes: a store of an older
// version is upgraded once, by the first worker of the new version that
// opens it (or `baton store migrate`), and never again at an open.
//
//	1  the tables below, some added later with CREATE … IF NOT EXISTS
//	2  baton_job_control (pause and cancel reach the Runners); from 2 on
//	   the schema is set up only when the version changes (before, at
//	   every open)
//	3  user crawlers: baton_frontier.label and .data (an entry's label and
//	   user data), baton_counters.items, baton_items (the items pages
//	   pushed) and baton_sinks (sink cursors and leases); a store of
//	   version 1 or 2 gains the columns (columns added: upgrades)
//	4  politeness across the Runners: baton_frontier.host (the URL's host
//	   as the per-domain limits key it; filled in for the rows of an
//	   older store at the upgrade) and its index of queued URLs per host,
//	   baton_host_leases and baton_robots
//	5  baton_frontier.handout: the token of the hand-out that moved the
//	   URL into its batch (a retried pull finds what its first try
//	   handed out: handout.go)
//	6  sinks you can operate: baton_sinks.epoch, .refusals, .retry_ms and
//	   .skipped, baton_sink_dead (dead letters), baton_sink_pending (the
//	   jobs with items to deliver, by group) and the trigger on
//	   baton_items that keeps it, filled in for the items of an older
//	   store at the upgrade; baton_counters.render_*: the pages recorded
//	   rendered, by reason, and their renders' crashes and time-outs;
//	   baton_revisit (validators, content hash, change, WARC original per
//	   job and URL) and baton_items.origin (items carried over from a
//	   baseline keep their IDs)
//	7  politeness across the jobs of a group: baton_host_leases.shared,
//	   .parallelism and .delay_ms (whose budget a lease is in, its job's
//	   parallelism, the delay its host is crawled with) and the index of
//	   the live leases; the group's release rows are those of job ''.
//	   One row per page recorded: baton_results.claim (the body hash the
//	   page owns, unique per job) and the revisit columns of
//	   baton_results; baton_hashes and baton_revisit are no longer
//	   written, and their rows (an older store's, or an older Baton's
//	   still running) are read where the result row has none; no index
//	   baton_frontier_batch (finished URLs by batch)
//	8  on PostgreSQL baton_frontier has a fillfactor of 80 (a URL's
//	   hand-out and finish find room on its row's page)
//	9  on PostgreSQL baton_frontier has a fillfactor of 50: a URL's two
//	   updates keep their new versions on the row's page (logged
//	   without the unchanged head of the row, and without a lock record
//	   on the old version)
const schemaVersion = 9

// The schema, one for both engines (types differ only where noted by the
// dialect):
//
//	baton_store     key/value: the store's identity and schema version
//	baton_jobs      one row per job: its spec (JSON) and max_pages
//	baton_frontier  one row per (job, URL): depth, state (0 queued, 1 in a
//	                batch, 2 finished), the batch it is in, an insertion
//	                sequence (FIFO hand-out, breadth first), the label and
//	                the user data (JSON; NULL: none) it was queued with
//	                first, its host (crawl.HostKey; '' for none) and the
//	                token of the hand-out that moved it into its batch
//	                (NULL once it is finished)
//	baton_batches   one row per batch: holder, epoch, size, state, error
//	baton_results   one row per (job, URL): the page record (JSON); the
//	                body hash it claims when it is the first page
//	                recorded with it (claim, unique per job: duplicates
//	                point to that page); and what the next run of the
//	                crawl needs of the page (ETag, Last-Modified, the
//	                hash of its extracted content, a user crawler's
//	                links, its adaptive interval and next fetch time in
//	                ms, the WARC response record holding it) with its
//	                change against the job's baseline and the bytes a
//	                304 saved (NULL: none kept)
//	baton_counters  per (job, writer) counters, summed for a job's stats:
//	                seen, taken, requeued, recorded, failed, items,
//	                and the rendered pages by reason (render_*)
//	baton_hashes    one row per (job, body hash): the URL of the page
//	                recorded first with that body, by a store of version
//	                6 or older (read, no longer written: claim above)
//	baton_bodies    one row per (job, URL) whose body is kept: the body,
//	                compressed
//	baton_secrets   one row per job with secrets: them, sealed (AES-GCM)
//	                with the group's key, and that key's ID
//	baton_job_control one row per job paused, resumed or cancelled: its
//	                control state (running, paused, cancelled), read by
//	                the Runners crawling it (no row: running)
//	baton_items     one row per item a user crawler's page pushed: seq
//	                (increasing in the order the items were committed,
//	                per store), job, URL, index on the page, label, value
//	                (JSON); unique per (job, URL, index)
//	baton_sinks     one row per (job, sink): the holder of its lease and
//	                until when (ms since the Unix epoch, the database's
//	                clock), its cursor (the seq of the last item
//	                delivered or dead-lettered), how many were
//	                delivered, the failures of the batch at the cursor
//	                (consecutive; refusals among them) and the last error,
//	                when it is tried again (retry_ms, the database's
//	                clock), the items of dead letters skipped, and the
//	                lease's epoch (changed each time it is taken anew)
//	baton_sink_dead one row per (job, sink, last_seq): a dead letter, the
//	                batch of items first_seq..last_seq a sink refused as
//	                often as it allows: its items, failures, last error,
//	                when (dead_ms) and whether it is to be retried
//	baton_sink_pending one row per job with items its sinks may not all
//	                have: its group and the highest seq of its items,
//	                raised by a trigger on baton_items (whatever Baton
//	                inserted them) and deleted by a worker once the
//	                job's sinks have them all
//	baton_host_leases one row per (job, host, batch) holding the host: the
//	                batch's share of the host's parallelism and until when
//	                (ms, the database's clock) the lease lasts unrenewed,
//	                whether it counts in the group's budget (shared), its
//	                job's parallelism and the delay it keeps; the row of
//	                batch '' keeps when the host was last released
//	                (last_ms) and with which delay, in the job's budget,
//	                or, as job '', in the group's; see hosts.go
//	baton_robots    one row per (job, origin) whose robots.txt a Runner
//	                fetched: its status, body, the Crawl-delay for the
//	                job's agent and until when it is fresh; or a claim
//	                on its fetch (status -1, no body) until it expires
//	baton_revisit   one row per (job, URL) recorded by a store of version
//	                6 or older: the revisit columns baton_results has
//	                since (read where the result row has none, no longer
//	                written)
//
// Every statement is CREATE … IF NOT EXISTS, so an upgrade runs them all
// and an older store gains the tables it lacks; the columns added to a
// table later are in upgrades, added where missing.
// Deduplication is the primary key of baton_frontier and baton_results
// (INSERT … ON CONFLICT DO NOTHING), never a map in memory.
func schema(d *dialect) []string {
	r := strings.NewReplacer("{seq}", d.seqDDL, "{itemseq}", d.itemSeqDDL, "{big}", d.bigint, "{blob}", d.blob)
	stmts := []string{
		`CREATE TABLE IF NOT EXISTS baton_store (key TEXT PRIMARY KEY, value TEXT NOT NULL)`,
		`CREATE TABLE IF NOT EXISTS baton_jobs (
			id TEXT PRIMARY KEY,
			grp TEXT NOT NULL,
			spec TEXT NOT NULL,
			max_pages {big} NOT NULL,
			created_ms {big} NOT NULL)`,
		`CREATE TABLE IF NOT EXISTS baton_frontier (
			job TEXT NOT NULL,
			url TEXT NOT NULL,
			depth INTEGER NOT NULL,
			state SMALLINT NOT NULL DEFAULT 0,
			batch TEXT{seq},
			label TEXT NOT NULL DEFAULT '',
			data TEXT,
			host TEXT NOT NULL DEFAULT '',
			handout TEXT,
			PRIMARY KEY (job, url))`,
		`CREATE INDEX IF NOT EXISTS baton_frontier_queued ON baton_frontier (job` + d.seqIndex + `) WHERE state = 0`,
		// A batch's unfinished URLs (a hand-over, a requeue, the hosts a
		// pull keeps) without a scan of all it has finished: a Runner's
		// lease may span the job. The URLs a batch finished are not
		// indexed by batch (each would cost an index entry as it is
		// handed out and another as it is finished): Entries, which
		// lists them, reads the job's rows.
		`CREATE INDEX IF NOT EXISTS baton_frontier_claimed ON baton_frontier (job, batch) WHERE state = 1`,
		`CREATE TABLE IF NOT EXISTS baton_batches (
			job TEXT NOT NULL,
			id TEXT NOT NULL,
			holder TEXT NOT NULL DEFAULT '',
			epoch {big} NOT NULL DEFAULT 0,
			size INTEGER NOT NULL,
			state TEXT NOT NULL,
			error TEXT NOT NULL DEFAULT '',
			PRIMARY KEY (job, id))`,
		`CREATE TABLE IF NOT EXISTS baton_results (
			job TEXT NOT NULL,
			url TEXT NOT NULL,
			batch TEXT NOT NULL,
			failed SMALLINT NOT NULL,
			record TEXT NOT NULL{seq},
			claim TEXT,` + revisitDDL(d) + `,
			PRIMARY KEY (job, url))`,
		`CREATE INDEX IF NOT EXISTS baton_results_order ON baton_results (job` + d.seqIndex + `)`,
		`CREATE INDEX IF NOT EXISTS baton_results_batch ON baton_results (job, batch)`,
		`CREATE TABLE IF NOT EXISTS baton_counters (
			job TEXT NOT NULL,
			shard TEXT NOT NULL,
			seen {big} NOT NULL DEFAULT 0,
			taken {big} NOT NULL DEFAULT 0,
			requeued {big} NOT NULL DEFAULT 0,
			recorded {big} NOT NULL DEFAULT 0,
			failed {big} NOT NULL DEFAULT 0,
			items {big} NOT NULL DEFAULT 0,
			render_always {big} NOT NULL DEFAULT 0,
			render_auto_fields {big} NOT NULL DEFAULT 0,
			render_auto_links {big} NOT NULL DEFAULT 0,
			render_auto_sample {big} NOT NULL DEFAULT 0,
			render_label {big} NOT NULL DEFAULT 0,
			render_crashes {big} NOT NULL DEFAULT 0,
			render_timeouts {big} NOT NULL DEFAULT 0,
			PRIMARY KEY (job, shard))`,
		`CREATE TABLE IF NOT EXISTS baton_hashes (
			job TEXT NOT NULL,
			hash TEXT NOT NULL,
			url TEXT NOT NULL,
			PRIMARY KEY (job, hash))`,
		`CREATE TABLE IF NOT EXISTS baton_bodies (
			job TEXT NOT NULL,
			url TEXT NOT NULL,
			body {blob} NOT NULL,
			PRIMARY KEY (job, url))`,
		`CREATE TABLE IF NOT EXISTS baton_secrets (
			job TEXT PRIMARY KEY,
			key_id TEXT NOT NULL,
			sealed {blob} NOT NULL)`,
		`CREATE TABLE IF NOT EXISTS baton_job_control (
			job TEXT PRIMARY KEY,
			state TEXT NOT NULL,
			updated_ms {big} NOT NULL)`,
	}
	stmts = append(stmts, itemTables()...)
	stmts = append(stmts, hostAndRevisitTables()...)
	stmts = append(stmts, d.pendingTrigger...)
	for i, s := range stmts {
		stmts[i] = r.Replace(s)
	}
	return stmts
}

// itemTables are the tables of user crawlers' items and their sinks.
func itemTables() []string {
	return []string{
		`CREATE TABLE IF NOT EXISTS baton_items (
			seq {itemseq},
			job TEXT NOT NULL,
			url TEXT NOT NULL,
			idx INTEGER NOT NULL,
			label TEXT NOT NULL DEFAULT '',
			value TEXT NOT NULL,
			origin TEXT,
			UNIQUE (job, url, idx))`,
		`CREATE INDEX IF NOT EXISTS baton_items_order ON baton_items (job, seq)`,
		`CREATE TABLE IF NOT EXISTS baton_sinks (
			job TEXT NOT NULL,
			sink TEXT NOT NULL,
			holder TEXT NOT NULL DEFAULT '',
			lease_until_ms {big} NOT NULL DEFAULT 0,
			cursor {big} NOT NULL DEFAULT 0,
			delivered {big} NOT NULL DEFAULT 0,
			failures INTEGER NOT NULL DEFAULT 0,
			last_error TEXT NOT NULL DEFAULT '',
			epoch {big} NOT NULL DEFAULT 0,
			refusals INTEGER NOT NULL DEFAULT 0,
			retry_ms {big} NOT NULL DEFAULT 0,
			skipped {big} NOT NULL DEFAULT 0,
			PRIMARY KEY (job, sink))`,
		`CREATE TABLE IF NOT EXISTS baton_sink_dead (
			job TEXT NOT NULL,
			sink TEXT NOT NULL,
			last_seq {big} NOT NULL,
			first_seq {big} NOT NULL,
			items INTEGER NOT NULL,
			failures INTEGER NOT NULL,
			last_error TEXT NOT NULL DEFAULT '',
			dead_ms {big} NOT NULL,
			retry SMALLINT NOT NULL DEFAULT 0,
			PRIMARY KEY (job, sink, last_seq))`,
		`CREATE TABLE IF NOT EXISTS baton_sink_pending (
			job TEXT PRIMARY KEY,
			grp TEXT NOT NULL,
			seq {big} NOT NULL)`,
		`CREATE INDEX IF NOT EXISTS baton_sink_pending_grp ON baton_sink_pending (grp, job)`,
	}
}

// hostAndRevisitTables are the tables of the host leases, the robots.txt
// files and the revisit rows of recrawls.
func hostAndRevisitTables() []string {
	return []string{
		`CREATE TABLE IF NOT EXISTS baton_host_leases (
			job TEXT NOT NULL,
			host TEXT NOT NULL,
			holder TEXT NOT NULL,
			share INTEGER NOT NULL DEFAULT 0,
			expires_ms {big} NOT NULL DEFAULT 0,
			last_ms {big} NOT NULL DEFAULT 0,
			shared SMALLINT NOT NULL DEFAULT 1,
			parallelism INTEGER NOT NULL DEFAULT 0,
			delay_ms {big} NOT NULL DEFAULT 0,
			PRIMARY KEY (job, host, holder))`,
		`CREATE INDEX IF NOT EXISTS baton_host_leases_holder ON baton_host_leases (job, holder)`,
		// The live leases of every job, without the release rows (one per
		// host a job or the group ever released).
		`CREATE INDEX IF NOT EXISTS baton_host_leases_live ON baton_host_leases (host) WHERE holder > ''`,
		`CREATE TABLE IF NOT EXISTS baton_robots (
			job TEXT NOT NULL,
			origin TEXT NOT NULL,
			host TEXT NOT NULL,
			status INTEGER NOT NULL,
			body {blob} NOT NULL,
			crawl_delay_ms {big} NOT NULL DEFAULT 0,
			expires_ms {big} NOT NULL,
			PRIMARY KEY (job, origin))`,
		`CREATE INDEX IF NOT EXISTS baton_robots_host ON baton_robots (job, host)`,
		`CREATE TABLE IF NOT EXISTS baton_revisit (
			job TEXT NOT NULL,
			url TEXT NOT NULL,
			etag TEXT NOT NULL DEFAULT '',
			last_modified TEXT NOT NULL DEFAULT '',
			content_hash TEXT NOT NULL DEFAULT '',
			change TEXT NOT NULL DEFAULT '',
			saved_bytes {big} NOT NULL DEFAULT 0,
			links TEXT,
			interval_ms {big} NOT NULL DEFAULT 0,
			next_ms {big} NOT NULL DEFAULT 0,
			warc_id TEXT NOT NULL DEFAULT '',
			warc_uri TEXT NOT NULL DEFAULT '',
			warc_date TEXT NOT NULL DEFAULT '',
			warc_digest TEXT NOT NULL DEFAULT '',
			PRIMARY KEY (job, url))`,
	}
}

// column is a column added to a table after the table was first made
// (CREATE TABLE has it already for a new store).
type column struct{ table, name, ddl string }

// upgrades are the columns added since version 1, in the order added.
// Each has a default, so the rows of existing jobs stay valid and a
// Baton of the version before (still running while the workers are
// upgraded) writes rows the new one reads.
func upgrades(d *dialect) []column {
	cols := []column{
		{"baton_frontier", "label", `label TEXT NOT NULL DEFAULT ''`},               // 3
		{"baton_frontier", "data", `data TEXT`},                                     // 3
		{"baton_counters", "items", `items ` + d.bigint + ` NOT NULL DEFAULT 0`},    // 3
		{"baton_frontier", "host", `host TEXT NOT NULL DEFAULT ''`},                 // 4
		{"baton_frontier", "handout", `handout TEXT`},                               // 5
		{"baton_sinks", "epoch", `epoch ` + d.bigint + ` NOT NULL DEFAULT 0`},       // 6
		{"baton_sinks", "refusals", `refusals INTEGER NOT NULL DEFAULT 0`},          // 6
		{"baton_sinks", "retry_ms", `retry_ms ` + d.bigint + ` NOT NULL DEFAULT 0`}, // 6
		{"baton_sinks", "skipped", `skipped ` + d.bigint + ` NOT NULL DEFAULT 0`},   // 6
		{"baton_items", "origin", `origin TEXT`},                                    // 6
		{"baton_host_leases", "shared", `shared SMALLINT NOT NULL DEFAULT 1`},       // 7
		{"baton_host_leases", "parallelism", `parallelism INTEGER NOT NULL DEFAULT 0`},
		{"baton_host_leases", "delay_ms", `delay_ms ` + d.bigint + ` NOT NULL DEFAULT 0`},
	}
	for _, c := range renderColumns {
		cols = append(cols, column{"baton_counters", c, c + ` ` + d.bigint + ` NOT NULL DEFAULT 0`}) // 6
	}
	cols = append(cols, column{"baton_results", "claim", `claim TEXT`}) // 7
	for _, c := range revisitColumns(d) {
		cols = append(cols, column{"baton_results", c[0], c[0] + ` ` + c[1]}) // 7
	}
	return cols
}

// upgradedIndexes are the indexes on columns of upgrades, made after
// them, and the tables' storage settings.
func upgradedIndexes(d *dialect) []string {
	sts := []string{
		// A hand-out finds the hosts of the queued URLs, and a host's
		// queued URLs in frontier order, without reading the others.
		`CREATE INDEX IF NOT EXISTS baton_frontier_host ON baton_frontier (job, host` + d.seqIndex + `) WHERE state = 0`,
		// A body hash is owned by one page of a job: a group commit
		// claiming one a concurrent commit claimed first fails and is
		// tried again (claims.go).
		`CREATE UNIQUE INDEX IF NOT EXISTS ` + claimIndex + ` ON baton_results (job, claim) WHERE claim IS NOT NULL`,
		// A store of version 6 or older indexed every URL handed out by
		// batch: baton_frontier_claimed serves every hand-out's reads.
		`DROP INDEX IF EXISTS baton_frontier_batch`,
	}
	if d.name == "postgres" {
		// A URL's row is updated twice after its insert (handed out,
		// finished), each time with a new version: room left on its page
		// keeps the new version there, without a lock record on the old.
		// Rows written before keep their pages until they are updated.
		sts = append(sts, `ALTER TABLE baton_frontier SET (fillfactor = `+strconv.Itoa(frontierFillfactor)+`)`)
	}
	return sts
}

// frontierFillfactor is baton_frontier's fillfactor on PostgreSQL: the
// share of a page its inserts fill, the rest left for the new versions of
// its rows' updates.
const frontierFillfactor = 50

// claimIndex is the index that keeps a body hash's claim unique per job.
const claimIndex = "baton_results_claim"

// revisitColumns are baton_results' revisit columns and their types, in
// the order of revisitValues; NULL, all of them, for a page without.
func revisitColumns(d *dialect) [][2]string {
	return [][2]string{
		{"etag", "TEXT"}, {"last_modified", "TEXT"}, {"content_hash", "TEXT"}, {"change", "TEXT"},
		{"saved_bytes", d.bigint}, {"links", "TEXT"}, {"interval_ms", d.bigint}, {"next_ms", d.bigint},
		{"warc_id", "TEXT"}, {"warc_uri", "TEXT"}, {"warc_date", "TEXT"}, {"warc_digest", "TEXT"},
	}
}

// revisitDDL is the revisit columns' part of CREATE TABLE baton_results.
func revisitDDL(d *dialect) string {
	var b strings.Builder
	for i, c := range revisitColumns(d) {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString("\n\t\t\t" + c[0] + " " + c[1])
	}
	return b.String()
}

// addColumn adds c to its table unless it is there.
func (s *schemaStore) addColumn(ctx context.Context, tx dbtx, c column) error {
	var n int
	q := `SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1 AND column_name = $2`
	if !s.d.dollar {
		q = `SELECT COUNT(*) FROM pragma_table_info(?) WHERE name = ?`
	}
	if err := tx.QueryRowContext(ctx, q, c.table, c.name).Scan(&n); err != nil {
		return fmt.Errorf("upgrade schema: column %s.%s: %w", c.table, c.name, err)
	}
	if n > 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `ALTER TABLE `+c.table+` ADD COLUMN `+c.ddl); err != nil {
		return fmt.Errorf("upgrade schema: add column %s.%s: %w", c.table, c.name, err)
	}
	return nil
}

// schemaVersion reads the store's schema version: 0 when it has none.
func (s *schemaStore) schemaVersion(ctx context.Context) (int, error) {
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
func (s *schemaStore) SchemaVersion() int { return schemaVersion }

// Migrate creates the schema, or upgrades an older one, and returns the
// version the store had when it was opened (0: none; an open without
// Config.Existing has upgraded it already). Safe to run from several processes at
// once, and again.
func (s *schemaStore) Migrate(ctx context.Context) (from int, err error) {
	v, err := s.schemaVersion(ctx)
	if err != nil || v == schemaVersion {
		return s.found, err
	}
	return s.found, s.migrate(ctx)
}
