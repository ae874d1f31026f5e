package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// kept returns how many statements the connection of conn keeps.
func kept(t *testing.T, conn *sql.Conn) int {
	t.Helper()
	n := -1
	require.NoError(t, conn.Raw(func(dc any) error {
		c, ok := dc.(*stmtCacheConn)
		if !ok {
			return fmt.Errorf("connection is a %T, not the statement cache's", dc)
		}
		n = c.lru.Len()
		return nil
	}))
	return n
}

func TestSQLiteKeepsStatements(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := OpenSQLite(ctx, t.TempDir())
	require.NoError(t, err)
	defer s.Close()
	conn, err := s.db.Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()

	_, err = conn.ExecContext(ctx, `CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT)`)
	require.NoError(t, err)
	base := kept(t, conn)
	for i := range 3 {
		_, err := conn.ExecContext(ctx, `INSERT INTO t (k, v) VALUES (?, ?)`, i, fmt.Sprint("v", i))
		require.NoError(t, err)
	}
	require.Equal(t, base+1, kept(t, conn), "one statement kept for three runs of one text")

	// A statement whose rows are open is not handed out again: the same
	// text run meanwhile gets a statement of its own, and both read right.
	const q = `SELECT v FROM t WHERE k >= ? ORDER BY k`
	outer, err := conn.QueryContext(ctx, q, 0)
	require.NoError(t, err)
	require.True(t, outer.Next())
	var inner []string
	rows, err := conn.QueryContext(ctx, q, 1)
	require.NoError(t, err)
	for rows.Next() {
		var v string
		require.NoError(t, rows.Scan(&v))
		inner = append(inner, v)
	}
	require.NoError(t, rows.Close())
	require.Equal(t, []string{"v1", "v2"}, inner)
	var got []string
	for {
		var v string
		require.NoError(t, outer.Scan(&v))
		got = append(got, v)
		if !outer.Next() {
			break
		}
	}
	require.NoError(t, outer.Close())
	require.Equal(t, []string{"v0", "v1", "v2"}, got)

	// Run again once closed: the kept statement was reset, its
	// arguments bound anew.
	var v string
	require.NoError(t, conn.QueryRowContext(ctx, q, 2).Scan(&v))
	require.Equal(t, "v2", v)

	// A failed run leaves the statement usable.
	_, err = conn.ExecContext(ctx, `INSERT INTO t (k, v) VALUES (?, ?)`, 0, "dup")
	require.Error(t, err)
	_, err = conn.ExecContext(ctx, `INSERT INTO t (k, v) VALUES (?, ?)`, 3, "v3")
	require.NoError(t, err)

	// At most stmtsPerConn are kept.
	for i := range stmtsPerConn + 10 {
		require.NoError(t, conn.QueryRowContext(ctx, fmt.Sprintf(`SELECT v FROM t WHERE k = ? AND %d = %d`, i, i), 3).Scan(&v))
	}
	require.Equal(t, stmtsPerConn, kept(t, conn))
}

func TestChunkSizes(t *testing.T) {
	allowed := map[int]bool{}
	for _, l := range chunkLadder {
		allowed[l] = true
	}
	for n := 1; n <= 1000; n++ {
		left, stmts := n, 0
		for left > 0 {
			c := chunkSize(left)
			require.True(t, c >= 1 && c <= left && c <= rowsPerStatement, "n %d: chunk %d of %d left", n, c, left)
			require.True(t, c <= exactRows || allowed[c], "n %d: chunk of %d rows is not a fixed size", n, c)
			left -= c
			stmts++
		}
		if n <= 255 {
			require.LessOrEqual(t, stmts, 5, "n %d", n)
		}
	}
}
