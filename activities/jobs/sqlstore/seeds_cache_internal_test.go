package sqlstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/jobs"
)

// On SQLite a chunk of seeds is added with a larger page cache on its
// connection (bulkCache), and the connection goes back to the pool with
// the cache it had: a worker's connections do not each keep 16 MiB of
// pages after a seed file.
func TestAddSeedsGivesBackTheConnectionsCache(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := OpenSQLite(ctx, t.TempDir())
	require.NoError(t, err)
	defer s.Close()
	s.db.SetMaxOpenConns(1) // AddSeeds and the checks below share one connection
	cacheSize := func() int {
		var n int
		require.NoError(t, s.db.QueryRowContext(ctx, `PRAGMA cache_size`).Scan(&n))
		return n
	}
	before := cacheSize()
	require.NotEqual(t, -seedCacheKiB, before)

	seeds := make([]jobs.Entry, 3*seedRows/2)
	for i := range seeds {
		seeds[i] = jobs.Entry{URL: fmt.Sprintf("http://a.test/%d", i)}
	}
	_, err = s.CreateJob(ctx, jobs.Spec{ID: "j", Group: "g", Seeds: []string{seeds[0].URL}, Options: crawl.DefaultOptions()}, seeds[:1])
	require.NoError(t, err)
	n, err := s.AddSeeds(ctx, "j", seeds)
	require.NoError(t, err)
	assert.Equal(t, len(seeds)-1, n)
	assert.Equal(t, before, cacheSize(), "the connection's page cache after AddSeeds")

	tx, err := s.db.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer tx.Rollback()
	restore, err := bulkCache(ctx, tx)
	require.NoError(t, err)
	var during int
	require.NoError(t, tx.QueryRowContext(ctx, `PRAGMA cache_size`).Scan(&during))
	assert.Equal(t, -seedCacheKiB, during, "the page cache while seeds are added")
	require.NoError(t, restore())
}
