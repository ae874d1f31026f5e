package sqlstore

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A data directory on NFS is refused with a message that says to use
// PostgreSQL, and nothing is created in it.
func TestSQLiteRefusesANetworkFileSystem(t *testing.T) {
	dir := t.TempDir()
	real := statfsType
	t.Cleanup(func() { statfsType = real })
	statfsType = func(string) (uint32, error) { return 0x6969, nil } // NFS_SUPER_MAGIC

	_, err := OpenSQLite(context.Background(), dir)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "network file system (NFS)")
	assert.Contains(t, err.Error(), "--store postgres://")
	_, statErr := os.Stat(filepath.Join(dir, SQLiteFile))
	assert.True(t, os.IsNotExist(statErr), "no database file created")

	statfsType = real // a local disk opens
	s, err := OpenSQLite(context.Background(), dir)
	require.NoError(t, err)
	require.NoError(t, s.Close())
}
