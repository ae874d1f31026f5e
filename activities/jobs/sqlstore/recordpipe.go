package sqlstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/batoncrawl/baton/activities/jobs"
)

// This file holds PostgreSQL's group commit in two round trips (pgx's
// pipeline, as a pull's: pipeline.go). With its BEGIN go the group's new
// links, its own URLs finished, the body hashes claimed and, last, the
// batch's row locked and read; with its COMMIT, once the epoch was found
// right, the results with the writer's counter (one statement) and the
// bodies. The rows are taken in the order of every recording (record.go)
// but for the batch's row, now before the results, counter and bodies:
// rows no other transaction takes before that batch row (the results and
// bodies are the batch's own URLs, the counter row its writer's), and a
// commit at a stale epoch reads the row and rolls back before it writes
// them. Statement by statement a commit was 7 or 8 round trips, each
// parsed and answered on its own: about 1.2 ms of CPU a commit beside
// what its rows cost, half of it the worker's.

// recordPipelined is RecordTake on PostgreSQL in two round trips, for a
// job without max_pages and pages without items; ok is false when it
// does not apply and the caller records statement by statement. links
// are the group's links to send, in URL order; urls its own, in URL
// order; out is filled as RecordTake's and taken are the links handed to
// the batch. A group that takes links (a crawl's first waves, a Runner's
// idle slots) reads the hosts it may take (takeHosts) with its BEGIN,
// inserts every new link queued, and moves the first take of the new
// ones of those hosts into its batch with its COMMIT, with the batch's
// size: rows it inserted itself, under its own locks (statement by
// statement, 8 round trips).
func (s *resultStore) recordPipelined(ctx context.Context, rs []jobs.Record, take int, links []jobs.Entry, urls [][]any, owner map[string]int, refused map[int][]jobs.RefusedLink, out []jobs.Recorded) (ok bool, taken []jobs.Entry, err error) {
	if !s.d.pipeline {
		return false, nil, nil
	}
	job, batch, epoch, shard := rs[0].Job, rs[0].Batch, rs[0].Epoch, rs[0].Runner
	for _, r := range rs {
		if len(r.Items) > 0 {
			return false, nil, nil
		}
	}
	if maxPages, err := s.jobMaxPages(ctx, s.db, job); err != nil || maxPages > 0 {
		return false, nil, nil // statement by statement says what is wrong
	}
	rows := make([][]any, len(links))
	for i, l := range links {
		rows[i] = entryRow(job, l)
	}
	linkSts := s.chunked(linksHead, nil, linksTuple, linksTail, rows)
	finishSts := s.chunked(finishHead, []any{job, batch}, "?", finishTail, urls)
	// Every page's hash, finished or not: a page not finished here was
	// recorded by an earlier try of this commit, which claimed the same.
	claims := hashClaims(job, rs, func(string) bool { return true })
	claimSts := s.chunked(claimHead, nil, claimTuple, claimTail, claims)
	err = s.pipelined(ctx, func(b *pgx.Batch) func(pgx.BatchResults) (rest, error) {
		if take > 0 && len(links) > 0 {
			query, args := s.takeHostsQuery(job, batch, rs)
			b.Queue(s.q(query), args...)
		}
		for _, sts := range [][]statement{linkSts, finishSts, claimSts} {
			for _, st := range sts {
				b.Queue(st.query, st.args...)
			}
		}
		b.Queue(s.q(batchRowQuery(s.d.forUpdate)), job, batch)
		return func(br pgx.BatchResults) (rest, error) {
			clear(out)
			taken = nil
			var hosts map[string]bool
			if take > 0 && len(links) > 0 {
				held, err := collect(br, scanHost)
				if err != nil {
					return nil, fmt.Errorf("record: host leases of batch %s: %w", batch, err)
				}
				hosts = hostSet(held)
			}
			added, err := readURLs(br, len(linkSts))
			if err != nil {
				return nil, fmt.Errorf("record: queue links: %w", err)
			}
			finished, err := readURLs(br, len(finishSts))
			if err != nil {
				return nil, fmt.Errorf("record: finish URLs: %w", err)
			}
			claimed, err := readURLs(br, len(claimSts))
			if err != nil {
				return nil, fmt.Errorf("record: body hashes: %w", err)
			}
			bi, err := scanBatch(br.QueryRow(), job, batch)
			if err != nil {
				return nil, err
			}
			if err := heldAt(bi, epoch); err != nil {
				return nil, err
			}
			for u := range added {
				out[owner[u]].Added++
			}
			var mine [][]any
			taken, mine = takeNew(links, added, hosts, take)
			return func(tx dbtx, w *writes) (func() error, error) {
				if len(taken) > 0 {
					for _, st := range s.chunked(takeHead, []any{batch, job}, "?", ")", mine) {
						if err := w.exec(ctx, "record: take links", st.query, st.args...); err != nil {
							return nil, err
						}
					}
					if err := w.exec(ctx, "record: batch size", s.q(growSQL), len(taken), job, batch); err != nil {
						return nil, err
					}
				}
				dups, err := s.duplicatesOf(ctx, tx, job, rs, finished, claims, claimed)
				if err != nil {
					return nil, fmt.Errorf("record: body hashes: %w", err)
				}
				results, bodies, err := resultRows(job, batch, rs, finished, dups, refused)
				if err != nil {
					return nil, err
				}
				wrote := map[string]bool{}
				// The results with the writer's counter (data-modifying
				// CTEs, each run once and to completion); the links it
				// added counted with the first.
				sts := s.chunked(`WITH wrote AS (`+resultsHead, nil, resultsTuple, resultsTail+`, failed), counted AS (`+countsInsert+
					`SELECT CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS INTEGER), CAST(? AS INTEGER), 0, COUNT(*), COUNT(*) FILTER (WHERE failed = 1), 0 FROM wrote`+
					countsAdd+`) SELECT url FROM wrote`, results, job, shard, 0, 0)
				if len(sts) > 0 {
					args := sts[0].args
					args[len(args)-2], args[len(args)-1] = len(added), len(taken)
				} else if len(added) > 0 {
					if err := w.exec(ctx, "record: counters", s.q(countSQL), job, shard, len(added), len(taken), 0, 0, 0, 0); err != nil {
						return nil, err
					}
				}
				for _, st := range sts {
					if err := w.query(ctx, "record: results", st.query, st.args, intoSet(wrote)); err != nil {
						return nil, err
					}
				}
				for _, st := range s.chunked(bodiesHead, nil, bodiesTuple, bodiesTail, bodies) {
					if err := w.exec(ctx, "record: bodies", st.query, st.args...); err != nil {
						return nil, err
					}
				}
				return func() error {
					for i, r := range rs {
						out[i].Wrote = finished[r.URL] && r.Page != nil && wrote[r.URL]
					}
					return nil
				}, nil
			}, nil
		}
	})
	if err != nil {
		taken = nil
	}
	return true, taken, err
}

// readURLs reads the URLs the next n results of a pipeline return (each a
// statement ending in RETURNING url).
func readURLs(br pgx.BatchResults, n int) (map[string]bool, error) {
	out := map[string]bool{}
	for range n {
		us, err := collect(br, func(row scanner) (string, error) {
			var u string
			return u, row.Scan(&u)
		})
		if err != nil {
			return nil, err
		}
		for _, u := range us {
			out[u] = true
		}
	}
	return out, nil
}
