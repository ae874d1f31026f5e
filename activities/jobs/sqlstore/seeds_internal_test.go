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
// Each row still gets its own URL and host, and shares the job (and,
// shared, the depth, label and data).
func TestSeedInsertNumbersOnlyItsFirstRow(t *testing.T) {
	numbered := regexp.MustCompile(`\?[0-9]+`)
	for _, shared := range []bool{true, false} {
		q := seedInsert(seedRows, shared, false)
		assert.LessOrEqual(t, len(uniq(numbered.FindAllString(q, -1))), 6, "shared=%v", shared)
	}
	assert.Contains(t, seedInsert(2, true, false), "VALUES (?1, ?5, ?2, 0, ?3, ?4, ?6), (?1, ?, ?2, 0, ?3, ?4, ?)")
	assert.Contains(t, seedInsert(2, false, false), "VALUES (?1, ?2, ?3, 0, ?4, ?5, ?6), (?1, ?, ?, 0, ?, ?, ?)")
	assert.Contains(t, seedInsert(2, true, true), "VALUES ($1, $5, $2, 0, $3, $4, $6), ($1, $7, $2, 0, $3, $4, $8)")
}

func uniq(s []string) map[string]bool {
	m := map[string]bool{}
	for _, x := range s {
		m[x] = true
	}
	return m
}
