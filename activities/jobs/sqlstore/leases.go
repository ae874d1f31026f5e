package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/batoncrawl/baton/activities/jobs"
)

// This file holds the writes of the host leases (see hosts.go): a
// hand-out's, the renewal and sizing of a batch's leases, their release
// and hand-over, and Pull and Available.

// pull hands up to n queued URLs of job to batch (counted as taken by
// shard) as a batch wanting want requests in flight, after renewing,
// resizing and dropping the batch's leases; it returns the URLs in
// frontier order and the batch's leases after it. The caller holds the
// batch's row (Extend, Pull); size is how many URLs the batch was ever
// handed (its row's).
// What needs no lock of the job is read before its lock is taken, which
// every hand-out of the job waits for.
func (s *Store) pull(ctx context.Context, tx *sql.Tx, job, batch, shard string, n, want, size int) ([]jobs.Entry, []jobs.HostLease, error) {
	pol, err := s.policy(ctx, tx, job)
	if err != nil {
		return nil, nil, err
	}
	// The hosts of the batch's unfinished URLs: none when it was never
	// handed a URL (a start batch's first pull).
	var open []string
	if size > 0 {
		if open, err = s.openHosts(ctx, tx, job, batch); err != nil {
			return nil, nil, err
		}
	}
	now, err := s.lockJobNow(ctx, tx, job)
	if err != nil {
		return nil, nil, err
	}
	return s.pullLocked(ctx, tx, job, batch, shard, n, want, pol, open, now, true)
}

// pullLocked is pull once the job's lock is held (granted at now, the
// store's clock read after it): TakeBatch takes that lock first itself.
// open is the hosts of the batch's unfinished URLs; grow says whether the
// batch's row exists, to add the URLs handed out to its size (a new
// batch's row is written by TakeBatch after).
func (s *Store) pullLocked(ctx context.Context, tx *sql.Tx, job, batch, shard string, n, want int, pol hostPolicy, open []string, now int64, grow bool) ([]jobs.Entry, []jobs.HostLease, error) {
	var err error
	if n > 0 {
		if n, err = s.underMaxPages(ctx, tx, job, n); err != nil {
			return nil, nil, err
		}
	}
	v, err := s.view(ctx, tx, job, batch, pol, now)
	if err != nil {
		return nil, nil, err
	}
	if v.expired {
		// Their holders stopped renewing them a lease's TTL ago.
		if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM baton_host_leases WHERE job = ? AND holder > '' AND holder <> ? AND expires_ms <= ?`),
			job, batch, now); err != nil {
			return nil, nil, fmt.Errorf("job %s: drop expired host leases: %w", job, err)
		}
	}
	if err := s.tend(ctx, tx, v, batch, want, open); err != nil {
		return nil, nil, err
	}
	var out []jobs.Entry
	if n > 0 {
		spare, err := v.spare(ctx, want)
		if err != nil {
			return nil, nil, err
		}
		chosen, acquired, err := v.choose(ctx, n, spare)
		if err != nil {
			return nil, nil, err
		}
		if chosen, acquired, err = s.fairShare(ctx, tx, v, batch, chosen, acquired); err != nil {
			return nil, nil, err
		}
		if err := s.acquire(ctx, tx, v, batch, acquired); err != nil {
			return nil, nil, err
		}
		if out, err = s.handTo(ctx, tx, job, batch, shard, grow, chosen); err != nil {
			return nil, nil, err
		}
	}
	leases, err := v.leases(ctx)
	return out, leases, err
}

// fairShare trims a hand-out from a short queue (choose saw all of it)
// to its part among the batches of the job waiting for their first URLs
// (start batches, handed out empty at the job's start, which pull the
// first pages' links themselves): a Runner whose slots are busy pulls
// ahead, and at a crawl's start, with a few dozen URLs queued, one such
// pull took all of them while two Runners' slots stayed empty until the
// next commit (3 Runners × 8: every URL of the third wave went to the
// first Runner's queue). The hosts leased for the URLs trimmed are not
// leased.
func (s *Store) fairShare(ctx context.Context, tx *sql.Tx, v *leaseView, batch string, chosen []candidate, acquired map[string]int) ([]candidate, map[string]int, error) {
	if v.queued < 0 || len(chosen) < 2 {
		return chosen, acquired, nil
	}
	// Start batches wait for a second at most after their job's opening:
	// a short queue later (a crawl's end, when a job may have thousands
	// of batches) is not looked at for them.
	until, _ := s.waitersUntil.LoadOrStore(v.job, time.Now().Add(startBatchesLook))
	if time.Now().After(until.(time.Time)) {
		return chosen, acquired, nil
	}
	var waiting int
	if err := tx.QueryRowContext(ctx, s.q(`SELECT COUNT(*) FROM baton_batches WHERE job = ? AND state = ? AND size = 0 AND holder > '' AND id <> ?`),
		v.job, jobs.BatchRunning, batch).Scan(&waiting); err != nil {
		return nil, nil, fmt.Errorf("job %s: batches waiting for URLs: %w", v.job, err)
	}
	part := (v.queued + waiting) / (waiting + 1) // rounded up
	if waiting == 0 || len(chosen) <= part {
		return chosen, acquired, nil
	}
	chosen = chosen[:part]
	kept := map[string]int{}
	for _, c := range chosen {
		if sh, ok := acquired[c.host]; ok {
			kept[c.host] = sh
		}
	}
	return chosen, kept, nil
}

// startBatchesLook is how long after this store's first hand-out of a
// job from a short queue fairShare looks for start batches: twice how
// long they wait (jobs' startWait, a second).
const startBatchesLook = 2 * time.Second

// underMaxPages bounds n by what max_pages leaves of the job (the job's
// row is locked on PostgreSQL: two hand-outs never both take the
// remainder).
func (s *Store) underMaxPages(ctx context.Context, tx *sql.Tx, job string, n int) (int, error) {
	maxPages, err := s.jobMaxPages(ctx, tx, job)
	if err != nil || maxPages == 0 {
		return n, err
	}
	c, err := s.sums(ctx, tx, job) // a new snapshot, after the lock
	if err != nil {
		return 0, err
	}
	return min(n, maxPages-(c.taken-c.requeued)), nil
}

// tend renews the batch's leases, drops those of hosts it has no
// unfinished URL of, and sizes its shares: a shared host's to at most
// want (grown up to it from what the others leave), an exclusive host's
// to the whole parallelism while nobody else holds a share of it. A host
// of its unfinished URLs it holds no lease of (its lease expired, or the
// batch was handed out by an older Baton) is leased again if it can be;
// else the Runner finds it missing from the leases and gives the batch
// back. hosts are those of the batch's unfinished URLs (openHosts).
func (s *Store) tend(ctx context.Context, tx *sql.Tx, v *leaseView, batch string, want int, hosts []string) error {
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
	if err := s.acquire(ctx, tx, v, batch, adopt); err != nil {
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
			share = max(1, min(want, v.pol.parallelism-v.others[host]))
		}
		if share != h.share {
			h.share = share
			if _, err := tx.ExecContext(ctx, s.q(`UPDATE baton_host_leases SET share = ? WHERE job = ? AND host = ? AND holder = ?`),
				share, v.job, host, batch); err != nil {
				return fmt.Errorf("job %s batch %s: share of %s: %w", v.job, batch, host, err)
			}
		}
	}
	if err := s.dropLeases(ctx, tx, v.job, batch, done, v.now); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, s.q(`UPDATE baton_host_leases SET expires_ms = ? WHERE job = ? AND holder = ?`),
		v.now+v.pol.ttlMS, v.job, batch); err != nil {
		return fmt.Errorf("job %s batch %s: renew host leases: %w", v.job, batch, err)
	}
	return nil
}

// acquire writes the batch's new leases (host → share), each with the
// time its host was last released.
func (s *Store) acquire(ctx context.Context, tx *sql.Tx, v *leaseView, batch string, acquired map[string]int) error {
	if len(acquired) == 0 {
		return nil
	}
	hosts := make([]string, 0, len(acquired))
	for h := range acquired {
		hosts = append(hosts, h)
	}
	slices.Sort(hosts)
	if s.d.joinedWrites {
		return s.acquireJoined(ctx, tx, v, batch, acquired, hosts)
	}
	last := map[string]int64{}
	for chunk := range slices.Chunk(hosts, 200) {
		args := []any{v.job}
		for _, h := range chunk {
			args = append(args, h)
		}
		rows, err := tx.QueryContext(ctx, s.q(`SELECT host, last_ms FROM baton_host_leases WHERE job = ? AND holder = '' AND host IN (?`+
			strings.Repeat(", ?", len(chunk)-1)+`)`), args...)
		if err != nil {
			return fmt.Errorf("job %s: hosts last released: %w", v.job, err)
		}
		if err := hostTimes(rows, func(host string, ms int64) { last[host] = ms }); err != nil {
			return fmt.Errorf("job %s: hosts last released: %w", v.job, err)
		}
	}
	var rows [][]any
	for _, h := range hosts {
		rows = append(rows, []any{v.job, h, batch, acquired[h], v.now + v.pol.ttlMS, last[h]})
		v.mine[h] = &held{share: acquired[h], last: last[h]}
	}
	_, err := s.returning(ctx, tx, `INSERT INTO baton_host_leases (job, host, holder, share, expires_ms, last_ms) VALUES `, nil, "(?, ?, ?, ?, ?, ?)",
		` ON CONFLICT (job, host, holder) DO UPDATE SET share = excluded.share, expires_ms = excluded.expires_ms, last_ms = excluded.last_ms RETURNING host`, rows)
	if err != nil {
		return fmt.Errorf("job %s batch %s: lease hosts: %w", v.job, batch, err)
	}
	return nil
}

// acquireJoined is acquire in one statement per 200 hosts (PostgreSQL):
// each new lease takes its host's last release from the join, not from a
// query before.
func (s *Store) acquireJoined(ctx context.Context, tx *sql.Tx, v *leaseView, batch string, acquired map[string]int, hosts []string) error {
	for chunk := range slices.Chunk(hosts, 200) {
		var b strings.Builder
		args := make([]any, 0, 5*len(chunk))
		for i, h := range chunk {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("(CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS INTEGER), CAST(? AS BIGINT))")
			args = append(args, v.job, h, batch, acquired[h], v.now+v.pol.ttlMS)
		}
		rows, err := tx.QueryContext(ctx, s.q(`INSERT INTO baton_host_leases (job, host, holder, share, expires_ms, last_ms)
			SELECT n.job, n.host, n.holder, n.share, n.expires_ms, COALESCE(r.last_ms, 0)
			FROM (VALUES `+b.String()+`) AS n (job, host, holder, share, expires_ms)
			LEFT JOIN baton_host_leases r ON r.job = n.job AND r.host = n.host AND r.holder = ''
			ON CONFLICT (job, host, holder) DO UPDATE SET share = excluded.share, expires_ms = excluded.expires_ms, last_ms = excluded.last_ms
			RETURNING host, last_ms`), args...)
		if err != nil {
			return fmt.Errorf("job %s batch %s: lease hosts: %w", v.job, batch, err)
		}
		if err := hostTimes(rows, func(host string, last int64) { v.mine[host] = &held{share: acquired[host], last: last} }); err != nil {
			return fmt.Errorf("job %s batch %s: lease hosts: %w", v.job, batch, err)
		}
	}
	return nil
}

// hostTimes reads rows of a host and a time in ms into each, and closes
// them.
func hostTimes(rows *sql.Rows, each func(host string, ms int64)) error {
	defer rows.Close()
	for rows.Next() {
		var host string
		var ms int64
		if err := rows.Scan(&host, &ms); err != nil {
			return err
		}
		each(host, ms)
	}
	return rows.Err()
}

// openHosts returns the hosts of a batch's unfinished URLs, one per URL.
// The caller holds the batch's row, not the job's lock, which none of
// those rows needs: only the batch's own group commits change them (as
// they did while a hand-out held the lock).
func (s *Store) openHosts(ctx context.Context, tx *sql.Tx, job, batch string) ([]string, error) {
	rows, err := queryTx(ctx, s, tx, `SELECT url, host FROM baton_frontier WHERE job = ? AND batch = ? AND state = 1`, []any{job, batch},
		func(rows *sql.Rows) (string, error) {
			var u, h string
			if err := rows.Scan(&u, &h); err != nil || h != "" {
				return h, err
			}
			return jobs.HostOf(u), nil
		})
	if err != nil {
		return nil, fmt.Errorf("job %s batch %s: hosts of its URLs: %w", job, batch, err)
	}
	return rows, nil
}

// handTo moves the chosen queued URLs into batch, counts them taken by
// shard and, with grow, adds them to the batch row's size; it returns
// those moved, in frontier order. On PostgreSQL the three writes are one
// statement (a pull's round trips are most of its time under the job's
// lock on a busy machine).
func (s *Store) handTo(ctx context.Context, tx *sql.Tx, job, batch, shard string, grow bool, chosen []candidate) ([]jobs.Entry, error) {
	if len(chosen) == 0 {
		return nil, nil
	}
	moved := map[string]bool{}
	for rest := slices.SortedFunc(slices.Values(chosen), func(a, b candidate) int { return cmp.Compare(a.seq, b.seq) }); len(rest) > 0; {
		part := rest[:min(len(rest), handToChunk)]
		rest = rest[len(part):]
		args := []any{batch, job}
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
		// say no URL is queued (they were sampled before), so for "seq IN
		// (…)" or "url IN (…)" it walked the host index over every queued
		// URL of the job, filtering (about 1,400 buffer reads for a pull
		// of 24 on a 20,000-page crawl: 3.6 ms under the job's lock, which
		// every other pull waited for). An ordered scan of the queued
		// index over the chosen range (the plan of choose's own scan) and
		// then each row by its address read 30 buffers for 24.
		q := `UPDATE baton_frontier SET state = 1, batch = ? WHERE job = ? AND state = 0 AND ` + s.d.seqCol + ` IN (` + in.String() + `) RETURNING url`
		if s.d.rowRef != "" {
			q = `UPDATE baton_frontier SET state = 1, batch = ? WHERE job = ? AND state = 0 AND ` + s.d.rowRef + ` IN (
				SELECT ` + s.d.rowRef + ` FROM baton_frontier WHERE job = ? AND state = 0 AND seq BETWEEN ? AND ? AND seq IN (` + in.String() + `)
				ORDER BY seq LIMIT ` + strconv.Itoa(len(part)) + `) RETURNING url`
		}
		if s.d.joinedWrites {
			// With the counter and the batch's size (data-modifying
			// CTEs, each run once and to completion; the batch row is
			// this transaction's already, the counter row its holder's
			// pulls' only).
			q = `WITH moved AS (` + q + `),
				counted AS (INSERT INTO baton_counters (job, shard, seen, taken, requeued, recorded, failed, items)
					SELECT CAST(? AS TEXT), CAST(? AS TEXT), 0, COUNT(*), 0, 0, 0, 0 FROM moved
					ON CONFLICT (job, shard) DO UPDATE SET taken = baton_counters.taken + excluded.taken)`
			args = append(args, job, shard)
			if grow {
				q += `, grown AS (UPDATE baton_batches SET size = size + (SELECT COUNT(*) FROM moved) WHERE job = ? AND id = ?)`
				args = append(args, job, batch)
			}
			q += ` SELECT url FROM moved`
		}
		rows, err := queryTx(ctx, s, tx, q, args, func(rows *sql.Rows) (string, error) {
			var u string
			return u, rows.Scan(&u)
		})
		if err != nil {
			return nil, fmt.Errorf("hand out job %s batch %s: %w", job, batch, err)
		}
		for _, u := range rows {
			moved[u] = true
		}
		if !s.d.joinedWrites && len(rows) > 0 {
			if err := s.count(ctx, tx, job, shard, counts{taken: len(rows)}); err != nil {
				return nil, err
			}
			if grow {
				if _, err := tx.ExecContext(ctx, s.q(`UPDATE baton_batches SET size = size + ? WHERE job = ? AND id = ?`), len(rows), job, batch); err != nil {
					return nil, fmt.Errorf("hand out job %s batch %s: size: %w", job, batch, err)
				}
			}
		}
	}
	out := make([]jobs.Entry, 0, len(moved))
	for _, c := range chosen {
		if moved[c.e.URL] {
			out = append(out, c.e)
		}
	}
	return out, nil
}

// handToChunk is how many URLs one statement of handTo moves at most.
const handToChunk = 200

// dropLeases drops the batch's leases of hosts, remembering when each
// host was released (its next holder waits for its delay from then).
func (s *Store) dropLeases(ctx context.Context, tx *sql.Tx, job, batch string, hosts []string, now int64) error {
	if len(hosts) == 0 {
		return nil
	}
	slices.Sort(hosts)
	var rows [][]any
	for _, h := range hosts {
		rows = append(rows, []any{job, h, now})
	}
	if _, err := s.returning(ctx, tx, `INSERT INTO baton_host_leases (job, host, holder, share, expires_ms, last_ms) VALUES `, nil, "(?, ?, '', 0, 0, ?)",
		` ON CONFLICT (job, host, holder) DO UPDATE SET last_ms = excluded.last_ms RETURNING host`, rows); err != nil {
		return fmt.Errorf("job %s batch %s: release hosts: %w", job, batch, err)
	}
	for chunk := range slices.Chunk(hosts, 200) {
		args := []any{job, batch}
		for _, h := range chunk {
			args = append(args, h)
		}
		if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM baton_host_leases WHERE job = ? AND holder = ? AND host IN (?`+
			strings.Repeat(", ?", len(chunk)-1)+`)`), args...); err != nil {
			return fmt.Errorf("job %s batch %s: release hosts: %w", job, batch, err)
		}
	}
	return nil
}

// releaseBatch drops every lease of a batch that ends or gives its URLs
// back (FinishBatch, FailBatch, Release, Requeue). The caller holds the
// batch's row.
func (s *Store) releaseBatch(ctx context.Context, tx *sql.Tx, job, batch string) error {
	hosts, err := queryTx(ctx, s, tx, `SELECT host FROM baton_host_leases WHERE job = ? AND holder = ?`, []any{job, batch},
		func(rows *sql.Rows) (string, error) {
			var h string
			return h, rows.Scan(&h)
		})
	if err != nil || len(hosts) == 0 {
		return err
	}
	now, err := s.lockJobNow(ctx, tx, job)
	if err != nil {
		return err
	}
	return s.dropLeases(ctx, tx, job, batch, hosts, now)
}

// handOver renews a batch's leases for its new holder (Claim from
// another holder): the host's next request waits for its delay from now,
// since the old holder's last one may have just started.
func (s *Store) handOver(ctx context.Context, tx *sql.Tx, job, batch string) error {
	pol, err := s.policy(ctx, tx, job)
	if err != nil {
		return err
	}
	now, err := s.lockJobNow(ctx, tx, job)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, s.q(`UPDATE baton_host_leases SET expires_ms = ?, last_ms = ? WHERE job = ? AND holder = ?`),
		now+pol.ttlMS, now, job, batch)
	return err
}

// Pull hands a running batch held at epoch more URLs of hosts it may hold
// (see jobs.RunnerStore).
func (s *Store) Pull(ctx context.Context, job, id string, epoch int64, n, want int) (jobs.Pulled, error) {
	var out jobs.Pulled
	err := s.write(ctx, func(tx *sql.Tx) error {
		out = jobs.Pulled{}
		b, control, err := s.batchAndControl(ctx, tx, job, id)
		if err != nil {
			return err
		}
		if err := heldAt(b, epoch); err != nil {
			return err
		}
		if n > 0 {
			if err := running(job, control); err != nil { // paused or cancelled: control.go
				return err
			}
		}
		// Counted on a row of its own, not the holder's: a group commit of
		// the holder holds that one while it queues for the batch's lock,
		// which this transaction holds.
		if out.Entries, out.Hosts, err = s.pull(ctx, tx, job, id, b.Holder+"/pull", n, max(want, 1), b.Size); err != nil {
			return err
		}
		pol, err := s.policy(ctx, tx, job)
		if err != nil {
			return err
		}
		out.TTL = time.Duration(pol.ttlMS) * time.Millisecond
		return nil
	})
	return out, err
}

// Available reports whether a new batch could take a queued URL of job
// now (see jobs.SupervisorStore).
func (s *Store) Available(ctx context.Context, job string) (bool, error) {
	ok := false
	err := s.read(ctx, func() error {
		pol, err := s.policy(ctx, s.db, job)
		if err != nil {
			return err
		}
		now, err := s.nowMS(ctx, s.db)
		if err != nil {
			return err
		}
		v, err := s.view(ctx, s.db, job, "", pol, now)
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
func (s *Store) Leases(ctx context.Context, job, batch string) ([]jobs.HostLease, error) {
	var out []jobs.HostLease
	err := s.read(ctx, func() error {
		pol, err := s.policy(ctx, s.db, job)
		if err != nil {
			return err
		}
		now, err := s.nowMS(ctx, s.db)
		if err != nil {
			return err
		}
		v, err := s.view(ctx, s.db, job, batch, pol, now)
		if err != nil {
			return err
		}
		for host, h := range v.mine {
			if h.expires <= now {
				delete(v.mine, host)
			}
		}
		out, err = v.leases(ctx)
		return err
	})
	return out, err
}
