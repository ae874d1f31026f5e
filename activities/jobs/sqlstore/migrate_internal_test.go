package sqlstore

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMigrateAfterAnotherProcessSetsUpNothing: a process that waited for
// the write lock while another set the store up finds it current under
// that lock and runs no DDL (a fresh group's workers opening one store
// at once set it up once, not each in turn). The index dropped after the
// set-up stays dropped: the second migration did not run the schema.
func TestMigrateAfterAnotherProcessSetsUpNothing(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s1, err := OpenSQLite(ctx, dir)
	require.NoError(t, err)
	defer s1.Close()
	_, err = s1.db.ExecContext(ctx, `DROP INDEX baton_frontier_host`)
	require.NoError(t, err)

	require.NoError(t, s1.migrate(ctx), "a current store migrates without error")
	var n int
	require.NoError(t, s1.db.QueryRowContext(ctx,
		`SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND name = 'baton_frontier_host'`).Scan(&n))
	require.Zero(t, n, "the DDL ran again on a store already current")
}
