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
// manager), the heaviest first, as "name records×bytes" (pg_walinspect).
func walByRelation(b *testing.B, pg *testsuite.Postgres, from string, pages int) string {
	pg.Admin(b, `CREATE EXTENSION IF NOT EXISTS pg_walinspect`)
	rows := pg.AdminText(b, `SELECT coalesce(string_agg(format('%s %s %s', rel, n, bytes), ';' ORDER BY bytes DESC), '') FROM (
		SELECT coalesce(c.relname, w.resource_manager || '/' || split_part(w.record_type, ' ', 1)) AS rel, count(*) AS n, sum(w.record_length) AS bytes
		FROM pg_get_wal_records_info($1::pg_lsn, pg_current_wal_lsn()) w
		LEFT JOIN pg_class c ON c.relfilenode = nullif(substring(w.block_ref from 'rel \d+/\d+/(\d+)'), '')::oid
		GROUP BY 1) t`, from)
	per := float64(max(pages, 1))
	var out []string
	for _, row := range strings.Split(rows, ";") {
		var name string
		var n, bytes int64
		if _, err := fmt.Sscanf(row, "%s %d %d", &name, &n, &bytes); err == nil {
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
