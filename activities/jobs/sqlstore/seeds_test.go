package sqlstore_test

import (
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/activities/jobs/sqlstore"
)

// Each seed's frontier row keeps its own host (the politeness key),
// whether the rows of a statement share one host or not.
func TestSQLiteSeedsKeepEachRowsHost(t *testing.T) {
	ctx := testCtx(t, time.Minute)
	s := openSQLite(t, t.TempDir())
	_, err := s.CreateJob(ctx, jobs.Spec{ID: "j", Group: "g", Seeds: []string{"http://a.test/"}, Options: crawl.DefaultOptions()}, nil)
	require.NoError(t, err)
	in := make([]jobs.Entry, 2500)
	want := map[string]string{}
	for i := range in {
		host := "a.test"
		if i >= 1000 && i%3 == 0 {
			host = fmt.Sprintf("b%d.test:8080", i%2)
		}
		in[i] = jobs.Entry{URL: fmt.Sprintf("http://%s/p%d", host, i)}
		want[in[i].URL] = host
	}
	n, err := s.AddSeeds(ctx, "j", in)
	require.NoError(t, err)
	require.Equal(t, len(in), n)
	got := map[string]string{}
	require.NoError(t, sqlstore.InTransaction(ctx, s, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT url, host FROM baton_frontier WHERE job = 'j'`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var u, h string
			if err := rows.Scan(&u, &h); err != nil {
				return err
			}
			got[u] = h
		}
		return rows.Err()
	}))
	assert.Equal(t, want, got)
}
