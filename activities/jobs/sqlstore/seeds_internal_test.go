package sqlstore

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
)

// On SQLite a seed statement numbers the parameters of its first row
// only: SQLite scans the list of numbered parameters whenever the driver
// asks a parameter's name, once for each parameter it binds, so a
// statement of 1,000 rows numbered throughout binds in quadratic time.
// Each row still gets its own URL, and shares the job and what the
// statement's shape shares.
func TestSeedInsertNumbersOnlyItsFirstRow(t *testing.T) {
	numbered := regexp.MustCompile(`\?[0-9]+`)
	for shape := range seedShapes {
		q := seedInsert(seedRows, shape, false)
		assert.LessOrEqual(t, len(uniq(numbered.FindAllString(q, -1))), 6, "shape %d", shape)
	}
	for shape, want := range map[seedShape][2]string{
		ownValues:    {"(?1, ?2, ?3, 0, ?4, ?5, ?6), (?1, ?, ?, 0, ?, ?, ?) ON", "($1, $2, $3, 0, $4, $5, $6), ($1, $7, $8, 0, $9, $10, $11) ON"},
		sharedValues: {"(?1, ?5, ?2, 0, ?3, ?4, ?6), (?1, ?, ?2, 0, ?3, ?4, ?) ON", "($1, $5, $2, 0, $3, $4, $6), ($1, $7, $2, 0, $3, $4, $8) ON"},
		sharedHost:   {"(?1, ?6, ?2, 0, ?3, ?4, ?5), (?1, ?, ?2, 0, ?3, ?4, ?5) ON", "($1, $6, $2, 0, $3, $4, $5), ($1, $7, $2, 0, $3, $4, $5) ON"},
	} {
		assert.Contains(t, seedInsert(2, shape, false), "VALUES "+want[0], "shape %d on SQLite", shape)
		assert.Contains(t, seedInsert(2, shape, true), "VALUES "+want[1], "shape %d on PostgreSQL", shape)
	}
}

func uniq(s []string) map[string]bool {
	m := map[string]bool{}
	for _, x := range s {
		m[x] = true
	}
	return m
}
