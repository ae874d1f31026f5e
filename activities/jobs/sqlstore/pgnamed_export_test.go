package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
)

// Prepared is a named statement of s's connections: how many hold it,
// and how many times they ran it.
type Prepared struct {
	Statement   string
	Connections int
	Runs        int64
}

// PreparedStatements lists the named statements s's connections hold
// (PostgreSQL's pg_prepared_statements on each), holding every
// connection of its pool at once.
func PreparedStatements(ctx context.Context, s *Store, pool int) ([]Prepared, error) {
	conns := make([]*sql.Conn, 0, pool)
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	by := map[string]*Prepared{}
	var out []Prepared
	for range pool {
		c, err := s.db.Conn(ctx)
		if err != nil {
			return nil, err
		}
		conns = append(conns, c)
		rows, err := c.QueryContext(ctx, `SELECT name, statement, generic_plans + custom_plans FROM pg_prepared_statements WHERE name LIKE 'baton\_%'`)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var name, st string
			var runs int64
			if err := rows.Scan(&name, &st, &runs); err != nil {
				rows.Close()
				return nil, err
			}
			if name != statementName(st) {
				rows.Close()
				return nil, fmt.Errorf("statement %s is named %s", st, name)
			}
			p := by[st]
			if p == nil {
				p = &Prepared{Statement: st}
				by[st] = p
			}
			p.Connections++
			p.Runs += runs
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	for _, p := range by {
		out = append(out, *p)
	}
	return out, nil
}

// MaxNamed is how many statements one connection keeps prepared.
const MaxNamed = maxNamed

// NamesStatements reports whether s runs its pipelines' statements by
// name (PostgreSQL, no pooler found that drops them, not turned off).
func NamesStatements(s *Store) bool { return s.named != nil && !s.named.off.Load() }
