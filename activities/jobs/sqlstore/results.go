package sqlstore

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/batoncrawl/baton/activities/jobs"
)

// This file holds the reads of a job's results: its pages, their bodies,
// the URLs refused without a page.

// ErrBadRecord marks a stored page record (baton_results.record) that
// cannot be read: not a JSON object, or one that belongs to another row.
var ErrBadRecord = errors.New("unreadable page record")

// decodeRecord reads the stored record of job's url and says what is
// wrong with it.
func decodeRecord(job, url string, data []byte) (jobs.PageRecord, error) {
	var p jobs.PageRecord
	if t := bytes.TrimSpace(data); len(t) == 0 || t[0] != '{' {
		return p, fmt.Errorf("%w: want a JSON object, got %.20q", ErrBadRecord, data)
	}
	if err := json.Unmarshal(data, &p); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return p, fmt.Errorf("%w: malformed JSON at byte %d: %v", ErrBadRecord, se.Offset, err)
		}
		return p, fmt.Errorf("%w: %v", ErrBadRecord, err)
	}
	switch {
	case p.URL != url:
		return p, fmt.Errorf("%w: its url is %q, not the row's", ErrBadRecord, p.URL)
	case p.Job != job:
		return p, fmt.Errorf("%w: its job is %q, not the row's", ErrBadRecord, p.Job)
	}
	return p, nil
}

// resultsPerStatement is how many pages one statement of Results reads:
// a statement of a job's export is short whatever the job's size, and
// under an operator's statement_timeout of a second or less.
const resultsPerStatement = 1000

// storedResult is a stored page record as read.
type storedResult struct {
	seq       int64
	url, data string
}

// Results calls fn for every page of a job in the order recorded. It reads
// them resultsPerStatement at a time, each lot in a statement of its own
// keyed by the last one's position in that order, and calls fn once a lot
// is read: no statement stays open while fn runs (a slow reader of `baton
// results`). A stored record that cannot be read (ErrBadRecord) does not
// stop the others: it is skipped, and the error returned at the end names
// the records skipped.
func (s *resultStore) Results(ctx context.Context, job string, fn func(jobs.PageRecord) error) error {
	if _, err := s.jobMaxPages(ctx, s.db, job); err != nil {
		return err
	}
	var bad []error // the first ten
	nbad := 0
	for after := int64(-1 << 63); ; {
		lot, err := queryAll(ctx, s.core, `SELECT `+s.d.seqCol+`, url, record FROM baton_results WHERE job = ? AND `+s.d.seqCol+` > ? ORDER BY `+s.d.seqCol+` LIMIT ?`,
			[]any{job, after, resultsPerStatement}, func(rows *sql.Rows) (storedResult, error) {
				var r storedResult
				return r, rows.Scan(&r.seq, &r.url, &r.data)
			})
		if err != nil {
			return fmt.Errorf("results of job %s: %w", job, err)
		}
		for _, r := range lot {
			p, err := decodeRecord(job, r.url, []byte(r.data))
			if err != nil {
				if nbad++; len(bad) < 10 {
					bad = append(bad, fmt.Errorf("record of %s: %w", r.url, err))
				}
				continue
			}
			if err := fn(p); err != nil {
				return err
			}
		}
		if len(lot) < resultsPerStatement {
			break
		}
		after = lot[len(lot)-1].seq
	}
	if nbad > 0 {
		return fmt.Errorf("results of job %s in %s: %d stored records skipped: %w", job, s.id, nbad, errors.Join(bad...))
	}
	return nil
}

// Body returns the stored (compressed) body of a job's page.
func (s *resultStore) Body(ctx context.Context, job, url string) ([]byte, error) {
	var b []byte
	err := s.read(ctx, func() error {
		return s.db.QueryRowContext(ctx, s.q(`SELECT body FROM baton_bodies WHERE job = ? AND url = ?`), job, url).Scan(&b)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("job %s page %s: %w", job, url, jobs.ErrNoBody)
	}
	if err != nil {
		return nil, fmt.Errorf("job %s page %s: body: %w", job, url, err)
	}
	return b, nil
}

// Refused counts a job's page URLs finished without a result.
func (s *resultStore) Refused(ctx context.Context, job string) (int, error) {
	if _, err := s.jobMaxPages(ctx, s.db, job); err != nil {
		return 0, err
	}
	var n int
	err := s.read(ctx, func() error {
		return s.db.QueryRowContext(ctx, s.q(`SELECT COUNT(*) FROM baton_frontier f WHERE f.job = ? AND f.state = 2 AND f.depth >= 0
			AND NOT EXISTS (SELECT 1 FROM baton_results r WHERE r.job = f.job AND r.url = f.url)`), job).Scan(&n)
	})
	if err != nil {
		return 0, fmt.Errorf("job %s: refused pages: %w", job, err)
	}
	return n, nil
}

// Recorded reports whether url has a page in the results.
func (s *resultStore) Recorded(ctx context.Context, job, url string) (bool, error) {
	var n int
	err := s.read(ctx, func() error {
		return s.db.QueryRowContext(ctx, s.q(`SELECT COUNT(*) FROM baton_results WHERE job = ? AND url = ?`), job, url).Scan(&n)
	})
	return n > 0, err
}
