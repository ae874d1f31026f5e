package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/batoncrawl/baton/activities/jobs"
)

// This file holds the host leases (baton_host_leases): how a hand-out
// (TakeBatch, Extend, Pull) gives a batch only URLs of hosts it holds or
// can hold, so that a host's parallelism and delay hold across the
// Runners of a job and across the running jobs of the group (the store),
// and how a batch's leases are renewed, handed over and dropped.
//
// Whose budget: a job's leases are counted with those of every job of
// the group that keeps the group's budget (jobs.PolitenessGroup, the
// default): a scheduled crawl that starts while yesterday's still runs,
// or two jobs with seeds on one site, share each host's budget. A job
// with jobs.PolitenessJob keeps its own (crawl --politeness job): its
// leases are counted for its batches only, and the others' not for it.
// Where the jobs sharing a host differ, the stricter wins: a host's
// parallelism is the lowest of those of the jobs holding it (each lease
// row keeps its job's), and the first request of a job after another
// job released the host waits for the longer of the two jobs' delays
// (the release row keeps the delay of the job that released the host).
//
// A host is held by one batch at a time (its share its job's whole
// parallelism) when a delay applies to it: the job's delay, or its
// robots.txt Crawl-delay (baton_robots), or its robots.txt is not known
// yet (whoever holds it fetches it, once for the job). Otherwise its
// parallelism is shared: each batch holds a share, at most what it wants
// in flight, and the shares add up to at most the parallelism. A lease's
// holder is the batch of its job (so a hand-over's new holder has it with
// the batch); the row of holder '' keeps when the host was last released
// (last_ms) and the delay it was crawled with, so that its next holder
// waits for the delay: the row of job '' for the group's budget (any
// job's next request waits), the job's own row for a job's own budget. A
// lease not renewed for its TTL (its Runner died, nobody took its batch
// over) is not counted by any job, and the next hand-out of a job
// sharing it deletes it: a dead Runner blocks no other job longer.
//
// Every write of lease rows holds the job's row lock (PostgreSQL; SQLite
// has one writer), taken after the batch's row and before the counters,
// as the hand-outs take them; a job that keeps the group's budget then
// takes the group's lease lock (an advisory lock of the store, lockHosts)
// at once after its job's row, in the same statement, and nothing else
// before the commit but lease rows and its own job's rows. The lease rows
// themselves are never waited for (every writer of a row of the group's
// budget holds the group's lock), and the order of the locks (frontier
// rows, batch row, job row, group's lease lock, lease rows, counter rows)
// is the one every transaction keeps: no transaction holding the group's
// lock waits for a lock another job's transaction may hold while it
// queues for the group's. The group's hand-outs run one at a time, as a
// job's do among its Runners: PostgreSQL's pull holds the locks for one
// round trip (pipeline.go). The group commit (RecordAll) takes none of
// them.

// hostStore keeps the host leases and the robots.txt files (robots.go).
type hostStore struct {
	*core
	// robotsDelays: job and host → cachedDelay of a kept robots.txt
	robotsDelays sync.Map
}

// queryer runs queries: a transaction, or the database (reads).
type queryer interface {
	querier
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// held is a lease of the batch at hand.
type held struct {
	share   int
	last    int64 // ms: the host's last request by another holder, or its hand-over
	expires int64 // ms
}

// leaseView is a job's live leases as one batch sees them.
type leaseView struct {
	s       *hostStore
	q       queryer
	job     string
	batch   string // "" for a batch that holds none yet
	pol     hostPolicy
	now     int64
	mine    map[string]*held
	others  map[string]int // host → the other batches' live shares, summed
	holders map[string]int // host → how many other batches hold it
	caps    map[string]int // host → the lowest parallelism of the other batches' jobs
	expired bool           // some other batch's lease expired
	// queued is how many URLs of the job were queued when choose saw the
	// whole queue in its first page (a short queue: a crawl's first and
	// last waves); -1 when it did not.
	queued int
	delays map[string]hostDelay
	// first is choose's first page of queued URLs when it was read
	// ahead (a pipelined pull: firstRead), with the page size it was read
	// with; waiting is fairShare's count of start batches read ahead (-1:
	// not).
	first     []candidate
	firstPage int
	firstRead bool
	waiting   int
}

type hostDelay struct {
	exclusive bool
	ms        int64
}

// view reads the leases of the job's budget for batch ("" for a batch
// that holds none yet): the batch's own ones even if expired (it renews
// them unless another batch took the host meanwhile), the others' live
// ones (of the job, or of every job keeping the group's budget).
func (s *hostStore) view(ctx context.Context, q queryer, job, batch string, pol hostPolicy, now int64) (*leaseView, error) {
	v := s.newView(q, job, batch, pol, now)
	rows, err := q.QueryContext(ctx, s.q(leasesQuery(pol)), job)
	if err != nil {
		return nil, fmt.Errorf("job %s: host leases: %w", job, err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := v.add(rows); err != nil {
			return nil, err
		}
	}
	return v, rows.Err()
}

// leasesQuery reads the leases of a job's budget (the job is its
// argument) for view: the job's, and those of the group's budget when it
// keeps it (shared 1: a lease of a job keeping the group's budget).
func leasesQuery(pol hostPolicy) string {
	const cols = `SELECT host, job, holder, share, expires_ms, last_ms, parallelism FROM baton_host_leases WHERE holder > ''`
	if pol.shared {
		return cols + ` AND (shared = 1 OR job = ?)`
	}
	return cols + ` AND job = ?`
}

// newView is a view of no lease yet (add adds them) for batch.
func (s *hostStore) newView(q queryer, job, batch string, pol hostPolicy, now int64) *leaseView {
	return &leaseView{s: s, q: q, job: job, batch: batch, pol: pol, now: now, mine: map[string]*held{}, others: map[string]int{},
		holders: map[string]int{}, caps: map[string]int{}, delays: map[string]hostDelay{}, queued: -1, waiting: -1}
}

// add adds a row of leasesQuery to the view.
func (v *leaseView) add(row scanner) error {
	var host, job, holder string
	var share, parallelism int
	var expires, last int64
	if err := row.Scan(&host, &job, &holder, &share, &expires, &last, &parallelism); err != nil {
		return err
	}
	switch {
	case job == v.job && holder == v.batch:
		v.mine[host] = &held{share: share, last: last, expires: expires}
	case expires > v.now:
		v.others[host] += share
		v.holders[host]++
		if c, ok := v.caps[host]; parallelism > 0 && (!ok || parallelism < c) {
			v.caps[host] = parallelism
		}
	default:
		v.expired = true
	}
	return nil
}

// delay says whether host is held by one batch at a time, and its delay
// in ms (the job's, or its robots.txt Crawl-delay when larger).
func (v *leaseView) delay(ctx context.Context, host string) (hostDelay, error) {
	if d, ok := v.delays[host]; ok {
		return d, nil
	}
	d := hostDelay{ms: v.pol.delayMS}
	if v.pol.robots {
		crawlDelay, known, err := v.s.robotsDelay(ctx, v.q, v.job, host)
		if err != nil {
			return d, err
		}
		d.ms = max(d.ms, crawlDelay)
		d.exclusive = !known
	}
	d.exclusive = d.exclusive || d.ms > 0
	v.delays[host] = d
	return d, nil
}

// robotsDelay says whether the robots.txt of host is kept for the job, and
// the largest Crawl-delay (ms) of those kept. A host's robots.txt once
// kept stays kept (it is replaced, never removed, while the job lasts), so
// that answer is remembered for robotsDelayTTL: a hand-out, under the
// job's lock, does not read it every time (a Crawl-delay changed by a
// robots.txt another process fetched again applies that much later; this
// store's PutRobots forgets it at once).
func (s *hostStore) robotsDelay(ctx context.Context, q querier, job, host string) (int64, bool, error) {
	key := job + "\x00" + host
	if v, ok := s.robotsDelays.Load(key); ok {
		if c := v.(cachedDelay); time.Since(c.at) < robotsDelayTTL {
			return c.ms, true, nil
		}
	}
	var known int
	var crawlDelay int64
	if err := q.QueryRowContext(ctx, s.q(`SELECT COUNT(*), COALESCE(MAX(crawl_delay_ms), 0) FROM baton_robots WHERE job = ? AND host = ? AND status <> ?`),
		job, host, robotsClaim).Scan(&known, &crawlDelay); err != nil {
		return 0, false, fmt.Errorf("job %s: robots.txt of %s: %w", job, host, err)
	}
	if known > 0 {
		s.robotsDelays.Store(key, cachedDelay{ms: crawlDelay, at: time.Now()})
	}
	return crawlDelay, known > 0, nil
}

// robotsDelayTTL is how long robotsDelay remembers a kept robots.txt.
const robotsDelayTTL = time.Second

// cachedDelay is a Crawl-delay robotsDelay read, and when.
type cachedDelay struct {
	ms int64
	at time.Time
}

// share is the share of host a batch wanting spare more requests in
// flight may take now (0 when none is free), and what it costs of spare:
// the share of a shared host, at most an equal part of it among its
// holders (the batch grows into what the others leave at its next pulls:
// tend), so that batches handed out one after the other all get some; 1
// for a host held whole, which its delay (or its robots.txt, while it is
// fetched) keeps to about one request in flight, so that a batch holds as
// many of those as it has slots.
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
	limit := v.parallelism(host)
	equal := (limit + v.holders[host]) / (v.holders[host] + 1) // rounded up
	share = max(0, min(limit-used, spare, equal))
	return share, share, nil
}

// parallelism is the most requests in flight to host: the job's, or the
// lowest of those of the other jobs holding it (the stricter wins).
func (v *leaseView) parallelism(host string) int {
	if c, ok := v.caps[host]; ok && c < v.pol.parallelism {
		return c
	}
	return v.pol.parallelism
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
// URLs in frontier order, in pages that double from twice what it wants
// up to scanPage (the first page usually has them all); then, if it has
// found too
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
	c := &chooser{v: v, n: n, spare: spare, acquired: map[string]int{}, refused: map[string]bool{}}
	last, whole, err := c.scan(ctx)
	if err != nil {
		return nil, nil, err
	}
	if !whole {
		if err := c.probe(ctx, last); err != nil {
			return nil, nil, err
		}
	}
	return c.out, c.acquired, nil
}

// chooser is a choice of choose in progress: the URLs chosen, the shares
// of the hosts to lease for them, and the hosts refused.
type chooser struct {
	v        *leaseView
	n, spare int
	out      []candidate
	acquired map[string]int
	refused  map[string]bool
}

// takeable says whether the batch may take a URL of host: a host it holds
// or is to lease, or one whose share it can lease now (then to lease).
func (c *chooser) takeable(ctx context.Context, host string) (bool, error) {
	if host == "" {
		return true, nil
	}
	if _, ok := c.v.mine[host]; ok {
		return true, nil
	}
	if _, ok := c.acquired[host]; ok {
		return true, nil
	}
	if c.refused[host] {
		return false, nil
	}
	sh, cost, err := c.v.share(ctx, host, c.spare)
	if err != nil || sh == 0 {
		c.refused[host] = true
		return false, err
	}
	c.acquired[host] = sh
	c.spare -= cost
	return true, nil
}

// take takes what it may of got, queued URLs read in frontier order, and
// returns how many were read and the last one's seq.
func (c *chooser) take(ctx context.Context, got []candidate) (int, int64, error) {
	var last int64
	for _, cand := range got {
		last = cand.seq
		if len(c.out) == c.n {
			break
		}
		if cand.host == "" {
			cand.host = jobs.HostOf(cand.e.URL) // a row queued by an older Baton
		}
		ok, err := c.takeable(ctx, cand.host)
		if err != nil {
			return 0, 0, err
		}
		if ok {
			c.out = append(c.out, cand)
		}
	}
	return len(got), last, nil
}

// scan takes from the queued URLs in frontier order, in pages, up to
// scanMax of them; whole says it saw the whole queue, last is the seq of
// the last URL it read.
func (c *chooser) scan(ctx context.Context) (last int64, whole bool, err error) {
	v := c.v
	last = firstSeq
	for scanned, page := 0, firstScanPage(c.n); len(c.out) < c.n; page = min(scanPage, 2*page) {
		got, ok := v.readAhead(page)
		if !ok {
			if got, err = v.s.queued(ctx, v.q, v.job, v.s.d.seqCol+` > ?`, []any{last}, page); err != nil {
				return 0, false, err
			}
		}
		k, l, err := c.take(ctx, got)
		if err != nil {
			return 0, false, err
		}
		if k < page {
			if scanned == 0 {
				v.queued = k
			}
			return last, true, nil
		}
		last = l
		if scanned += k; scanned >= scanMax {
			break
		}
	}
	return last, false, nil
}

// probe takes, further on, the URLs of hosts not seen yet (or the
// batch's, past the pages scan read: seq above last), host by host in
// the frontier's host index, up to hostProbes hosts.
func (c *chooser) probe(ctx context.Context, last int64) error {
	v := c.v
	after, cmp := "", ">="
	for range hostProbes {
		if len(c.out) >= c.n {
			break
		}
		var host sql.NullString
		if err := v.q.QueryRowContext(ctx, v.s.q(`SELECT MIN(host) FROM baton_frontier WHERE job = ? AND state = 0 AND host `+cmp+` ?`),
			v.job, after).Scan(&host); err != nil {
			return fmt.Errorf("job %s: queued hosts: %w", v.job, err)
		}
		if !host.Valid {
			break
		}
		after, cmp = host.String, ">"
		ok, err := c.takeable(ctx, host.String)
		if err != nil {
			return err
		}
		if ok {
			got, err := v.s.queued(ctx, v.q, v.job, `host = ? AND `+v.s.d.seqCol+` > ?`, []any{host.String, last}, c.n-len(c.out))
			if err != nil {
				return err
			}
			if _, _, err := c.take(ctx, got); err != nil {
				return err
			}
		}
	}
	return nil
}

// readAhead returns, once, the first page of queued URLs read ahead, if
// it was read with page as its size.
func (v *leaseView) readAhead(page int) ([]candidate, bool) {
	if !v.firstRead || page != v.firstPage {
		return nil, false
	}
	v.firstRead = false
	return v.first, true
}

// firstSeq is below every seq: choose's first page starts after it.
const firstSeq int64 = -1 << 62

// firstScanPage is the size of choose's first page of queued URLs for a
// hand-out of n.
func firstScanPage(n int) int { return min(scanPage, max(16, 2*n)) }

// queuedQuery reads queued URLs of a job in frontier order for choose:
// job, then the arguments of where, then the limit.
func (s *hostStore) queuedQuery(where string) string {
	return `SELECT ` + entryCols + `, ` + s.d.seqCol + `, host FROM baton_frontier
			WHERE job = ? AND state = 0 AND ` + where + ` ORDER BY ` + s.d.seqCol + ` LIMIT ?`
}

// queued runs queuedQuery.
func (s *hostStore) queued(ctx context.Context, q queryer, job, where string, args []any, limit int) ([]candidate, error) {
	got, err := queryTx(ctx, s.core, q, s.queuedQuery(where), append(append([]any{job}, args...), limit),
		func(rows *sql.Rows) (candidate, error) { return scanCandidate(rows) })
	if err != nil {
		return nil, fmt.Errorf("job %s: queued URLs: %w", job, err)
	}
	return got, nil
}

// scanCandidate reads a row of queuedQuery.
func scanCandidate(row scanner) (candidate, error) {
	var c candidate
	var err error
	c.e, err = scanEntry(row, &c.seq, &c.host)
	return c, err
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
