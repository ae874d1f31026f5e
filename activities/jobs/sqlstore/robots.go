package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/jobs"
)

// This file holds a job's robots.txt files (baton_robots): fetched once
// for the job by the Runner that first holds a host, read by the others;
// the hand-outs read their Crawl-delay (hosts.go).

// Robots returns the robots.txt of origin kept for job and still fresh
// (see jobs.RunnerStore).
func (s *hostStore) Robots(ctx context.Context, job, origin string) (crawl.RobotsFile, bool, error) {
	var f crawl.RobotsFile
	var left, delay int64
	err := s.read(ctx, func() error {
		return s.db.QueryRowContext(ctx, s.q(`SELECT status, body, crawl_delay_ms, expires_ms - `+s.d.nowMS+` FROM baton_robots
			WHERE job = ? AND origin = ?`), job, origin).Scan(&f.Status, &f.Body, &delay, &left)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return crawl.RobotsFile{}, false, nil
	}
	if err != nil {
		return crawl.RobotsFile{}, false, fmt.Errorf("job %s: robots.txt of %s: %w", job, origin, err)
	}
	if left <= 0 {
		return crawl.RobotsFile{}, false, nil
	}
	f.TTL, f.CrawlDelay = time.Duration(left)*time.Millisecond, time.Duration(delay)*time.Millisecond
	if f.Status == robotsClaim {
		f = crawl.RobotsFile{Fetching: true, TTL: f.TTL}
	}
	return f, true, nil
}

// robotsClaim is the status of a claim on a robots.txt's fetch
// (crawl.RobotsFile.Fetching): a row of baton_robots that holds no file,
// and that no hand-out counts as the host's robots.txt known.
const robotsClaim = -1

// PutRobots keeps the robots.txt of origin fetched for job (see
// jobs.RunnerStore).
func (s *hostStore) PutRobots(ctx context.Context, job, origin string, f crawl.RobotsFile) error {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || u.Path != "" && u.Path != "/" {
		return fmt.Errorf("job %s: robots.txt of %q: want scheme://host[:port]", job, origin)
	}
	host := jobs.HostOf(origin + "/")
	if _, err := s.jobMaxPages(ctx, s.db, job); err != nil {
		return err
	}
	// A file replaces the row kept (a file, or a claim); a claim is kept
	// only where there is none (a file, or a claim of another fetch), with
	// no file in it, until it expires after f.TTL.
	status, body, delay := f.Status, f.Body, f.CrawlDelay
	onConflict, what := `DO UPDATE SET status = excluded.status, body = excluded.body,
				crawl_delay_ms = excluded.crawl_delay_ms, expires_ms = excluded.expires_ms`, "keep robots.txt"
	if f.Fetching {
		status, body, delay, onConflict, what = robotsClaim, nil, 0, "DO NOTHING", "claim the fetch of robots.txt"
	} else {
		defer s.robotsDelays.Delete(job + "\x00" + host) // read again at the next hand-out
	}
	if body == nil {
		body = []byte{}
	}
	return s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, s.q(`INSERT INTO baton_robots (job, origin, host, status, body, crawl_delay_ms, expires_ms)
			VALUES (?, ?, ?, ?, ?, ?, `+s.d.nowMS+` + ?)
			ON CONFLICT (job, origin) `+onConflict),
			job, origin, host, status, body, delay.Milliseconds(), f.TTL.Milliseconds())
		if err != nil {
			return fmt.Errorf("job %s: %s of %s: %w", job, what, origin, err)
		}
		return nil
	})
}
