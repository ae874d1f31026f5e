package testsuite_test

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/batoncrawl/baton/testsuite"
)

// walLSN is PostgreSQL's current WAL position, as text.
func walLSN(b *testing.B, pg *testsuite.Postgres) string {
	return pg.AdminText(b, `SELECT pg_current_wal_lsn()::text`)
}

// walByRelation says where the WAL written since from went, per page
// recorded: by the relation each record changed (a table, an index, a
// TOAST table; a record changing none, such as a commit, by its resource
// manager) and the kind of record (INSERT, UPDATE, HOT_UPDATE,
// HEAP_CONFIRM of an INSERT … ON CONFLICT, INSERT_LEAF of an index
// entry, …), the heaviest first, as "name/kind records×bytes"
// (pg_walinspect); those under a byte a page left out.
func walByRelation(b *testing.B, pg *testsuite.Postgres, from string, pages int) string {
	// A long case (several rounds of a large site) writes more WAL than
	// the server keeps: its start's WAL file may be recycled already.
	if pg.AdminInt(b, `SELECT count(*) FROM pg_ls_waldir() WHERE name = pg_walfile_name($1::pg_lsn)`, from) == 0 {
		return "not available (the WAL since the case's start was recycled)"
	}
	pg.Admin(b, `CREATE EXTENSION IF NOT EXISTS pg_walinspect`)
	rows := pg.AdminText(b, `SELECT coalesce(string_agg(format('%s %s %s', rel, n, bytes), ';' ORDER BY bytes DESC), '') FROM (
		SELECT coalesce(c.relname, w.resource_manager) || '/' || split_part(w.record_type, ' ', 1) AS rel, count(*) AS n, sum(w.record_length) AS bytes
		FROM pg_get_wal_records_info($1::pg_lsn, pg_current_wal_lsn()) w
		LEFT JOIN pg_class c ON c.relfilenode = nullif(substring(w.block_ref from 'rel \d+/\d+/(\d+)'), '')::oid
		GROUP BY 1) t`, from)
	per := float64(max(pages, 1))
	var out []string
	for _, row := range strings.Split(rows, ";") {
		var name string
		var n, bytes int64
		if _, err := fmt.Sscanf(row, "%s %d %d", &name, &n, &bytes); err == nil && float64(bytes) >= per {
			out = append(out, fmt.Sprintf("%s %.2f×%.0f B", name, float64(n)/per, float64(bytes)/per))
		}
	}
	return strings.Join(out, "; ")
}

// defaultJobID is a job ID of the shape `baton crawl` gives a job without
// --id (job-YYYYMMDD-HHMMSS-xxxxxx): every row and index entry of the
// store holds the job's ID, so its length is part of the cost per page.
func defaultJobID() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return "job-" + time.Now().UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b)
}

// resetStatements starts pg_stat_statements' counts afresh.
func resetStatements(b *testing.B, pg *testsuite.Postgres) {
	pg.Admin(b, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`, `SELECT pg_stat_statements_reset()`)
}

// topStatements lists the client database's statements since
// resetStatements that wrote the most WAL, per page recorded: calls,
// rows, WAL records and bytes, and the statement's start; on one line
// (a benchmark's log is cut after a few lines).
func topStatements(b *testing.B, pg *testsuite.Postgres, pages int) string {
	return statementLines(b, pg, []string{"calls", "rows", "wal_records", "wal_bytes"}, "wal_bytes", 12, pages,
		func(n []float64, query string) string {
			return fmt.Sprintf("%.3f calls, %.2f rows, %.2f WAL records, %.0f B: %s", n[0], n[1], n[2], n[3], query)
		})
}

// statementsByCalls lists PostgreSQL's statements run the most, per page
// recorded: calls, plans (a statement run by name on a connection that
// keeps its generic plan is not planned again), rows, and the server's
// time executing and planning them (µs).
func statementsByCalls(b *testing.B, pg *testsuite.Postgres, pages int) string {
	return statementLines(b, pg, []string{"calls", "plans", "rows", "total_exec_time", "total_plan_time"}, "calls", 20, pages,
		func(n []float64, query string) string {
			return fmt.Sprintf("%.3f calls, %.3f plans, %.2f rows, exec %.0f µs, plan %.0f µs: %s", n[0], n[1], n[2], 1000*n[3], 1000*n[4], query)
		})
}

// statementLines reads the client database's limit statements of
// pg_stat_statements with the most of order, their numeric columns cols
// per page recorded and the start of their text, each formatted by line,
// on one line.
func statementLines(b *testing.B, pg *testsuite.Postgres, cols []string, order string, limit, pages int, line func(n []float64, query string) string) string {
	format := strings.Repeat("%s|", len(cols)) + "%s"
	rows := pg.AdminText(b, fmt.Sprintf(`SELECT coalesce(string_agg(format('%s', %s,
			left(regexp_replace(query, '\s+', ' ', 'g'), 110)), E'\n' ORDER BY %s DESC), '')
		FROM (SELECT * FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
			ORDER BY %s DESC LIMIT %d) t`, format, strings.Join(cols, ", "), order, order, limit))
	per := float64(max(pages, 1))
	var out []string
	for _, row := range strings.Split(rows, "\n") {
		f := strings.SplitN(row, "|", len(cols)+1)
		if len(f) < len(cols)+1 {
			continue
		}
		n := make([]float64, len(cols))
		for i := range n {
			_, _ = fmt.Sscanf(f[i], "%g", &n[i])
			n[i] /= per
		}
		out = append(out, line(n, f[len(cols)]))
	}
	return strings.Join(out, " | ")
}
