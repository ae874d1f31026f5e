package sqlstore

import (
	"container/list"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"reflect"

	"modernc.org/sqlite"
)

// This file holds the embedded store's prepared statements, kept per
// connection by their text: SQLite compiles a statement (parses it and
// plans it) on every call otherwise, which costs a group commit about as
// much as running its statements. The multi-row statements take their
// rows in a few fixed sizes (chunkSizes in tx.go), so a few shapes of
// each serve every commit.

// cachedSQLite is the name the embedded store's driver is registered as:
// modernc.org/sqlite's, with each connection keeping its statements.
const cachedSQLite = "baton-sqlite"

func init() { sql.Register(cachedSQLite, stmtCacheDriver{&sqlite.Driver{}}) }

// stmtsPerConn is how many prepared statements a connection keeps (the
// least recently used is finalized beyond it).
const stmtsPerConn = 128

type stmtCacheDriver struct{ inner driver.Driver }

func (d stmtCacheDriver) Open(name string) (driver.Conn, error) {
	c, err := d.inner.Open(name)
	if err != nil {
		return nil, err
	}
	return newStmtCacheConn(c)
}

// sqliteConn is what the driver's connection does, all of which the
// cache's passes on.
type sqliteConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
}

// stmtCacheConn is a connection with its statements kept: a statement
// whose rows are still being read is not handed out again (a second
// use at once gets a statement of its own, finalized after it).
type stmtCacheConn struct {
	sqliteConn
	lru   *list.List               // of *cachedStmt, most recently used first
	bySQL map[string]*list.Element // by query text
}

type cachedStmt struct {
	query string
	stmt  driver.Stmt
	inUse bool
}

type stmtContext interface {
	driver.StmtExecContext
	driver.StmtQueryContext
}

func newStmtCacheConn(c driver.Conn) (driver.Conn, error) {
	sc, ok := c.(sqliteConn)
	if !ok {
		_ = c.Close()
		return nil, errors.New("sqlite store: the driver's connection lacks a method the statement cache needs")
	}
	return &stmtCacheConn{sqliteConn: sc, lru: list.New(), bySQL: map[string]*list.Element{}}, nil
}

// get returns query's statement, prepared now if not kept; release gives
// it back (a statement not kept is finalized then).
func (c *stmtCacheConn) get(ctx context.Context, query string) (st stmtContext, release func(), err error) {
	if e, ok := c.bySQL[query]; ok {
		cs := e.Value.(*cachedStmt)
		if !cs.inUse {
			c.lru.MoveToFront(e)
			cs.inUse = true
			return cs.stmt.(stmtContext), func() { cs.inUse = false }, nil
		}
		s, err := c.PrepareContext(ctx, query)
		if err != nil {
			return nil, nil, err
		}
		return s.(stmtContext), func() { _ = s.Close() }, nil
	}
	s, err := c.PrepareContext(ctx, query)
	if err != nil {
		return nil, nil, err
	}
	cs := &cachedStmt{query: query, stmt: s, inUse: true}
	c.bySQL[query] = c.lru.PushFront(cs)
	c.evict()
	return s.(stmtContext), func() { cs.inUse = false }, nil
}

// evict finalizes the least recently used statements beyond
// stmtsPerConn (none in use).
func (c *stmtCacheConn) evict() {
	for e := c.lru.Back(); e != nil && c.lru.Len() > stmtsPerConn; {
		prev := e.Prev()
		if cs := e.Value.(*cachedStmt); !cs.inUse {
			c.lru.Remove(e)
			delete(c.bySQL, cs.query)
			_ = cs.stmt.Close()
		}
		e = prev
	}
}

func (c *stmtCacheConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	st, release, err := c.get(ctx, query)
	if err != nil {
		return nil, err
	}
	defer release()
	return st.ExecContext(ctx, args)
}

func (c *stmtCacheConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	st, release, err := c.get(ctx, query)
	if err != nil {
		return nil, err
	}
	rows, err := st.QueryContext(ctx, args)
	if err != nil {
		release()
		return nil, err
	}
	return &releasingRows{Rows: rows, release: release}, nil
}

// Close finalizes the statements kept, then closes the connection.
func (c *stmtCacheConn) Close() error {
	for e := c.lru.Front(); e != nil; e = e.Next() {
		_ = e.Value.(*cachedStmt).stmt.Close()
	}
	c.lru.Init()
	clear(c.bySQL)
	return c.sqliteConn.Close()
}

// releasingRows gives its statement back once closed (the statement is
// reset by the rows' Close).
type releasingRows struct {
	driver.Rows
	release func()
}

func (r *releasingRows) Close() error {
	err := r.Rows.Close()
	if r.release != nil {
		r.release()
		r.release = nil
	}
	return err
}

// The column types of the driver's rows, passed on.

type columnTyped interface {
	ColumnTypeDatabaseTypeName(index int) string
	ColumnTypeLength(index int) (length int64, ok bool)
	ColumnTypeNullable(index int) (nullable, ok bool)
	ColumnTypePrecisionScale(index int) (precision, scale int64, ok bool)
	ColumnTypeScanType(index int) reflect.Type
}

func (r *releasingRows) ColumnTypeDatabaseTypeName(i int) string {
	if ct, ok := r.Rows.(columnTyped); ok {
		return ct.ColumnTypeDatabaseTypeName(i)
	}
	return ""
}

func (r *releasingRows) ColumnTypeLength(i int) (int64, bool) {
	if ct, ok := r.Rows.(columnTyped); ok {
		return ct.ColumnTypeLength(i)
	}
	return 0, false
}

func (r *releasingRows) ColumnTypeNullable(i int) (bool, bool) {
	if ct, ok := r.Rows.(columnTyped); ok {
		return ct.ColumnTypeNullable(i)
	}
	return false, false
}

func (r *releasingRows) ColumnTypePrecisionScale(i int) (int64, int64, bool) {
	if ct, ok := r.Rows.(columnTyped); ok {
		return ct.ColumnTypePrecisionScale(i)
	}
	return 0, 0, false
}

func (r *releasingRows) ColumnTypeScanType(i int) reflect.Type {
	if ct, ok := r.Rows.(columnTyped); ok {
		return ct.ColumnTypeScanType(i)
	}
	return reflect.TypeFor[any]()
}
