package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/batoncrawl/baton/activities/jobs"
)

// This file holds the last step of a hand-out: the URLs chosen move into
// the batch.

// handTo moves the chosen queued URLs into batch, counts them taken by
// shard and, with grow, adds them to the batch row's size; it returns
// those moved, in frontier order. On PostgreSQL the three writes are one
// statement (a pull's round trips are most of its time under the job's
// lock on a busy machine).
func (s *frontierStore) handTo(ctx context.Context, tx dbtx, w *writes, job, batch, shard string, grow bool, chosen []candidate) (func() []jobs.Entry, error) {
	if len(chosen) == 0 {
		return func() []jobs.Entry { return nil }, nil
	}
	moved := map[string]bool{}
	for rest := slices.SortedFunc(slices.Values(chosen), func(a, b candidate) int { return cmp.Compare(a.seq, b.seq) }); len(rest) > 0; {
		part := rest[:min(len(rest), handToChunk)]
		rest = rest[len(part):]
		q, args := s.handToQuery(job, batch, shard, handoutOf(ctx), grow, part)
		if s.d.joinedWrites {
			// Read once the writes are done (a pipeline's commit).
			if err := w.query(ctx, fmt.Sprintf("hand out job %s batch %s", job, batch), s.q(q), args, intoSet(moved)); err != nil {
				return nil, err
			}
			continue
		}
		if err := s.moveRows(ctx, tx, q, args, job, batch, shard, grow, moved); err != nil {
			return nil, err
		}
	}
	return func() []jobs.Entry {
		out := make([]jobs.Entry, 0, len(moved))
		for _, c := range chosen {
			if moved[c.e.URL] {
				out = append(out, c.e)
			}
		}
		return out
	}, nil
}

// handToChunk is how many URLs one statement of handTo moves at most.
const handToChunk = 200

// handToQuery is the statement of handTo moving part (chosen URLs in seq
// order) into batch, marked with the hand-out's token (handout.go; nil:
// none), and its arguments; where the engine takes joined
// writes, it counts them taken by shard and, with grow, adds them to the
// batch's size too.
func (s *frontierStore) handToQuery(job, batch, shard string, handout any, grow bool, part []candidate) (string, []any) {
	args := []any{batch, handout, job}
	if s.d.rowRef != "" {
		args = append(args, job, part[0].seq, part[len(part)-1].seq)
	}
	var in strings.Builder
	for i, c := range part {
		if i > 0 {
			in.WriteString(", ")
		}
		in.WriteString("?")
		args = append(args, c.seq)
	}
	// By their seq, found by the queued index (job, seq). SQLite's seq
	// is the rowid: each row is found at once. PostgreSQL's planner
	// cannot be left to choose: at a job's start its statistics still
	// say no URL is queued (they were sampled before the first URLs
	// came), so for "seq IN (…)" or "url IN (…)" it walks the host
	// index over every queued URL of the job, filtering, under the
	// job's lock, which every other pull waits for. An ordered scan of
	// the queued index over the chosen range (the plan of choose's own
	// scan), then each row by its address, reads about the rows moved.
	q := `UPDATE baton_frontier SET state = 1, batch = ?, handout = ? WHERE job = ? AND state = 0 AND ` + s.d.seqCol + ` IN (` + in.String() + `) RETURNING url`
	if s.d.rowRef != "" {
		q = `UPDATE baton_frontier SET state = 1, batch = ?, handout = ? WHERE job = ? AND state = 0 AND ` + s.d.rowRef + ` IN (
			SELECT ` + s.d.rowRef + ` FROM baton_frontier WHERE job = ? AND state = 0 AND seq BETWEEN ? AND ? AND seq IN (` + in.String() + `)
			ORDER BY seq LIMIT ` + strconv.Itoa(len(part)) + `) RETURNING url`
	}
	if !s.d.joinedWrites {
		return q, args
	}
	// With the counter and the batch's size (data-modifying CTEs, each run
	// once and to completion; the batch row is this transaction's already,
	// the counter row its holder's pulls' only).
	q = `WITH moved AS (` + q + `),
		counted AS (` + countsInsert + `SELECT CAST(? AS TEXT), CAST(? AS TEXT), 0, COUNT(*), 0, 0, 0, 0 FROM moved` + countsAdd + `)`
	args = append(args, job, shard)
	if grow {
		q += `, grown AS (UPDATE baton_batches SET size = size + (SELECT COUNT(*) FROM moved) WHERE job = ? AND id = ?)`
		args = append(args, job, batch)
	}
	return q + ` SELECT url FROM moved`, args
}

// moveRows runs a statement of handToQuery (without joined writes) on tx,
// adds the URLs it moved to moved, counts them taken by shard and, with
// grow, adds them to the batch's size.
func (s *frontierStore) moveRows(ctx context.Context, tx dbtx, q string, args []any, job, batch, shard string, grow bool, moved map[string]bool) error {
	rows, err := queryTx(ctx, s.core, tx, q, args, func(rows *sql.Rows) (string, error) {
		var u string
		return u, rows.Scan(&u)
	})
	if err != nil {
		return fmt.Errorf("hand out job %s batch %s: %w", job, batch, err)
	}
	if len(rows) == 0 {
		return nil
	}
	for _, u := range rows {
		moved[u] = true
	}
	if err := s.count(ctx, tx, job, shard, counts{taken: len(rows)}); err != nil {
		return err
	}
	if grow {
		if _, err := tx.ExecContext(ctx, s.q(growSQL), len(rows), job, batch); err != nil {
			return fmt.Errorf("hand out job %s batch %s: size: %w", job, batch, err)
		}
	}
	return nil
}
