package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/batoncrawl/baton/activities/jobs"
)

// This file holds the host leases (baton_host_leases): how a hand-out
// (TakeBatch, Extend, Pull) gives a batch only URLs of hosts it holds or
// can hold, so that a job's parallelism and delay per host hold across
// its Runners, and how a batch's leases are renewed, handed over and
// dropped.
//
// A host is held by one batch at a time (its share the job's whole
// parallelism) when a delay applies to it: the job's delay, or its
// robots.txt Crawl-delay (baton_robots), or its robots.txt is not known
// yet (whoever holds it fetches it, once for the job). Otherwise its
// parallelism is shared: each batch holds a share, at most what it wants
// in flight, and the shares add up to at most the parallelism. A lease's
// holder is the batch (so a hand-over's new holder has it with the
// batch); the row of holder '' keeps when the host was last released
// (last_ms), so that its next holder waits for the delay.
//
// Every write of lease rows holds the job's row lock (PostgreSQL; SQLite
// has one writer), taken after the batch's row and before the counters,
// as the hand-outs take them: the lease rows themselves are never waited
// for, and the order of the locks (frontier rows, batch row, job row,
// lease rows, counter rows) is the one every transaction keeps. The
// group commit (RecordAll) takes none of them.

// hostPolicy is what a job's leases keep (jobs.Spec.Politeness), read
// once per job from its spec.
type hostPolicy struct {
	parallelism int
	delayMS     int64
	robots      bool
	ttlMS       int64
}

func (s *Store) policy(ctx context.Context, q querier, job string) (hostPolicy, error) {
	if v, ok := s.policies.Load(job); ok {
		return v.(hostPolicy), nil
	}
	var data string
	err := q.QueryRowContext(ctx, s.q(`SELECT spec FROM baton_jobs WHERE id = ?`), job).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
		return hostPolicy{}, fmt.Errorf("job %s in %s: %w", job, s.id, jobs.ErrNoJob)
	}
	if err != nil {
		return hostPolicy{}, err
	}
	spec, err := jobs.DecodeSpec([]byte(data))
	if err != nil {
		return hostPolicy{}, fmt.Errorf("job %s in %s: %w", job, s.id, err)
	}
	p, delay, robots := spec.Politeness()
	pol := hostPolicy{parallelism: p, delayMS: delay.Milliseconds(), robots: robots, ttlMS: jobs.LeaseTTL(spec.Timers).Milliseconds()}
	s.policies.Store(job, pol)
	return pol, nil
}

// lockJob takes the job's row lock up to the commit (PostgreSQL): the
// job's hand-outs and lease writes run one at a time.
func (s *Store) lockJob(ctx context.Context, tx *sql.Tx, job string) error {
	if s.d.forUpdate == "" {
		return nil
	}
	var one int
	err := tx.QueryRowContext(ctx, s.q(`SELECT 1 FROM baton_jobs WHERE id = ?`+s.d.forUpdate), job).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("job %s in %s: %w", job, s.id, jobs.ErrNoJob)
	}
	if err != nil {
		return fmt.Errorf("job %s: lock the job: %w", job, err)
	}
	return nil
}

func (s *Store) nowMS(ctx context.Context, q querier) (int64, error) {
	var now int64
	err := q.QueryRowContext(ctx, `SELECT `+s.d.nowMS).Scan(&now)
	return now, err
}

// queryer runs queries: a transaction, or the database (reads).
type queryer interface {
	querier
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// held is a lease of the batch at hand.
type held struct {
	share int
	last  int64 // ms: the host's last request by another holder, or its hand-over
}

// leaseView is a job's live leases as one batch sees them.
type leaseView struct {
	s       *Store
	q       queryer
	job     string
	pol     hostPolicy
	now     int64
	mine    map[string]*held
	others  map[string]int // host → the other batches' live shares, summed
	expired bool           // some other batch's lease expired
	delays  map[string]hostDelay
}

type hostDelay struct {
	exclusive bool
	ms        int64
}

// view reads the job's leases for batch ("" for a batch that holds none
// yet): the batch's own ones even if expired (it renews them unless
// another batch took the host meanwhile), the others' live ones.
func (s *Store) view(ctx context.Context, q queryer, job, batch string, pol hostPolicy, now int64) (*leaseView, error) {
	v := &leaseView{s: s, q: q, job: job, pol: pol, now: now, mine: map[string]*held{}, others: map[string]int{}, delays: map[string]hostDelay{}}
	rows, err := q.QueryContext(ctx, s.q(`SELECT host, holder, share, expires_ms, last_ms FROM baton_host_leases WHERE job = ? AND holder <> ''`), job)
	if err != nil {
		return nil, fmt.Errorf("job %s: host leases: %w", job, err)
	}
	defer rows.Close()
	for rows.Next() {
		var host, holder string
		var share int
		var expires, last int64
		if err := rows.Scan(&host, &holder, &share, &expires, &last); err != nil {
			return nil, err
		}
		switch {
		case holder == batch:
			v.mine[host] = &held{share: share, last: last}
		case expires > now:
			v.others[host] += share
		default:
			v.expired = true
		}
	}
	return v, rows.Err()
}

// delay says whether host is held by one batch at a time, and its delay
// in ms (the job's, or its robots.txt Crawl-delay when larger).
func (v *leaseView) delay(ctx context.Context, host string) (hostDelay, error) {
	if d, ok := v.delays[host]; ok {
		return d, nil
	}
	d := hostDelay{ms: v.pol.delayMS}
	if v.pol.robots {
		var known int
		var crawlDelay int64
		if err := v.q.QueryRowContext(ctx, v.s.q(`SELECT COUNT(*), COALESCE(MAX(crawl_delay_ms), 0) FROM baton_robots WHERE job = ? AND host = ?`),
			v.job, host).Scan(&known, &crawlDelay); err != nil {
			return d, fmt.Errorf("job %s: robots.txt of %s: %w", v.job, host, err)
		}
		d.ms = max(d.ms, crawlDelay)
		d.exclusive = known == 0
	}
	d.exclusive = d.exclusive || d.ms > 0
	v.delays[host] = d
	return d, nil
}

// share is the share of host a batch wanting spare more requests in
// flight may take now (0 when none is free), and what it costs of spare:
// the share of a shared host; 1 for a host held whole, which its delay
// (or its robots.txt, while it is fetched) keeps to about one request in
// flight, so that a batch holds as many of those as it has slots.
func (v *leaseView) share(ctx context.Context, host string, spare int) (share, cost int, err error) {
	if spare <= 0 {
		return 0, 0, nil
	}
	d, err := v.delay(ctx, host)
	if err != nil {
		return 0, 0, err
	}
	used := v.others[host]
	if d.exclusive {
		if used > 0 {
			return 0, 0, nil
		}
		return v.pol.parallelism, 1, nil
	}
	share = max(0, min(v.pol.parallelism-used, spare))
	return share, share, nil
}

// cost is what the batch's lease of host costs of what it wants in flight
// (see share).
func (v *leaseView) cost(ctx context.Context, host string, h *held) (int, error) {
	d, err := v.delay(ctx, host)
	if err != nil || d.exclusive {
		return 1, err
	}
	return h.share, nil
}

// spare is how many more requests in flight the batch wants beyond what
// its leases cost.
func (v *leaseView) spare(ctx context.Context, want int) (int, error) {
	for host, h := range v.mine {
		c, err := v.cost(ctx, host, h)
		if err != nil {
			return 0, err
		}
		want -= c
	}
	return want, nil
}

// candidate is a queued URL a hand-out may take.
type candidate struct {
	seq  int64
	host string
	e    jobs.Entry
}

// How far a hand-out looks for URLs it may take: the first scanMax queued
// URLs in frontier order, in pages of scanPage; then, if it has found too
// few, up to hostProbes hosts of the queued URLs (by the frontier's host
// index), for the URLs of those it may take.
const (
	scanPage   = 256
	scanMax    = 2048
	hostProbes = 256
)

// choose picks up to n queued URLs the batch may take, in frontier order
// (those of hosts found by the host probes after), and the shares of the
// hosts it would lease for them (spare: how many more requests in flight
// the batch wants).
func (v *leaseView) choose(ctx context.Context, n, spare int) ([]candidate, map[string]int, error) {
	acquired := map[string]int{}
	refused := map[string]bool{}
	takeable := func(host string) (bool, error) {
		if host == "" {
			return true, nil
		}
		if _, ok := v.mine[host]; ok {
			return true, nil
		}
		if _, ok := acquired[host]; ok {
			return true, nil
		}
		if refused[host] {
			return false, nil
		}
		sh, cost, err := v.share(ctx, host, spare)
		if err != nil || sh == 0 {
			refused[host] = true
			return false, err
		}
		acquired[host] = sh
		spare -= cost
		return true, nil
	}
	var out []candidate
	scan := func(where string, args []any, limit int) (int, int64, error) {
		rows, err := v.q.QueryContext(ctx, v.s.q(`SELECT `+entryCols+`, `+v.s.d.seqCol+`, host FROM baton_frontier
			WHERE job = ? AND state = 0 AND `+where+` ORDER BY `+v.s.d.seqCol+` LIMIT ?`), append(append([]any{v.job}, args...), limit)...)
		if err != nil {
			return 0, 0, fmt.Errorf("job %s: queued URLs: %w", v.job, err)
		}
		var got []candidate
		for rows.Next() {
			var c candidate
			if c.e, err = scanEntry(rows, &c.seq, &c.host); err != nil {
				rows.Close()
				return 0, 0, err
			}
			got = append(got, c)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return 0, 0, err
		}
		var last int64
		for _, c := range got {
			last = c.seq
			if len(out) == n {
				break
			}
			if c.host == "" {
				c.host = jobs.HostOf(c.e.URL) // a row queued by an older Baton
			}
			ok, err := takeable(c.host)
			if err != nil {
				return 0, 0, err
			}
			if ok {
				out = append(out, c)
			}
		}
		return len(got), last, nil
	}
	var last int64 = -1 << 62
	for scanned := 0; len(out) < n; {
		k, l, err := scan(v.s.d.seqCol+` > ?`, []any{last}, scanPage)
		if err != nil {
			return nil, nil, err
		}
		if k < scanPage {
			return out, acquired, nil // the whole queue seen
		}
		last = l
		if scanned += k; scanned >= scanMax {
			break
		}
	}
	// Further on, the URLs of hosts not seen yet (or ours, past the
	// pages read).
	after, cmp := "", ">="
	for range hostProbes {
		if len(out) >= n {
			break
		}
		var host sql.NullString
		if err := v.q.QueryRowContext(ctx, v.s.q(`SELECT MIN(host) FROM baton_frontier WHERE job = ? AND state = 0 AND host `+cmp+` ?`),
			v.job, after).Scan(&host); err != nil {
			return nil, nil, fmt.Errorf("job %s: queued hosts: %w", v.job, err)
		}
		if !host.Valid {
			break
		}
		after, cmp = host.String, ">"
		ok, err := takeable(host.String)
		if err != nil {
			return nil, nil, err
		}
		if ok {
			if _, _, err := scan(`host = ? AND `+v.s.d.seqCol+` > ?`, []any{host.String, last}, n-len(out)); err != nil {
				return nil, nil, err
			}
		}
	}
	return out, acquired, nil
}

// leases is the batch's leases as a Runner reads them.
func (v *leaseView) leases(ctx context.Context) ([]jobs.HostLease, error) {
	out := make([]jobs.HostLease, 0, len(v.mine))
	for host, h := range v.mine {
		d, err := v.delay(ctx, host)
		if err != nil {
			return nil, err
		}
		l := jobs.HostLease{Host: host, Share: h.share, Exclusive: d.exclusive}
		if wait := h.last + d.ms - v.now; wait > 0 && h.last > 0 {
			l.Wait = time.Duration(wait) * time.Millisecond
		}
		out = append(out, l)
	}
	slices.SortFunc(out, func(a, b jobs.HostLease) int { return strings.Compare(a.Host, b.Host) })
	return out, nil
}

// pull hands up to n queued URLs of job to batch (counted as taken by
// shard) as a batch wanting want requests in flight, after renewing,
// resizing and dropping the batch's leases; it returns the URLs in
// frontier order and the batch's leases after it. The caller holds the
// batch's row (Extend, Pull) or is making the batch (TakeBatch).
func (s *Store) pull(ctx context.Context, tx *sql.Tx, job, batch, shard string, n, want int) ([]jobs.Entry, []jobs.HostLease, error) {
	pol, err := s.policy(ctx, tx, job)
	if err != nil {
		return nil, nil, err
	}
	if err := s.lockJob(ctx, tx, job); err != nil {
		return nil, nil, err
	}
	if n > 0 {
		if n, err = s.underMaxPages(ctx, tx, job, n); err != nil {
			return nil, nil, err
		}
	}
	now, err := s.nowMS(ctx, tx)
	if err != nil {
		return nil, nil, err
	}
	v, err := s.view(ctx, tx, job, batch, pol, now)
	if err != nil {
		return nil, nil, err
	}
	if v.expired {
		// Their holders stopped renewing them a lease's TTL ago.
		if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM baton_host_leases WHERE job = ? AND holder <> '' AND holder <> ? AND expires_ms <= ?`),
			job, batch, now); err != nil {
			return nil, nil, fmt.Errorf("job %s: drop expired host leases: %w", job, err)
		}
	}
	if err := s.tend(ctx, tx, v, batch, want); err != nil {
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
		if err := s.acquire(ctx, tx, v, batch, acquired); err != nil {
			return nil, nil, err
		}
		if out, err = s.handTo(ctx, tx, job, batch, chosen); err != nil {
			return nil, nil, err
		}
		if err := s.count(ctx, tx, job, shard, counts{taken: len(out)}); err != nil {
			return nil, nil, err
		}
	}
	leases, err := v.leases(ctx)
	return out, leases, err
}

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
// back.
func (s *Store) tend(ctx context.Context, tx *sql.Tx, v *leaseView, batch string, want int) error {
	open := map[string]bool{}
	rows, err := queryTx(ctx, s, tx, `SELECT url, host FROM baton_frontier WHERE job = ? AND batch = ? AND state = 1`, []any{v.job, batch},
		func(rows *sql.Rows) (string, error) {
			var u, h string
			if err := rows.Scan(&u, &h); err != nil || h != "" {
				return h, err
			}
			return jobs.HostOf(u), nil
		})
	if err != nil {
		return fmt.Errorf("job %s batch %s: hosts of its URLs: %w", v.job, batch, err)
	}
	spare, err := v.spare(ctx, want)
	if err != nil {
		return err
	}
	adopt := map[string]int{}
	for _, h := range rows {
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
		for rows.Next() {
			var host string
			var ms int64
			if err := rows.Scan(&host, &ms); err != nil {
				rows.Close()
				return err
			}
			last[host] = ms
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
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

// handTo moves the chosen queued URLs into batch and returns those moved,
// in frontier order.
func (s *Store) handTo(ctx context.Context, tx *sql.Tx, job, batch string, chosen []candidate) ([]jobs.Entry, error) {
	if len(chosen) == 0 {
		return nil, nil
	}
	urls := make([][]any, len(chosen))
	for i, c := range chosen {
		urls[i] = []any{c.e.URL}
	}
	moved, err := s.returning(ctx, tx, `UPDATE baton_frontier SET state = 1, batch = ? WHERE job = ? AND state = 0 AND url IN (`,
		[]any{batch, job}, "?", `) RETURNING url`, urls)
	if err != nil {
		return nil, fmt.Errorf("hand out job %s batch %s: %w", job, batch, err)
	}
	out := make([]jobs.Entry, 0, len(moved))
	for _, c := range chosen {
		if moved[c.e.URL] {
			out = append(out, c.e)
		}
	}
	return out, nil
}

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
	if err := s.lockJob(ctx, tx, job); err != nil {
		return err
	}
	now, err := s.nowMS(ctx, tx)
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
	if err := s.lockJob(ctx, tx, job); err != nil {
		return err
	}
	now, err := s.nowMS(ctx, tx)
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
		b, err := s.checkEpoch(ctx, tx, job, id, epoch, s.d.forUpdate)
		if err != nil {
			return err
		}
		if n > 0 {
			if err := s.checkRunning(ctx, tx, job); err != nil { // paused or cancelled: control.go
				return err
			}
		}
		// Counted on a row of its own, not the holder's: a group commit of
		// the holder holds that one while it queues for the batch's lock,
		// which this transaction holds.
		if out.Entries, out.Hosts, err = s.pull(ctx, tx, job, id, b.Holder+"/pull", n, max(want, 1)); err != nil {
			return err
		}
		pol, err := s.policy(ctx, tx, job)
		if err != nil {
			return err
		}
		out.TTL = time.Duration(pol.ttlMS) * time.Millisecond
		if len(out.Entries) == 0 {
			return nil
		}
		_, err = tx.ExecContext(ctx, s.q(`UPDATE baton_batches SET size = size + ? WHERE job = ? AND id = ?`), len(out.Entries), job, id)
		return err
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
