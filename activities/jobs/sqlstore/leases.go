package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"github.com/batoncrawl/baton/activities/jobs"
)

// This file holds the writes of the host leases (see hosts.go): a
// hand-out's, the renewal and sizing of a batch's leases, their release
// and hand-over, and the reads of them outside a hand-out (Available,
// Leases).

// tend renews the batch's leases, drops those of hosts it has no
// unfinished URL of, and sizes its shares: a shared host's to at most
// want (grown up to it from what the others leave), an exclusive host's
// to the whole parallelism while nobody else holds a share of it. A host
// of its unfinished URLs it holds no lease of (its lease expired, or the
// batch was handed out by an older Baton) is leased again if it can be;
// else the Runner finds it missing from the leases and gives the batch
// back. hosts are those of the batch's unfinished URLs (openHosts).
func (s *hostStore) tend(ctx context.Context, tx dbtx, w *writes, v *leaseView, batch string, want int, hosts []string) error {
	open := map[string]bool{}
	spare, err := v.spare(ctx, want)
	if err != nil {
		return err
	}
	adopt := map[string]int{}
	for _, h := range hosts {
		if _, ok := v.mine[h]; !ok && !open[h] && h != "" {
			sh, cost, err := v.share(ctx, h, max(spare, 1))
			if err != nil {
				return err
			}
			if sh > 0 {
				adopt[h] = sh
				spare -= cost
			}
		}
		open[h] = true
	}
	if err := s.acquire(ctx, tx, w, v, batch, adopt); err != nil {
		return err
	}
	if len(v.mine) == 0 {
		return nil
	}
	var done []string
	for host, h := range v.mine {
		if !open[host] {
			done = append(done, host)
			delete(v.mine, host)
			continue
		}
		d, err := v.delay(ctx, host)
		if err != nil {
			return err
		}
		share := h.share
		switch {
		case d.exclusive && v.others[host] == 0:
			share = v.pol.parallelism
		case !d.exclusive:
			share = max(1, min(want, v.parallelism(host)-v.others[host]))
		}
		if share != h.share {
			h.share = share
			if err := w.exec(ctx, fmt.Sprintf("job %s batch %s: share of %s", v.job, batch, host),
				s.q(`UPDATE baton_host_leases SET share = ? WHERE job = ? AND host = ? AND holder = ?`), share, v.job, host, batch); err != nil {
				return err
			}
		}
	}
	if err := s.dropLeases(ctx, w, v.pol, v.job, batch, done, v.now); err != nil {
		return err
	}
	return w.exec(ctx, fmt.Sprintf("job %s batch %s: renew host leases", v.job, batch),
		s.q(`UPDATE baton_host_leases SET expires_ms = ? WHERE job = ? AND holder = ?`), v.now+v.pol.ttlMS, v.job, batch)
}

// acquire writes the batch's new leases (host → share), each with the
// time its host was last released in the job's budget, moved later by
// what the delay of the job that released it exceeds the job's (the
// stricter delay wins: leases wait for the job's delay from it).
func (s *hostStore) acquire(ctx context.Context, tx dbtx, w *writes, v *leaseView, batch string, acquired map[string]int) error {
	if len(acquired) == 0 {
		return nil
	}
	hosts := make([]string, 0, len(acquired))
	for h := range acquired {
		hosts = append(hosts, h)
	}
	slices.Sort(hosts)
	delays := make(map[string]int64, len(hosts))
	for _, h := range hosts {
		d, err := v.delay(ctx, h)
		if err != nil {
			return err
		}
		delays[h] = d.ms
	}
	if s.d.joinedWrites {
		return s.acquireJoined(ctx, w, v, batch, acquired, hosts, delays)
	}
	last, err := s.released(ctx, tx, v.pol.pool, hosts, delays)
	if err != nil {
		return fmt.Errorf("job %s: hosts last released: %w", v.job, err)
	}
	var rows [][]any
	for _, h := range hosts {
		rows = append(rows, []any{v.job, h, batch, acquired[h], v.now + v.pol.ttlMS, last[h], delays[h], v.pol.sharedFlag(), v.pol.parallelism})
		v.mine[h] = &held{share: acquired[h], last: last[h]}
	}
	_, err = s.returning(ctx, tx, `INSERT INTO baton_host_leases (job, host, holder, share, expires_ms, last_ms, delay_ms, shared, parallelism) VALUES `, nil,
		"(?, ?, ?, ?, ?, ?, ?, ?, ?)", ` ON CONFLICT (job, host, holder) DO UPDATE SET share = excluded.share, expires_ms = excluded.expires_ms, last_ms = excluded.last_ms,
			delay_ms = excluded.delay_ms, shared = excluded.shared, parallelism = excluded.parallelism RETURNING host`, rows)
	if err != nil {
		return fmt.Errorf("job %s batch %s: lease hosts: %w", v.job, batch, err)
	}
	return nil
}

// released reads when hosts were last released in the budget of pool
// (release rows of job pool), each moved later by what the delay it was
// released with exceeds delays[host].
func (s *hostStore) released(ctx context.Context, tx dbtx, pool string, hosts []string, delays map[string]int64) (map[string]int64, error) {
	last := map[string]int64{}
	for chunk := range slices.Chunk(hosts, 200) {
		args := []any{pool}
		for _, h := range chunk {
			args = append(args, h)
		}
		rows, err := tx.QueryContext(ctx, s.q(`SELECT host, last_ms, delay_ms FROM baton_host_leases WHERE job = ? AND holder = '' AND host IN (?`+
			strings.Repeat(", ?", len(chunk)-1)+`)`), args...)
		if err != nil {
			return nil, err
		}
		_, err = scanAll(rows, func(rows *sql.Rows) (struct{}, error) {
			var host string
			var ms, delay int64
			err := rows.Scan(&host, &ms, &delay)
			last[host] = ms + max(0, delay-delays[host])
			return struct{}{}, err
		})
		rows.Close()
		if err != nil {
			return nil, err
		}
	}
	return last, nil
}

// acquireJoined is acquire in one statement per 200 hosts (PostgreSQL):
// each new lease takes its host's last release from the join, not from a
// query before.
func (s *hostStore) acquireJoined(ctx context.Context, w *writes, v *leaseView, batch string, acquired map[string]int, hosts []string, delays map[string]int64) error {
	for chunk := range slices.Chunk(hosts, 200) {
		var b strings.Builder
		args := make([]any, 0, 5*len(chunk)+4)
		args = append(args, v.job, v.pol.sharedFlag(), v.pol.parallelism)
		for i, h := range chunk {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("(CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS INTEGER), CAST(? AS BIGINT), CAST(? AS BIGINT))")
			args = append(args, h, batch, acquired[h], v.now+v.pol.ttlMS, delays[h])
			v.mine[h] = &held{share: acquired[h]} // its last release read with the writes
		}
		args = append(args, v.pol.pool)
		err := w.query(ctx, fmt.Sprintf("job %s batch %s: lease hosts", v.job, batch), s.q(`INSERT INTO baton_host_leases (job, host, holder, share, expires_ms, last_ms, delay_ms, shared, parallelism)
			SELECT CAST(? AS TEXT), n.host, n.holder, n.share, n.expires_ms, COALESCE(r.last_ms + GREATEST(r.delay_ms - n.delay_ms, 0), 0), n.delay_ms,
				CAST(? AS SMALLINT), CAST(? AS INTEGER)
			FROM (VALUES `+b.String()+`) AS n (host, holder, share, expires_ms, delay_ms)
			LEFT JOIN baton_host_leases r ON r.job = CAST(? AS TEXT) AND r.host = n.host AND r.holder = ''
			ON CONFLICT (job, host, holder) DO UPDATE SET share = excluded.share, expires_ms = excluded.expires_ms, last_ms = excluded.last_ms,
				delay_ms = excluded.delay_ms, shared = excluded.shared, parallelism = excluded.parallelism
			RETURNING host, last_ms`), args, func(row scanner) error {
			var host string
			var last int64
			if err := row.Scan(&host, &last); err != nil {
				return err
			}
			if h := v.mine[host]; h != nil {
				h.last = last
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// openHosts returns the hosts of a batch's unfinished URLs, one per URL.
// The caller holds the batch's row, not the job's lock, which none of
// those rows needs: only the batch's own group commits change them (as
// they did while a hand-out held the lock).
func (s *hostStore) openHosts(ctx context.Context, tx dbtx, job, batch string) ([]string, error) {
	rows, err := queryTx(ctx, s.core, tx, openHostsQuery, []any{job, batch}, func(rows *sql.Rows) (string, error) { return scanOpenHost(rows) })
	if err != nil {
		return nil, fmt.Errorf("job %s batch %s: hosts of its URLs: %w", job, batch, err)
	}
	return rows, nil
}

// openHostsQuery reads the URLs of a batch not finished, and their hosts:
// job, batch.
const openHostsQuery = `SELECT url, host FROM baton_frontier WHERE job = ? AND batch = ? AND state = 1`

// scanOpenHost reads the host of a row of openHostsQuery.
func scanOpenHost(row scanner) (string, error) {
	var u, h string
	if err := row.Scan(&u, &h); err != nil || h != "" {
		return h, err
	}
	return jobs.HostOf(u), nil // a row queued by an older Baton
}

// dropLeases drops the batch's leases of hosts, remembering in the
// budget of pol when each host was released and with which delay (its
// next holder waits for the delay from then).
func (s *hostStore) dropLeases(ctx context.Context, w *writes, pol hostPolicy, job, batch string, hosts []string, now int64) error {
	if len(hosts) == 0 {
		return nil
	}
	slices.Sort(hosts)
	what := fmt.Sprintf("job %s batch %s: release hosts", job, batch)
	for chunk := range slices.Chunk(hosts, 200) {
		args := []any{pol.pool, now, job, batch}
		for _, h := range chunk {
			args = append(args, h)
		}
		if err := w.exec(ctx, what, s.q(`INSERT INTO baton_host_leases (job, host, holder, share, expires_ms, last_ms, delay_ms)
			SELECT ?, host, '', 0, 0, ?, delay_ms FROM baton_host_leases WHERE job = ? AND holder = ? AND host IN (?`+strings.Repeat(", ?", len(chunk)-1)+`)
			ON CONFLICT (job, host, holder) DO UPDATE SET last_ms = excluded.last_ms, delay_ms = excluded.delay_ms`), args...); err != nil {
			return err
		}
	}
	for chunk := range slices.Chunk(hosts, 200) {
		args := []any{job, batch}
		for _, h := range chunk {
			args = append(args, h)
		}
		if err := w.exec(ctx, what, s.q(`DELETE FROM baton_host_leases WHERE job = ? AND holder = ? AND host IN (?`+
			strings.Repeat(", ?", len(chunk)-1)+`)`), args...); err != nil {
			return err
		}
	}
	return nil
}

// dropExpired deletes the leases of v's budget that expired (their
// holders stopped renewing them a lease's TTL ago), but the batch's own:
// of the job, or of every job keeping the group's budget (their writers
// hold the group's lease lock, as this one's does).
func (s *hostStore) dropExpired(ctx context.Context, w *writes, v *leaseView) error {
	what := "job " + v.job + ": drop expired host leases"
	if v.pol.shared {
		return w.exec(ctx, what, s.q(`DELETE FROM baton_host_leases WHERE holder > '' AND expires_ms <= ? AND (shared = 1 OR job = ?) AND NOT (job = ? AND holder = ?)`),
			v.now, v.job, v.job, v.batch)
	}
	return w.exec(ctx, what, s.q(`DELETE FROM baton_host_leases WHERE job = ? AND holder > '' AND holder <> ? AND expires_ms <= ?`), v.job, v.batch, v.now)
}

// releaseBatch drops every lease of a batch that ends or gives its URLs
// back (FinishBatch, FailBatch, Release, Requeue). The caller holds the
// batch's row.
func (s *hostStore) releaseBatch(ctx context.Context, tx dbtx, job, batch string) error {
	hosts, err := queryTx(ctx, s.core, tx, `SELECT host FROM baton_host_leases WHERE job = ? AND holder = ?`, []any{job, batch},
		func(rows *sql.Rows) (string, error) { return scanHost(rows) })
	if err != nil || len(hosts) == 0 {
		return err
	}
	pol, err := s.policy(ctx, tx, job)
	if err != nil {
		return err
	}
	now, err := s.lockJobNow(ctx, tx, job, pol.shared)
	if err != nil {
		return err
	}
	return s.dropLeases(ctx, &writes{tx: tx}, pol, job, batch, hosts, now)
}

// handOver renews a batch's leases for its new holder (Claim from
// another holder): the host's next request waits for its delay from now,
// since the old holder's last one may have just started.
func (s *hostStore) handOver(ctx context.Context, tx dbtx, job, batch string) error {
	pol, err := s.policy(ctx, tx, job)
	if err != nil {
		return err
	}
	now, err := s.lockJobNow(ctx, tx, job, pol.shared)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, s.q(`UPDATE baton_host_leases SET expires_ms = ?, last_ms = ? WHERE job = ? AND holder = ?`),
		now+pol.ttlMS, now, job, batch)
	return err
}

// Available reports whether a new batch could take a queued URL of job
// now (see jobs.SupervisorStore).
func (s *hostStore) Available(ctx context.Context, job string) (bool, error) {
	ok := false
	err := s.read(ctx, func() error {
		v, err := s.readView(ctx, job, "")
		if err != nil {
			return err
		}
		got, _, err := v.choose(ctx, 1, 1)
		ok = len(got) > 0
		return err
	})
	return ok, err
}

// Leases returns a batch's live host leases (see jobs.Store).
func (s *hostStore) Leases(ctx context.Context, job, batch string) ([]jobs.HostLease, error) {
	var out []jobs.HostLease
	err := s.read(ctx, func() error {
		v, err := s.readView(ctx, job, batch)
		if err != nil {
			return err
		}
		for host, h := range v.mine {
			if h.expires <= v.now {
				delete(v.mine, host)
			}
		}
		out, err = v.leases(ctx)
		return err
	})
	return out, err
}

// readView is view outside a transaction, at the store's clock now.
func (s *hostStore) readView(ctx context.Context, job, batch string) (*leaseView, error) {
	pol, err := s.policy(ctx, s.db, job)
	if err != nil {
		return nil, err
	}
	now, err := s.nowMS(ctx, s.db)
	if err != nil {
		return nil, err
	}
	return s.view(ctx, s.db, job, batch, pol, now)
}
