package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/batoncrawl/baton/activities/jobs"
)

// This file holds the bulk carry of an adaptive run's pages not due
// (jobs.BulkCarrier): in one transaction per call, the baseline's rows of
// the batch's entries not due are read (their links only), their links
// queued, their entries finished, the batch's epoch checked, and their
// results copied from the baseline's rows by one INSERT … SELECT per
// chunk, the record rewritten in SQL as the per-page path
// (jobs.carried) writes it. The rows are taken in the order of every
// group commit (record.go): links, own URLs, batch row, results, counter.

// carryClean is the condition on a baseline row b that the bulk carry
// copies: recorded with its revisit columns, not failed, and with nothing
// the per-page path would count or rewrite otherwise (links refused,
// items, a render). A key is matched with its quotes and colon: in a
// string value the quotes are escaped. The record is searched for each
// key as bytes (instr, strpos), not with LIKE (a pattern match, case
// folded on SQLite).
func (s *resultStore) carryClean() string {
	find := "instr"
	if s.d.name == "postgres" {
		find = "strpos"
	}
	var b strings.Builder
	b.WriteString(`b.change IS NOT NULL AND b.failed = 0`)
	for _, key := range []string{"links_refused", "items", "render_reason", "render_crashes", "render_timed_out"} {
		b.WriteString(` AND ` + find + `(b.record, '"` + key + `":') = 0`)
	}
	return b.String()
}

// carryLinks is the dialect's expression of a baseline record's links
// (a JSON array, or NULL), and its condition on a row it can rewrite.
func (s *resultStore) carryLinks() (links, clean string) {
	if s.d.name == "postgres" {
		// jsonb refuses a \u0000 in a string: such a row is the per-page
		// path's.
		return `(b.record::jsonb -> 'links')::text`, ` AND strpos(b.record, '\u0000') = 0`
	}
	return `json_extract(b.record, '$.links')`, ""
}

// carryRecord is the dialect's rewrite of the baseline's record b.record
// of the page of frontier row f; its arguments: follow (1 or 0),
// max_depth, job, batch, runner, epoch.
func (s *resultStore) carryRecord() string {
	if s.d.name == "postgres" {
		return `(CASE WHEN ? = 1 AND f.depth < ? THEN b.record::jsonb ELSE b.record::jsonb - 'links' END
			- 'duplicate_of' - 'body_ref' - 'links_refused' - 'label'
			|| jsonb_build_object('job', ?::text, 'batch', ?::text, 'runner', ?::text, 'epoch', ?::bigint,
				'depth', f.depth, 'bytes', 0, 'duration_ms', 0, 'attempts', 0, 'change', 'unchanged', 'carried', true)
			|| CASE WHEN COALESCE(f.label, '') = '' THEN '{}'::jsonb ELSE jsonb_build_object('label', f.label) END)::text`
	}
	return `json_remove(json_set(
		CASE WHEN ? = 1 AND f.depth < ? THEN json_remove(b.record, '$.duplicate_of', '$.body_ref', '$.links_refused', '$.label')
			ELSE json_remove(b.record, '$.duplicate_of', '$.body_ref', '$.links_refused', '$.label', '$.links') END,
		'$.job', ?, '$.batch', ?, '$.runner', ?, '$.epoch', ?, '$.depth', f.depth, '$.bytes', 0, '$.duration_ms', 0,
		'$.attempts', 0, '$.change', 'unchanged', '$.carried', json('true'),
		'$.label', f.label), CASE WHEN COALESCE(f.label, '') = '' THEN '$.label' ELSE '$.label_' END)`
}

// carryBytes is the dialect's expression of the bytes of b.record.
func (s *resultStore) carryBytes() string {
	if s.d.name == "postgres" {
		return `COALESCE((b.record::jsonb ->> 'bytes')::bigint, 0)`
	}
	return `COALESCE(json_extract(b.record, '$.bytes'), 0)`
}

// CarryNotDue carries over the entries of req whose baseline page is not
// due (see jobs.BulkCarrier). A job with max_pages is left to the
// per-page path (its links are counted against the quota there).
func (s *resultStore) CarryNotDue(ctx context.Context, req jobs.CarryRequest) (jobs.CarryResult, error) {
	var out jobs.CarryResult
	byURL := make(map[string]jobs.Entry, len(req.Entries))
	var urls [][]any
	for _, e := range req.Entries {
		if e.Depth >= 0 {
			byURL[e.URL] = e
			urls = append(urls, []any{e.URL})
		}
	}
	if len(urls) == 0 || req.Baseline == "" {
		return out, nil
	}
	if maxPages, err := s.jobMaxPages(ctx, s.db, req.Job); err != nil || maxPages > 0 {
		return out, err
	}
	slices.SortFunc(urls, func(a, b []any) int { return strings.Compare(a[0].(string), b[0].(string)) })
	known := s.frontier.knownFor(req.Job)
	// The baseline is a finished job: its rows are read once, outside the
	// write transaction, and a run whose pages are all due (a plain run)
	// takes none. Whether each page is still the batch's to carry is
	// decided in the transaction (finishHead), and a link queued since
	// the read is skipped there (linksHead).
	var due, links [][]any
	if err := s.read(ctx, func() error {
		var err error
		due, links, err = s.carryCandidates(ctx, s.db, req, byURL, urls, known)
		return err
	}); err != nil || len(due) == 0 {
		return out, err
	}
	leave(req, due)
	var sent []string
	err := s.write(ctx, func(tx *sql.Tx) error {
		out, sent = jobs.CarryResult{}, nil
		added, err := s.returning(ctx, tx, linksHead, nil, linksTuple, linksTail, links)
		if err != nil {
			return fmt.Errorf("carry: queue links: %w", err)
		}
		finished, err := s.returning(ctx, tx, finishHead, []any{req.Job, req.Batch}, "?", finishTail, due)
		if err != nil {
			return fmt.Errorf("carry: finish URLs: %w", err)
		}
		if _, err := s.frontier.checkEpoch(ctx, tx, req.Job, req.Batch, req.Epoch, s.d.forUpdate); err != nil {
			return err
		}
		var own [][]any
		for _, r := range due {
			if u := r[0].(string); finished[u] {
				own = append(own, r)
				out.Carried = append(out.Carried, u)
			}
		}
		wrote, err := s.copyResults(ctx, tx, req, own)
		if err != nil {
			return err
		}
		out.Added = len(added)
		for _, l := range links {
			sent = append(sent, l[1].(string))
		}
		return s.count(ctx, tx, req.Job, req.Runner, counts{seen: len(added), recorded: len(wrote)})
	})
	if err != nil {
		return jobs.CarryResult{}, fmt.Errorf("job %s batch %s: carry over from %s: %w", req.Job, req.Batch, req.Baseline, err)
	}
	known.add(sent)
	return out, nil
}

// leave tells req.Left the entries of req that are not among due (rows
// of one URL each): the carry does not carry them.
func leave(req jobs.CarryRequest, due [][]any) {
	if req.Left == nil {
		return
	}
	carry := make(map[string]bool, len(due))
	for _, r := range due {
		carry[r[0].(string)] = true
	}
	var left []jobs.Entry
	for _, e := range req.Entries {
		if !carry[e.URL] {
			left = append(left, e)
		}
	}
	if len(left) > 0 {
		req.Left(left)
	}
}

// carryCandidates reads the baseline's rows of urls that are not due and
// that the bulk carry copies; it returns their URLs (rows for finishHead,
// in URL order) and the frontier rows of the links they queue (each once,
// in URL order, none known to be in the frontier already). A page with a
// link the frontier would refuse is left to the per-page path.
func (s *resultStore) carryCandidates(ctx context.Context, tx dbtx, req jobs.CarryRequest, byURL map[string]jobs.Entry, urls [][]any, known *knownURLs) (due, links [][]any, err error) {
	expr, clean := s.carryLinks()
	type cand struct {
		url   string
		links sql.NullString
	}
	seen := map[string]bool{}
	var out []jobs.Entry
	for _, st := range s.chunked(`SELECT b.url, `+expr+` FROM baton_results b WHERE b.job = ? AND b.next_ms > ? AND `+s.carryClean()+clean+` AND b.url IN (`,
		[]any{req.Baseline, req.Now.UnixMilli()}, "?", `)`, urls) {
		rows, err := queryTx(ctx, s.core, tx, st.query, st.args, func(r *sql.Rows) (cand, error) {
			var c cand
			return c, r.Scan(&c.url, &c.links)
		})
		if err != nil {
			return nil, nil, fmt.Errorf("carry: baseline rows: %w", err)
		}
		for _, c := range rows {
			e := byURL[c.url]
			var ls []string
			if req.Follow && e.Depth < req.MaxDepth && c.links.Valid && c.links.String != "" && c.links.String != "null" {
				if err := json.Unmarshal([]byte(c.links.String), &ls); err != nil {
					continue // the per-page path says what is wrong
				}
			}
			if slices.ContainsFunc(ls, func(l string) bool { return jobs.CheckURLLength(l) != nil }) {
				continue
			}
			due = append(due, []any{c.url})
			for _, l := range ls {
				if !seen[l] && !known.has(l) {
					seen[l] = true
					label := ""
					if req.Label != nil {
						label = req.Label(l)
					}
					out = append(out, jobs.Entry{URL: l, Depth: e.Depth + 1, Label: label})
				}
			}
		}
	}
	slices.SortFunc(due, func(a, b []any) int { return strings.Compare(a[0].(string), b[0].(string)) })
	slices.SortFunc(out, func(a, b jobs.Entry) int { return strings.Compare(a.URL, b.URL) })
	for _, l := range out {
		links = append(links, entryRow(req.Job, l))
	}
	return due, links, nil
}

// copyResults copies the baseline's rows of own (URLs finished in the
// batch by this carry) into the job's results, rewritten as carried; it
// returns the URLs written.
func (s *resultStore) copyResults(ctx context.Context, tx dbtx, req jobs.CarryRequest, own [][]any) (map[string]bool, error) {
	follow := 0
	if req.Follow {
		follow = 1
	}
	head := resultsInto + `
		SELECT f.job, b.url, CAST(? AS TEXT), 0, ` + s.carryRecord() + `, NULL, b.etag, b.last_modified, b.content_hash, 'unchanged',
		` + s.carryBytes() + `, NULL, b.interval_ms, b.next_ms, b.warc_id, b.warc_uri, b.warc_date, b.warc_digest
		FROM baton_results b JOIN baton_frontier f ON f.job = ? AND f.url = b.url
		WHERE b.job = ? AND b.url IN (`
	args := []any{req.Batch, follow, req.MaxDepth, req.Job, req.Batch, req.Runner, req.Epoch, req.Job, req.Baseline}
	wrote, err := s.returning(ctx, tx, head, args, "?", `) ORDER BY b.url ON CONFLICT (job, url) DO NOTHING RETURNING url`, own)
	if err != nil {
		return nil, fmt.Errorf("carry: results: %w", err)
	}
	return wrote, nil
}
