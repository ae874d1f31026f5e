package sqlstore

import (
	"context"
	crand "crypto/rand"
	"database/sql"
	"encoding/hex"
	"sync/atomic"
	"time"

	"github.com/batoncrawl/baton/activities/jobs"
)

// This file holds how a retried hand-out finds what its first try
// handed out. A hand-out (a pull, a taking group commit) marks the URLs
// it moves into a batch with a token of its own (baton_frontier.handout).
// When a try's outcome is unknown (the reply to its COMMIT lost with the
// connection), the hand-out looks for the batch's unfinished URLs of that
// token: if that try committed, they are returned, instead of handing out
// others (or none: a group commit's links are no longer new) and leaving
// those in the batch, unknown to its Runner, with their hosts leased.

type handoutKey struct{}

// handout is a hand-out's token and how many times it was tried
// (retrying counts them).
type handout struct {
	token string
	tries atomic.Int32
}

// retried reports whether the hand-out was tried more than once.
func (h *handout) retried() bool { return h.tries.Load() > 1 }

// withHandout returns ctx carrying a new hand-out, and the hand-out.
func withHandout(ctx context.Context) (context.Context, *handout) {
	b := make([]byte, 12)
	_, _ = crand.Read(b)
	h := &handout{token: hex.EncodeToString(b)}
	return context.WithValue(ctx, handoutKey{}, h), h
}

// handoutIn is the hand-out ctx carries, or nil.
func handoutIn(ctx context.Context) *handout {
	h, _ := ctx.Value(handoutKey{}).(*handout)
	return h
}

// handoutOf is the token of the hand-out ctx carries, or nil (NULL) for
// none.
func handoutOf(ctx context.Context) any {
	if h := handoutIn(ctx); h != nil {
		return h.token
	}
	return nil
}

// handedOut returns the URLs of batch marked with token, still
// unfinished, in frontier order.
func (s *frontierStore) handedOut(ctx context.Context, job, batch, token string) ([]jobs.Entry, error) {
	return queryAll(ctx, s.core, `SELECT `+entryCols+` FROM baton_frontier WHERE job = ? AND batch = ? AND state = 1 AND handout = ? ORDER BY `+s.d.seqCol,
		[]any{job, batch, token}, func(rows *sql.Rows) (jobs.Entry, error) { return scanEntry(rows) })
}

// pulledBefore returns what an earlier try of the pull of token handed
// batch, if it committed (ok), as the pull returns it: its URLs still
// unfinished and the batch's leases now.
func (s *frontierStore) pulledBefore(ctx context.Context, job, batch, token string) (out jobs.Pulled, ok bool, err error) {
	entries, err := s.handedOut(ctx, job, batch, token)
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
