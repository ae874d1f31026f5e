package sqlstore

import (
	"context"
	crand "crypto/rand"
	"database/sql"
	"encoding/hex"
	"time"

	"github.com/batoncrawl/baton/activities/jobs"
)

// This file holds how a retried pull finds what its first try handed
// out. A pull marks the URLs it moves into a batch with a token of its
// own (baton_frontier.handout). When a try's outcome is unknown (the
// reply to its COMMIT lost with the connection), the next try first looks
// for the batch's unfinished URLs of that token: if the first try
// committed, they are returned, instead of handing out others and leaving
// those in the batch, unknown to its Runner, with their hosts leased.

type handoutKey struct{}

// withHandout returns ctx carrying a new hand-out token, and the token.
func withHandout(ctx context.Context) (context.Context, string) {
	b := make([]byte, 12)
	_, _ = crand.Read(b)
	token := hex.EncodeToString(b)
	return context.WithValue(ctx, handoutKey{}, token), token
}

// handoutOf is the hand-out token ctx carries, or nil (NULL) for none.
func handoutOf(ctx context.Context) any {
	if t, ok := ctx.Value(handoutKey{}).(string); ok {
		return t
	}
	return nil
}

// pulledBefore returns what an earlier try of the pull of token handed
// batch, if it committed (ok), as the pull returns it: its URLs still
// unfinished and the batch's leases now.
func (s *frontierStore) pulledBefore(ctx context.Context, job, batch, token string) (out jobs.Pulled, ok bool, err error) {
	entries, err := queryAll(ctx, s.core, `SELECT `+entryCols+` FROM baton_frontier WHERE job = ? AND batch = ? AND state = 1 AND handout = ? ORDER BY `+s.d.seqCol,
		[]any{job, batch, token}, func(rows *sql.Rows) (jobs.Entry, error) { return scanEntry(rows) })
	if err != nil || len(entries) == 0 {
		return out, false, err
	}
	hosts, err := s.hosts.Leases(ctx, job, batch)
	if err != nil {
		return out, false, err
	}
	pol, err := s.policy(ctx, s.db, job)
	if err != nil {
		return out, false, err
	}
	return jobs.Pulled{Entries: entries, Hosts: hosts, TTL: time.Duration(pol.ttlMS) * time.Millisecond}, true, nil
}
