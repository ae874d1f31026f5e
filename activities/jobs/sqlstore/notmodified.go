package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/batoncrawl/baton/activities/jobs"
)

// This file holds the bulk recording of a recrawl's pages answered 304
// (jobs.NotModifiedRecorder): in one transaction per call, the steps of a
// group commit (record.go), in its order (links, own URLs, body hashes,
// batch row, results, counter), with each result row written by one
// INSERT … SELECT per chunk that takes the page's content fields
// (jobs.BaselineContentKeys) from the baseline's row, and the rest of the
// record, its revisit columns and its claim from the call.

// RecordNotModified records rs, pages answered 304 of one batch at one
// epoch, against the baseline's rows (see jobs.NotModifiedRecorder).
func (s *resultStore) RecordNotModified(ctx context.Context, baseline string, rs []jobs.Record) (jobs.NotModifiedResult, error) {
	var out jobs.NotModifiedResult
	var take []int
	for i, r := range rs {
		if jobs.NotModifiedRecord(r) && baseline != "" {
			take = append(take, i)
		} else {
			out.Left = append(out.Left, i)
		}
	}
	// A page whose baseline row is not copied (gone, or one PostgreSQL's
	// jsonb refuses) is left, and the others written again without it.
	for len(take) > 0 {
		group := make([]jobs.Record, len(take))
		for k, i := range take {
			group[k] = rs[i]
		}
		added, err := s.recordNotModified(ctx, baseline, group)
		var nc *notCopiedError
		if errors.As(err, &nc) {
			kept := take[:0:0]
			for _, i := range take {
				if nc.urls[rs[i].URL] {
					out.Left = append(out.Left, i)
				} else {
					kept = append(kept, i)
				}
			}
			take = kept
			continue
		}
		if err != nil {
			return jobs.NotModifiedResult{}, fmt.Errorf("job %s batch %s: pages answered 304 against %s: %w", rs[0].Job, rs[0].Batch, baseline, err)
		}
		out.Added = added
		break
	}
	slices.Sort(out.Left)
	return out, nil
}

// notCopiedError names the pages a bulk recording found no baseline row
// to copy of.
type notCopiedError struct{ urls map[string]bool }

func (e *notCopiedError) Error() string {
	return fmt.Sprintf("%d pages without a baseline row to copy", len(e.urls))
}

// recordNotModified writes rs in one transaction; it returns the links
// added to the frontier.
func (s *resultStore) recordNotModified(ctx context.Context, baseline string, rs []jobs.Record) (int, error) {
	known := s.frontier.knownFor(rs[0].Job)
	g, err := newGroup(rs, 0, known)
	if err != nil {
		return 0, err
	}
	var queued bool
	err = s.write(ctx, func(tx *sql.Tx) error {
		clear(g.out)
		var c counts
		var err error
		if queued, _, c, err = s.queueLinks(ctx, tx, g); err != nil {
			return err
		}
		finished, owners, err := s.finishOwn(ctx, tx, g)
		if err != nil {
			return err
		}
		if _, err := s.frontier.checkEpoch(ctx, tx, g.job, g.batch, g.epoch, s.d.forUpdate); err != nil {
			return err
		}
		rows, err := notModifiedRows(g.rs, finished, owners)
		if err != nil {
			return err
		}
		wrote, err := s.copyNotModified(ctx, tx, rows, g.job, g.batch, baseline)
		if err != nil {
			return err
		}
		if len(wrote) < len(rows) {
			missing := map[string]bool{}
			for _, r := range rows {
				if u := r[1].(string); !wrote[u] {
					missing[u] = true
				}
			}
			return &notCopiedError{urls: missing}
		}
		c.recorded = len(wrote)
		return s.count(ctx, tx, g.job, g.shard, c)
	})
	if err != nil {
		return 0, err
	}
	added := 0
	for _, o := range g.out {
		added += o.Added
	}
	if queued {
		urls := make([]string, len(g.links))
		for i, l := range g.links {
			urls[i] = l.URL
		}
		known.add(urls)
	}
	return added, nil
}

// copyNotModified writes rows (notModifiedRows) as results of job and
// batch from the baseline's rows; it returns the URLs written.
func (s *resultStore) copyNotModified(ctx context.Context, tx *sql.Tx, rows [][]any, job, batch, baseline string) (map[string]bool, error) {
	wrote := map[string]bool{}
	for _, st := range s.chunked(notModifiedHead, nil, notModifiedTuple, s.notModifiedTail(), rows, job, batch, baseline) {
		urls, err := queryTx(ctx, s.core, tx, st.query, st.args, func(r *sql.Rows) (string, error) {
			var u string
			return u, r.Scan(&u)
		})
		if err != nil {
			return nil, fmt.Errorf("record: results from the baseline: %w", err)
		}
		for _, u := range urls {
			wrote[u] = true
		}
	}
	return wrote, nil
}

// notModifiedRows are the rows of notModifiedHead of the pages of rs
// finished by this transaction (owners: the owners of their body hashes
// found), those claiming a hash first, in hash order, then in URL order:
// ord, url, the record's own fields (patch), claim, whether the page keeps
// the baseline's links, and the revisit columns.
func notModifiedRows(rs []jobs.Record, finished map[string]bool, owners map[string]string) ([][]any, error) {
	claimed, dups := assignClaims(rs, finished, owners)
	written := make(map[string]bool, len(rs))
	var rows [][]any
	for i, r := range rs {
		if !finished[r.URL] || written[r.URL] {
			continue
		}
		written[r.URL] = true
		p := r.Page.WithoutBaselineContent()
		p.DuplicateOf = dups[i]
		patch, err := json.Marshal(&p)
		if err != nil {
			return nil, fmt.Errorf("record %s: %w", r.URL, err)
		}
		var claim any // NULL: none
		if h, ok := claimed[i]; ok {
			claim = h
		}
		keep := 0
		if len(r.Page.Links) > 0 || len(r.Page.Sitemaps) > 0 {
			keep = 1
		}
		revisit, err := revisitValues(r)
		if err != nil {
			return nil, err
		}
		rows = append(rows, append([]any{0, r.URL, string(patch), claim, keep}, revisit...))
	}
	sortByClaim(rows, 3, 1)
	for i := range rows {
		rows[i][0] = i
	}
	return rows, nil
}

// The statement of notModifiedRows (chunked): the rows as a table p, then
// the tail (notModifiedTail) with the job, batch and baseline.
const (
	notModifiedHead = `WITH p (ord, url, patch, claim, keep, etag, last_modified, content_hash, change, saved_bytes, links,
		interval_ms, next_ms, warc_id, warc_uri, warc_date, warc_digest) AS (VALUES `
	notModifiedTuple = `(CAST(? AS BIGINT), ?, ?, ?, CAST(? AS BIGINT), ?, ?, ?, ?, CAST(? AS BIGINT), ?, CAST(? AS BIGINT), CAST(? AS BIGINT), ?, ?, ?, ?)`
)

// notModifiedTail inserts the rows of p, each record the baseline's
// content (jobs.BaselineContentKeys, its links only when the page keeps
// them) with the page's own fields.
func (s *resultStore) notModifiedTail() string {
	return `) ` + resultsInto + `
		SELECT f.job, p.url, f.batch, 0, ` + s.notModifiedRecord() + `, p.claim, p.etag, p.last_modified, p.content_hash, p.change,
		p.saved_bytes, p.links, p.interval_ms, p.next_ms, p.warc_id, p.warc_uri, p.warc_date, p.warc_digest
		FROM p CROSS JOIN (SELECT CAST(? AS TEXT) AS job, CAST(? AS TEXT) AS batch) f
		JOIN baton_results b ON b.job = ? AND b.url = p.url` + s.notModifiedClean() + `
		ORDER BY p.ord RETURNING url`
}

// notModifiedClean is the dialect's condition on a baseline row it can
// rewrite.
func (s *resultStore) notModifiedClean() string {
	if s.d.name == "postgres" {
		return ` AND strpos(b.record, '\u0000') = 0` // (jsonb refuses it)
	}
	return ""
}

// notModifiedRecord is the dialect's record of a page of p: the baseline's
// record b.record without the page's own keys it may leave out (ownKeys)
// and, unless p.keep,
// its links, merged with p.patch, with the baseline's title and content
// type (which the patch holds empty).
func (s *resultStore) notModifiedRecord() string {
	own := ownKeys()
	if s.d.name == "postgres" {
		keys := "ARRAY['" + strings.Join(own, "', '") + "']::text[]"
		return `(((CASE WHEN p.keep = 1 THEN b.record::jsonb ELSE b.record::jsonb - 'links' - 'sitemaps' END) - ` + keys + `)
			|| p.patch::jsonb
			|| jsonb_build_object('title', b.record::jsonb -> 'title', 'content_type', b.record::jsonb -> 'content_type'))::text`
	}
	paths := "'$." + strings.Join(own, "', '$.") + "'"
	return `json_set(json_patch(CASE WHEN p.keep = 1 THEN json_remove(b.record, ` + paths + `)
			ELSE json_remove(b.record, ` + paths + `, '$.links', '$.sitemaps') END, p.patch),
		'$.title', json_extract(b.record, '$.title'), '$.content_type', json_extract(b.record, '$.content_type'))`
}

// ownKeys are the keys of a page record that are not the baseline's
// content (jobs.BaselineContentKeys) and that a page's own fields (the
// patch) may leave out (omitempty): every such JSON key of
// jobs.PageRecord, found by reflection (once) so that a field added is
// one of them. (A key the patch always holds replaces the baseline's.)
var ownKeys = sync.OnceValue(findOwnKeys)

func findOwnKeys() []string {
	content := map[string]bool{}
	for _, k := range jobs.BaselineContentKeys {
		content[k] = true
	}
	var out []string
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			name, opts, _ := strings.Cut(tag, ",")
			switch {
			case f.Anonymous && tag == "":
				walk(f.Type)
			case name == "-" || !f.IsExported() || !strings.Contains(opts, "omitempty"):
			case name == "":
				out = append(out, f.Name)
			case !content[name]:
				out = append(out, name)
			}
		}
	}
	walk(reflect.TypeFor[jobs.PageRecord]())
	slices.Sort(out)
	return out
}
