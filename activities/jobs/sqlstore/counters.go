package sqlstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/jobs"
)

// This file holds a job's counters: rows per writer (baton_counters),
// summed when read, so that writers of one job never wait for one row.

type counts struct {
	seen, taken, requeued, recorded, failed, items int
	render                                         renderCounts
}

// renderCounts count the pages recorded rendered, by reason, and the
// crashes and time-outs of their renders.
type renderCounts struct{ always, autoFields, autoLinks, autoSample, label, crashes, timeouts int }

// renderColumns are renderCounts' columns in baton_counters, in order.
var renderColumns = []string{"render_always", "render_auto_fields", "render_auto_links", "render_auto_sample", "render_label", "render_crashes", "render_timeouts"}

func (r renderCounts) values() []any {
	return []any{r.always, r.autoFields, r.autoLinks, r.autoSample, r.label, r.crashes, r.timeouts}
}

// add counts a recorded page's render.
func (r *renderCounts) add(p *crawl.Page) {
	switch p.RenderReason {
	case crawl.ReasonAlways:
		r.always++
	case crawl.ReasonEmptyFields:
		r.autoFields++
	case crawl.ReasonNoLinks:
		r.autoLinks++
	case crawl.ReasonSample:
		r.autoSample++
	case crawl.ReasonLabel:
		r.label++
	}
	r.crashes += p.RenderCrashes
	if p.RenderTimedOut {
		r.timeouts++
	}
}

// A writer's counter row, added to: countsInsert, then the row's values
// (job, shard, seen, taken, requeued, recorded, failed, items), then
// countsAdd. (The render columns keep their default, 0.)
const (
	countsInsert = `INSERT INTO baton_counters (job, shard, seen, taken, requeued, recorded, failed, items) `
	countsAdd    = ` ON CONFLICT (job, shard) DO UPDATE SET
			seen = baton_counters.seen + excluded.seen,
			taken = baton_counters.taken + excluded.taken,
			requeued = baton_counters.requeued + excluded.requeued,
			recorded = baton_counters.recorded + excluded.recorded,
			failed = baton_counters.failed + excluded.failed,
			items = baton_counters.items + excluded.items`
)

// countSQL adds to every counter of a writer's row, the renderColumns
// after items.
var countSQL = `INSERT INTO baton_counters (job, shard, seen, taken, requeued, recorded, failed, items, ` + strings.Join(renderColumns, ", ") + `) ` +
	`VALUES (?, ?, ?, ?, ?, ?, ?, ?` + strings.Repeat(", ?", len(renderColumns)) + `)` + countsAdd + addColumns(renderColumns)

func addColumns(cols []string) string {
	var b strings.Builder
	for _, c := range cols {
		fmt.Fprintf(&b, ",\n\t\t\t%s = baton_counters.%s + excluded.%s", c, c, c)
	}
	return b.String()
}

func (s *core) count(ctx context.Context, tx dbtx, job, shard string, c counts) error {
	if c == (counts{}) {
		return nil
	}
	args := append([]any{job, shard, c.seen, c.taken, c.requeued, c.recorded, c.failed, c.items}, c.render.values()...)
	_, err := tx.ExecContext(ctx, s.q(countSQL), args...)
	return err
}

func (s *core) sums(ctx context.Context, q querier, job string) (counts, error) {
	var c counts
	r := &c.render
	sums := ""
	for _, col := range renderColumns {
		sums += ", COALESCE(SUM(" + col + "), 0)"
	}
	err := q.QueryRowContext(ctx, s.q(`SELECT COALESCE(SUM(seen), 0), COALESCE(SUM(taken), 0), COALESCE(SUM(requeued), 0),
		COALESCE(SUM(recorded), 0), COALESCE(SUM(failed), 0), COALESCE(SUM(items), 0)`+sums+` FROM baton_counters WHERE job = ?`), job).
		Scan(&c.seen, &c.taken, &c.requeued, &c.recorded, &c.failed, &c.items,
			&r.always, &r.autoFields, &r.autoLinks, &r.autoSample, &r.label, &r.crashes, &r.timeouts)
	return c, err
}

func stats(c counts, maxPages int) jobs.Stats {
	st := jobs.Stats{Seen: c.seen, Queued: c.seen - c.taken + c.requeued, Recorded: c.recorded, Failed: c.failed, Items: c.items}
	if maxPages > 0 {
		st.Seen = min(st.Seen, maxPages)
		st.Queued = max(0, min(st.Queued, maxPages-(c.taken-c.requeued)))
	}
	r := c.render
	st.Render = jobs.RenderStats{Always: r.always, AutoEmptyFields: r.autoFields, AutoNoLinks: r.autoLinks, AutoSample: r.autoSample,
		Label: r.label, Crashes: r.crashes, TimedOut: r.timeouts}
	st.Render.Rendered = r.always + r.autoFields + r.autoLinks + r.autoSample + r.label
	return st
}

// Stats returns a job's counters.
func (s *jobStore) Stats(ctx context.Context, job string) (jobs.Stats, error) {
	var st jobs.Stats
	err := s.read(ctx, func() error {
		maxPages, err := s.jobMaxPages(ctx, s.db, job)
		if err != nil {
			return err
		}
		c, err := s.sums(ctx, s.db, job)
		if err != nil {
			return err
		}
		st = stats(c, maxPages)
		return nil
	})
	return st, err
}
