package sqlstore

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// This file holds the session guards of PostgreSQL: the timeouts every
// transaction of the store runs under. They are set at the start of each
// transaction (SET LOCAL, through set_config), never on the session or as
// startup parameters, so they hold behind PgBouncer in transaction mode,
// where each transaction may run on another server connection and
// startup parameters are refused or dropped; and they end with the
// transaction, leaving nothing behind on a pooled connection.

// Guards are the timeouts of the store's transactions on PostgreSQL. A
// stricter setting of the server, the database or the role (ALTER ROLE …
// SET statement_timeout) stays: a guard only ever tightens.
type Guards struct {
	// Statement bounds each statement (statement_timeout); 0 means 60 s.
	Statement time.Duration
	// Lock bounds the wait for a lock (lock_timeout, retried: another
	// session's lock is released soon); 0 means 15 s.
	Lock time.Duration
	// IdleInTransaction ends a session idle inside a transaction (its
	// client gone between two statements), releasing its locks
	// (idle_in_transaction_session_timeout); 0 means 10 s. The store's
	// transactions are milliseconds long.
	IdleInTransaction time.Duration
	// TCPUser drops the connection of a transaction whose last reply is
	// never acknowledged (the client vanished right after a statement),
	// instead of after the kernel's 15 minutes of retransmissions
	// (tcp_user_timeout); 0 means 19 s.
	TCPUser time.Duration
	// MigrationLock bounds a schema change's wait for a lock; 0 means
	// 5 s. A schema change waiting for a lock blocks every statement on
	// the table behind it, so it gives up soon and tries again
	// (migrationTries in all), then fails naming the table.
	MigrationLock time.Duration
	// MigrationStatement bounds each statement of a schema change (an
	// index built on a big table); 0 means 30 minutes.
	MigrationStatement time.Duration
}

// DefaultGuards are the guards of a store opened without others.
var DefaultGuards = Guards{Statement: 60 * time.Second, Lock: 15 * time.Second, IdleInTransaction: 10 * time.Second, TCPUser: 19 * time.Second,
	MigrationLock: 5 * time.Second, MigrationStatement: 30 * time.Minute}

// withDefaults fills in the guards left 0.
func (g Guards) withDefaults() Guards {
	pick := func(v, d time.Duration) time.Duration {
		if v > 0 {
			return v
		}
		return d
	}
	return Guards{
		Statement:          pick(g.Statement, DefaultGuards.Statement),
		Lock:               pick(g.Lock, DefaultGuards.Lock),
		IdleInTransaction:  pick(g.IdleInTransaction, DefaultGuards.IdleInTransaction),
		TCPUser:            pick(g.TCPUser, DefaultGuards.TCPUser),
		MigrationLock:      pick(g.MigrationLock, DefaultGuards.MigrationLock),
		MigrationStatement: pick(g.MigrationStatement, DefaultGuards.MigrationStatement),
	}
}

// migration are the guards of a schema change's DDL.
func (g Guards) migration() Guards {
	g = g.withDefaults()
	g.Statement, g.Lock = g.MigrationStatement, g.MigrationLock
	return g
}

// SessionBound is how long a PostgreSQL session whose client vanished in
// the middle of one of the store's transactions holds its locks at most
// with the default guards (idle_in_transaction_session_timeout, or
// tcp_user_timeout while the server waits for its last reply to be
// acknowledged); the README documents it.
const SessionBound = 19 * time.Second

// guardStatement is the statement that sets g for the rest of a
// transaction: each setting lowered to g's value unless the session's
// (the server's, database's or role's, or the DSN's) is stricter already
// (0 is none: the guard applies). One statement, so it goes in the round
// trip of the transaction's first statement or with its BEGIN.
func guardStatement(g Guards) string {
	g = g.withDefaults()
	settings := []struct {
		name string
		v    time.Duration
	}{
		{"statement_timeout", g.Statement},
		{"lock_timeout", g.Lock},
		{"idle_in_transaction_session_timeout", g.IdleInTransaction},
		{"tcp_user_timeout", g.TCPUser},
	}
	rows := make([]string, len(settings))
	for i, s := range settings {
		rows[i] = fmt.Sprintf("('%s', '%s')", s.name, strconv.FormatInt(max(s.v.Milliseconds(), 1), 10)+"ms")
	}
	return `SELECT set_config(g.name, CASE WHEN current_setting(g.name) = '0' OR CAST(current_setting(g.name) AS interval) > CAST(g.v AS interval)
		THEN g.v ELSE current_setting(g.name) END, true) FROM (VALUES ` + strings.Join(rows, ", ") + `) AS g(name, v)`
}
