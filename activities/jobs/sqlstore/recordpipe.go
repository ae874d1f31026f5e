package sqlstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/batoncrawl/baton/activities/crawl"
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
// them. Statement by statement, each statement of a commit is a round
// trip of its own, parsed and answered on its own; what the pipeline
// saves is in docs/benchmarks.md.

// recordPipelined is RecordTake on PostgreSQL in two round trips, for a
// job without max_pages and pages without items; ok is false when it
// does not apply and the caller records statement by statement. g.out is
// filled as RecordTake's and taken are the links handed to the batch. A
// group that takes links (a crawl's first waves, a Runner's idle slots)
// reads the hosts it may take (takeHosts) with its BEGIN, inserts every
// new link queued, and moves the first take of the new ones of those
// hosts into its batch with its COMMIT, with the batch's size: rows it
// inserted itself, under its own locks.
func (s *resultStore) recordPipelined(ctx context.Context, g *group) (ok bool, taken []jobs.Entry, err error) {
	if !s.d.pipeline {
		return false, nil, nil
	}
	for _, r := range g.rs {
		if len(r.Items) > 0 || r.CarryItemsFrom != "" {
			return false, nil, nil
		}
	}
	if maxPages, err := s.jobMaxPages(ctx, s.db, g.job); err != nil || maxPages > 0 {
		return false, nil, nil // statement by statement says what is wrong
	}
	p := &pipedRecord{s: s, g: g, takes: g.take > 0 && len(g.links) > 0}
	p.linkSts = s.chunked(linksHead, nil, linksTuple, linksTail, g.linkRows(g.links))
	p.finishSts = s.chunked(finishHead, []any{g.job, g.batch}, "?", finishTail, g.urls)
	// Every page's hash, finished or not (which pages are is known once
	// the finish is read).
	p.hashes = claimHashes(g.rs, func(string) bool { return true })
	err = s.pipelined(ctx, func(b *pgx.Batch) func(pgx.BatchResults) (rest, error) {
		p.queue(b)
		return func(br pgx.BatchResults) (rest, error) { return p.read(ctx, br) }
	})
	if err != nil {
		return true, nil, err
	}
	return true, p.taken, nil
}

// pipedRecord is a group commit in a pipeline: the statements sent with
// its BEGIN, and the links it hands to the batch.
type pipedRecord struct {
	s                  *resultStore
	g                  *group
	takes              bool // the group takes links: the hosts it may take are read
	linkSts, finishSts []statement
	hashes             []any // the body hashes whose owners are read
	taken              []jobs.Entry
}

// queue queues the statements that go with the BEGIN.
func (p *pipedRecord) queue(b *pgx.Batch) {
	s, g := p.s, p.g
	if p.takes {
		query, args := s.takeHostsQuery(g.job, g.batch, g.rs)
		b.Queue(s.q(query), args...)
	}
	for _, sts := range [][]statement{p.linkSts, p.finishSts} {
		for _, st := range sts {
			b.Queue(st.query, st.args...)
		}
	}
	if len(p.hashes) > 0 {
		query, args := ownersQuery(g.job, p.hashes)
		b.Queue(s.q(query), args...)
	}
	b.Queue(s.q(batchRowQuery(s.d.forUpdate)), g.job, g.batch)
}

// read reads the results of queue's statements, checks the batch's epoch,
// and returns the rest of the commit.
func (p *pipedRecord) read(ctx context.Context, br pgx.BatchResults) (rest, error) {
	g := p.g
	clear(g.out)
	p.taken = nil
	var hosts map[string]bool
	if p.takes {
		held, err := collect(br, scanHost)
		if err != nil {
			return nil, fmt.Errorf("record: host leases of batch %s: %w", g.batch, err)
		}
		hosts = hostSet(held)
	}
	added, err := readURLs(br, len(p.linkSts))
	if err != nil {
		return nil, fmt.Errorf("record: queue links: %w", err)
	}
	finished, err := readURLs(br, len(p.finishSts))
	if err != nil {
		return nil, fmt.Errorf("record: finish URLs: %w", err)
	}
	owners := map[string]string{}
	if len(p.hashes) > 0 {
		rows, err := collect(br, scanOwner)
		if err != nil {
			return nil, fmt.Errorf("record: body hashes: %w", err)
		}
		owners = ownerMap(rows)
	}
	bi, err := scanBatch(br.QueryRow(), g.job, g.batch)
	if err != nil {
		return nil, err
	}
	if err := heldAt(bi, g.epoch); err != nil {
		return nil, err
	}
	g.countAdded(added)
	taken, mine := takeNew(g.links, added, hosts, g.take)
	p.taken = taken
	return func(tx dbtx, w *writes) (func() error, error) {
		return p.commit(ctx, w, mine, len(added), finished, owners)
	}, nil
}

// commit queues the writes that go with the COMMIT: the links taken
// (mine, rows for takeHead) moved into the batch with its size, the
// results with the writer's counter (added: the links added; owners: the
// owners of the body hashes found), the bodies; it returns what fills
// g.out once they are committed.
func (p *pipedRecord) commit(ctx context.Context, w *writes, mine [][]any, added int, finished map[string]bool, owners map[string]string) (func() error, error) {
	s, g := p.s, p.g
	if len(p.taken) > 0 {
		for _, st := range s.chunked(takeHead, []any{g.batch, handoutOf(ctx), g.job}, "?", ")", mine) {
			if err := w.exec(ctx, "record: take links", st.query, st.args...); err != nil {
				return nil, err
			}
		}
		if err := w.exec(ctx, "record: batch size", s.q(growSQL), len(p.taken), g.job, g.batch); err != nil {
			return nil, err
		}
	}
	results, bodies, err := resultRows(g.job, g.batch, g.rs, finished, owners, g.refused)
	if err != nil {
		return nil, err
	}
	wrote := map[string]bool{}
	// The results with the writer's counter (data-modifying CTEs, each
	// run once and to completion); the links it added counted with the
	// first.
	counted := `, failed), counted AS (` + countsInsert +
		`SELECT CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS INTEGER), CAST(? AS INTEGER), 0, COUNT(*), COUNT(*) FILTER (WHERE failed = 1), 0 FROM wrote` + countsAdd
	if rendersAny(g.rs) {
		counted = pipeRenderCounted
	}
	sts := s.chunked(`WITH wrote AS (`+resultsHead, nil, resultsTuple, resultsTail+counted+`) SELECT url FROM wrote`, results, g.job, g.shard, 0, 0)
	if len(sts) > 0 {
		args := sts[0].args
		args[len(args)-2], args[len(args)-1] = added, len(p.taken)
	} else if added > 0 {
		if err := w.exec(ctx, "record: counters", s.q(countSQL), append([]any{g.job, g.shard, added, len(p.taken), 0, 0, 0, 0}, renderCounts{}.values()...)...); err != nil {
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
		for i, r := range g.rs {
			g.out[i].Wrote = finished[r.URL] && r.Page != nil && wrote[r.URL]
		}
		return nil
	}, nil
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

// pipeRenderCounted counts the pages a pipelined commit wrote, as the
// plain statement does, and those of them rendered, by reason, read from
// their records (a commit with no rendered page uses the plain one).
var pipeRenderCounted = `, failed, record), counted AS (INSERT INTO baton_counters (job, shard, seen, taken, requeued, recorded, failed, items, ` +
	strings.Join(renderColumns, ", ") + `) ` +
	`SELECT CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS INTEGER), CAST(? AS INTEGER), 0, COUNT(*), COUNT(*) FILTER (WHERE failed = 1), 0, ` +
	reasonCount(crawl.ReasonAlways) + `, ` + reasonCount(crawl.ReasonEmptyFields) + `, ` + reasonCount(crawl.ReasonNoLinks) + `, ` +
	reasonCount(crawl.ReasonSample) + `, ` + reasonCount(crawl.ReasonLabel) + `, ` +
	`COALESCE(SUM(COALESCE((record::jsonb->>'render_crashes')::bigint, 0)), 0), ` +
	`COUNT(*) FILTER (WHERE (record::jsonb->>'render_timed_out') = 'true') FROM wrote` + countsAdd + addColumns(renderColumns)

func reasonCount(reason string) string {
	return `COUNT(*) FILTER (WHERE (record::jsonb->>'render_reason') = '` + reason + `')`
}

// rendersAny reports whether a page of rs was rendered.
func rendersAny(rs []jobs.Record) bool {
	for _, r := range rs {
		if r.Page != nil && (r.Page.RenderReason != "" || r.Page.RenderCrashes > 0 || r.Page.RenderTimedOut) {
			return true
		}
	}
	return false
}
