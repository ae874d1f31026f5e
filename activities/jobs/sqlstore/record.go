package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/batoncrawl/baton/activities/crawler"
	"github.com/batoncrawl/baton/activities/jobs"
)

// This file holds the recording of a batch's finished URLs: a group
// commit of their pages, links, bodies and body hashes.

// resultStore keeps what the group commits write and the reads of it
// (results.go): pages, bodies, body hashes. A commit queues the links its
// pages found, and may hand some to its batch, in the frontier.
type resultStore struct {
	*core
	frontier *frontierStore
}

// Record writes one finished URL of a batch (see jobs.Store).
func (s *resultStore) Record(ctx context.Context, r jobs.Record) (jobs.Recorded, error) {
	out, err := s.RecordAll(ctx, []jobs.Record{r})
	if err != nil {
		return jobs.Recorded{}, err
	}
	return out[0], nil
}

// RecordAll writes finished URLs of one batch at one epoch in one
// transaction (a group commit: one fsync for them all); see Record.
func (s *resultStore) RecordAll(ctx context.Context, rs []jobs.Record) ([]jobs.Recorded, error) {
	out, _, err := s.RecordTake(ctx, rs, 0)
	return out, err
}

// RecordTake is RecordAll that moves up to take of the new links into the
// batch in the same transaction (see jobs.RunnerStore).
func (s *resultStore) RecordTake(ctx context.Context, rs []jobs.Record, take int) ([]jobs.Recorded, []jobs.Entry, error) {
	if len(rs) == 0 {
		return nil, nil, nil
	}
	known := s.frontier.knownFor(rs[0].Job)
	g, err := newGroup(rs, take, known)
	if err != nil {
		return nil, nil, err
	}
	ctx, h := withHandout(ctx)
	queued := false // the links went into the frontier (not cut by max_pages)
	pipelined, taken, err := s.recordPipelined(ctx, g)
	if pipelined {
		queued = err == nil && len(g.links) > 0
	} else {
		queued, taken, err = s.record(ctx, g)
	}
	if err == nil && take > 0 && h.retried() {
		// A try before may have committed, its reply lost: what it took
		// is in the batch under its token, and the try after took none.
		taken, err = s.frontier.handedOut(ctx, g.job, g.batch, h.token)
	}
	if err == nil && queued {
		// Committed: every link sent is in the frontier now (inserted, or
		// there before).
		urls := make([]string, len(g.links))
		for i, l := range g.links {
			urls[i] = l.URL
		}
		known.add(urls)
	}
	if err != nil {
		taken = nil
	}
	return g.out, taken, err
}

// group is a group commit as RecordTake prepares it: the records of one
// batch at one epoch, and what both ways of committing them (record,
// recordPipelined) write.
type group struct {
	rs                []jobs.Record
	job, batch, shard string // shard: the writer's counter row
	epoch             int64
	take              int // how many new links the batch takes at most
	// links are the links to send, each once, in URL order; owner says,
	// by URL, which page of rs found each first; refused are the links
	// refused, by index in rs.
	links   []jobs.Entry
	owner   map[string]int
	refused map[int][]jobs.RefusedLink
	urls    [][]any // the group's own URLs, in URL order
	out     []jobs.Recorded
}

// newGroup checks that rs are of one batch at one epoch and prepares
// their commit. Links known to be in the frontier already are not sent
// (known.go).
func newGroup(rs []jobs.Record, take int, known *knownURLs) (*group, error) {
	g := &group{rs: rs, job: rs[0].Job, batch: rs[0].Batch, shard: rs[0].Runner, epoch: rs[0].Epoch, take: take,
		owner: map[string]int{}, refused: map[int][]jobs.RefusedLink{}, out: make([]jobs.Recorded, len(rs))}
	for _, r := range rs {
		if r.Job != g.job || r.Batch != g.batch || r.Epoch != g.epoch {
			return nil, fmt.Errorf("record: %s/%s@%d and %s/%s@%d in one call: one batch at one epoch per call", g.job, g.batch, g.epoch, r.Job, r.Batch, r.Epoch)
		}
	}
	for i, r := range rs {
		for _, l := range r.Links {
			if err := jobs.CheckURLLength(l.URL); err != nil {
				g.refused[i] = append(g.refused[i], jobs.RefusedLink{URL: l.URL[:256], Reason: err.Error()})
				continue
			}
			if _, ok := g.owner[l.URL]; !ok && !known.has(l.URL) {
				g.owner[l.URL] = i // its label and data are the first page's
				g.links = append(g.links, l)
			}
		}
	}
	slices.SortFunc(g.links, func(a, b jobs.Entry) int { return strings.Compare(a.URL, b.URL) })
	g.urls = make([][]any, len(rs))
	for i, r := range rs {
		g.urls[i] = []any{r.URL}
	}
	slices.SortFunc(g.urls, func(a, b []any) int { return strings.Compare(a[0].(string), b[0].(string)) })
	return g, nil
}

// linkRows are the frontier rows of links for linksHead.
func (g *group) linkRows(links []jobs.Entry) [][]any {
	rows := make([][]any, len(links))
	for i, l := range links {
		rows[i] = entryRow(g.job, l)
	}
	return rows
}

// countAdded counts the links added to the frontier on the pages that
// found them.
func (g *group) countAdded(added map[string]bool) {
	for u := range added {
		g.out[g.owner[u]].Added++
	}
}

// The statements of a group commit's rows (chunked, tx.go), on both
// paths: the links queued, the group's own URLs finished, the results and
// the bodies (RETURNING url, for those written, is added where read).
// A result is written only for a URL the same transaction finished (a
// URL's result row and its finished state are written together, and
// RequeueFailed drops the one as it undoes the other), so it never
// meets a row of its URL: a plain INSERT, without ON CONFLICT, which on
// PostgreSQL would cost each row a speculative insertion's confirmation
// record in the WAL.
const (
	linksHead  = `INSERT INTO baton_frontier (job, url, depth, label, data, host) VALUES `
	linksTuple = "(?, ?, ?, ?, ?, ?)"
	linksTail  = ` ON CONFLICT (job, url) DO NOTHING RETURNING url`
	finishHead = `UPDATE baton_frontier SET state = 2, handout = NULL WHERE job = ? AND batch = ? AND state = 1 AND url IN (`
	finishTail = `) RETURNING url`
	// resultsInto is the insert of a result row, every column named: a
	// group commit's (resultsHead), a carry's and a bulk 304's.
	resultsInto = `INSERT INTO baton_results (job, url, batch, failed, record, claim, etag, last_modified, content_hash, change,
		saved_bytes, links, interval_ms, next_ms, warc_id, warc_uri, warc_date, warc_digest)`
	resultsHead  = resultsInto + ` VALUES `
	resultsTuple = "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
	resultsTail  = ` RETURNING url`
	bodiesHead   = `INSERT INTO baton_bodies (job, url, body) VALUES `
	bodiesTuple  = "(?, ?, ?)"
	bodiesTail   = ` ON CONFLICT (job, url) DO NOTHING`
)

// record is RecordTake statement by statement, in one write transaction:
// queued says the links went into the frontier (not cut by max_pages),
// taken are the links handed to the batch.
func (s *resultStore) record(ctx context.Context, g *group) (queued bool, taken []jobs.Entry, err error) {
	err = s.write(ctx, func(tx *sql.Tx) error {
		clear(g.out)
		// One statement per kind of row for the whole group, not per page,
		// and every kind of row taken in one order by every recording, so
		// no two recordings ever wait for each other in a cycle:
		//  1. the links, new frontier rows, in URL order. An insert waits
		//     only for a transaction that inserted or changed the same URL:
		//     another recording's new link (URL order: no cycle), or a
		//     recording, hand-out or re-queue past this step, which waits
		//     for nothing this transaction holds; then the new ones the
		//     batch takes handed to it (rows it inserted: no wait);
		//  2. the group's own URLs finished, in URL order (rows no other
		//     recording holds: they are this batch's);
		//  3. the batch's row, locked and its epoch checked: a commit at a
		//     stale epoch writes nothing below it;
		//  4. results (the group's own URLs; those claiming a body hash
		//     first, in hash order: claims.go), their bodies, their items
		//     (on PostgreSQL under the job's items lock, which only group
		//     commits take, here: its holder waits only for the rows below,
		//     which nobody waiting for that lock holds), and last the
		//     writer's counter row: rows no transaction takes before a
		//     batch row.
		// A pipelined commit (recordpipe.go) takes them in this order too
		// (it hands the links it takes to the batch with its COMMIT).
		// Finishing the own URLs before the links would make two groups
		// whose pages link to each other wait in a cycle: each would hold
		// its own finished row the other's link insert waits for.
		var c counts
		var err error
		if queued, taken, c, err = s.queueLinks(ctx, tx, g); err != nil {
			return err
		}
		finished, owners, err := s.finishOwn(ctx, tx, g)
		if err != nil {
			return err
		}
		// FOR UPDATE, not FOR SHARE: PostgreSQL grants a share lock next
		// to other share lockers ahead of a queued FOR UPDATE, so a holder
		// recording from several goroutines would starve the Claim or
		// Requeue that fences it. Held from here to the commit, so no
		// group commits after a Claim or Requeue raised the epoch. With
		// links taken, the update of the batch's size takes that lock and
		// reads the epoch (one statement less on a crawl's first waves).
		if len(taken) > 0 {
			if _, err := s.frontier.growBatch(ctx, tx, g.job, g.batch, g.epoch, len(taken)); err != nil {
				return err
			}
		} else if _, err := s.frontier.checkEpoch(ctx, tx, g.job, g.batch, g.epoch, s.d.forUpdate); err != nil {
			return err
		}
		return s.writeResults(ctx, tx, g, finished, owners, c)
	})
	return queued, taken, err
}

// finishOwn is record's second step: it finishes the group's own URLs
// (finished: those of the batch not finished before) and reads the
// owners of the body hashes the finished pages claim.
func (s *resultStore) finishOwn(ctx context.Context, tx dbtx, g *group) (finished map[string]bool, owners map[string]string, err error) {
	finished, err = s.returning(ctx, tx, finishHead, []any{g.job, g.batch}, "?", finishTail, g.urls)
	if err != nil {
		return nil, nil, fmt.Errorf("record: finish URLs: %w", err)
	}
	owners, err = s.owners(ctx, tx, g.job, claimHashes(g.rs, func(u string) bool { return finished[u] }))
	if err != nil {
		return nil, nil, fmt.Errorf("record: body hashes: %w", err)
	}
	return finished, owners, nil
}

// queueLinks is record's first step: it queues the group's links and
// hands the first new ones (up to g.take, of the hosts it may take) to
// the batch; queued says the links went into the frontier, c counts the
// links seen and taken.
func (s *resultStore) queueLinks(ctx context.Context, tx dbtx, g *group) (queued bool, taken []jobs.Entry, c counts, err error) {
	if len(g.links) == 0 {
		return false, nil, c, nil
	}
	queue := g.links
	maxPages, err := s.jobMaxPages(ctx, tx, g.job)
	if err != nil {
		return false, nil, c, err
	}
	if maxPages > 0 {
		// URLs beyond max_pages are never handed out (underMaxPages
		// counts exactly): once max_pages URLs are seen, queue no more.
		// Until then every new link is queued, so known links never use
		// up the quota of new ones.
		sc, err := s.sums(ctx, tx, g.job)
		if err != nil {
			return false, nil, c, err
		}
		if sc.seen >= maxPages {
			queue = nil
		}
	}
	// Every link goes in queued; the first new ones (up to take, of the
	// hosts it may take) are then handed out to the batch: rows this
	// transaction inserted, under its own locks.
	var hosts map[string]bool
	if g.take > 0 && maxPages == 0 {
		if hosts, err = s.takeHosts(ctx, tx, g.job, g.batch, g.rs); err != nil {
			return false, nil, c, err
		}
	}
	added, err := s.returning(ctx, tx, linksHead, nil, linksTuple, linksTail, g.linkRows(queue))
	if err != nil {
		return false, nil, c, fmt.Errorf("record: queue links: %w", err)
	}
	g.countAdded(added)
	taken, mine := takeNew(queue, added, hosts, g.take)
	for _, st := range s.chunked(takeHead, []any{g.batch, handoutOf(ctx), g.job}, "?", ")", mine) {
		if _, err := tx.ExecContext(ctx, st.query, st.args...); err != nil {
			return false, nil, c, fmt.Errorf("record: take links: %w", err)
		}
	}
	c.seen, c.taken = len(added), len(taken)
	return len(queue) > 0, taken, c, nil
}

// writeResults is record's last step, once the batch's row is locked: the
// results of the pages finished (finished; owners the owners of their
// body hashes found), their bodies and items, and the writer's counter
// row with c.
func (s *resultStore) writeResults(ctx context.Context, tx dbtx, g *group, finished map[string]bool, owners map[string]string, c counts) error {
	results, bodies, err := resultRows(g.job, g.batch, g.rs, finished, owners, g.refused)
	if err != nil {
		return err
	}
	wrote, err := s.returning(ctx, tx, resultsHead, nil, resultsTuple, resultsTail, results)
	if err != nil {
		return fmt.Errorf("record: results: %w", err)
	}
	if len(bodies) > 0 {
		if _, err := s.returning(ctx, tx, bodiesHead, nil, bodiesTuple, bodiesTail+` RETURNING url`, bodies); err != nil {
			return fmt.Errorf("record: bodies: %w", err)
		}
	}
	var items [][]any
	for i, r := range g.rs {
		if finished[r.URL] && r.Page != nil && wrote[r.URL] {
			g.out[i].Wrote = true
			c.recorded++
			if r.Page.Error != "" {
				c.failed++
			}
			c.render.add(&r.Page.Page)
			// The items go with the page only when the page is new to
			// the results: a page recorded again (a retried write, a
			// new holder's fetch after a hand-over) adds none.
			for _, it := range r.Items {
				items = append(items, itemRow(g.job, r.URL, it))
			}
		}
	}
	carry := carries(g.rs)
	if len(items) > 0 || carry {
		n, err := s.insertItems(ctx, tx, g.job, items)
		if err != nil {
			return fmt.Errorf("record: items: %w", err)
		}
		c.items = n
	}
	if carry {
		n, err := s.carryItems(ctx, tx, g.job, g.rs, finished, wrote)
		if err != nil {
			return err
		}
		c.items += n
	}
	return s.count(ctx, tx, g.job, g.shard, c)
}

// resultRows returns the rows of the results and bodies of the pages of rs
// finished by this commit: the results in sortResults' order, the bodies
// in URL order; owners are the owners of their body hashes found (by
// hash), refused the links refused by index in rs.
func resultRows(job, batch string, rs []jobs.Record, finished map[string]bool, owners map[string]string, refused map[int][]jobs.RefusedLink) (results, bodies [][]any, err error) {
	claimed, dups := assignClaims(rs, finished, owners)
	written := make(map[string]bool, len(rs))
	for i, r := range rs {
		if !finished[r.URL] || r.Page == nil || written[r.URL] {
			continue // finished before (a retried write), no page, or twice in rs
		}
		written[r.URL] = true
		failed := 0
		if r.Page.Error != "" {
			failed = 1
		}
		p := *r.Page // the caller's record is left as it is
		p.DuplicateOf = dups[i]
		p.LinksRefused = append(p.LinksRefused[:len(p.LinksRefused):len(p.LinksRefused)], refused[i]...)
		rec, err := json.Marshal(&p)
		if err != nil {
			return nil, nil, fmt.Errorf("record %s: %w", r.URL, err)
		}
		var claim any // NULL: none
		if h, ok := claimed[i]; ok {
			claim = h
		}
		revisit, err := revisitValues(r)
		if err != nil {
			return nil, nil, err
		}
		results = append(results, append([]any{job, r.URL, batch, failed, string(rec), claim}, revisit...))
		if r.Body != nil {
			bodies = append(bodies, []any{job, r.URL, r.Body})
		}
	}
	sortResults(results)
	slices.SortFunc(bodies, func(a, b []any) int { return strings.Compare(a[1].(string), b[1].(string)) })
	return results, bodies, nil
}

// takeNew returns the links a group commit hands to its batch: the first
// take of links (in URL order) that it added to the frontier (a link there
// before stays where it is), of the hosts it may take (takeHosts); and
// their URLs as rows for takeHead.
func takeNew(links []jobs.Entry, added, hosts map[string]bool, take int) (taken []jobs.Entry, rows [][]any) {
	for _, l := range links {
		if len(taken) < take && added[l.URL] && hosts[jobs.HostOf(l.URL)] {
			taken = append(taken, l)
			rows = append(rows, []any{l.URL})
		}
	}
	return taken, rows
}

// takeHead hands rows a group commit inserted queued to its batch: then
// batch, the hand-out's token (handout.go) and job, then the URLs
// (chunked), then ")".
const takeHead = `UPDATE baton_frontier SET state = 1, batch = ?, handout = ? WHERE job = ? AND state = 0 AND url IN (`

// takeHosts returns the hosts whose new links a group commit of rs may
// hand out to its batch (RecordTake): those of the group's own pages whose
// lease the batch holds, live. The batch keeps those leases while the
// commit runs (a Pull drops only the lease of a host the batch has no
// unfinished URL of, and the group's URLs are unfinished until it
// commits), and the URLs taken keep them after. None while the job is not
// running.
func (s *resultStore) takeHosts(ctx context.Context, tx dbtx, job, batch string, rs []jobs.Record) (map[string]bool, error) {
	query, args := s.takeHostsQuery(job, batch, rs)
	held, err := queryTx(ctx, s.core, tx, query, args, func(rows *sql.Rows) (string, error) { return scanHost(rows) })
	if err != nil {
		return nil, fmt.Errorf("record: host leases of batch %s: %w", batch, err)
	}
	return hostSet(held), nil
}

// takeHostsQuery is takeHosts' query (before s.q) and its arguments: the
// hosts of rs's pages whose lease batch holds, live, none while the job's
// control row says it is not running (in the same statement).
func (s *resultStore) takeHostsQuery(job, batch string, rs []jobs.Record) (string, []any) {
	var hosts []any
	seen := map[string]bool{}
	for _, r := range rs {
		if h := jobs.HostOf(r.URL); !seen[h] {
			seen[h] = true
			hosts = append(hosts, h)
		}
	}
	return `SELECT host FROM baton_host_leases WHERE job = ? AND holder = ? AND expires_ms > ` + s.d.nowMS +
			` AND host IN (?` + strings.Repeat(", ?", len(hosts)-1) + `)
		AND NOT EXISTS (SELECT 1 FROM baton_job_control WHERE job = ? AND state <> ?)`,
		append(append([]any{job, batch}, hosts...), job, jobs.ControlRunning)
}

// intoSet is a scan of a row of one URL that adds it to set.
func intoSet(set map[string]bool) func(scanner) error {
	return func(row scanner) error {
		var u string
		err := row.Scan(&u)
		set[u] = err == nil
		return err
	}
}

// scanHost scans a row of one host.
func scanHost(row scanner) (string, error) {
	var h string
	return h, row.Scan(&h)
}

// hostSet is hosts as a set.
func hostSet(hosts []string) map[string]bool {
	out := make(map[string]bool, len(hosts))
	for _, h := range hosts {
		out[h] = true
	}
	return out
}

// itemRow is the values of an item's row: job, url, idx, label, value.
func itemRow(job, url string, it crawler.Pushed) []any {
	value := text(string(it.Value))
	if len(it.Value) == 0 {
		value = "null"
	}
	return []any{job, url, it.Index, text(it.Label), value}
}

// insertItems inserts a group's items (rows of itemRow) in (URL, index)
// order, once per (job, URL, index), and returns how many it inserted.
// On PostgreSQL the job's items lock is taken first and held up to the
// commit, so the job's items commit in the order of their seq.
func (s *resultStore) insertItems(ctx context.Context, tx dbtx, job string, rows [][]any) (int, error) {
	slices.SortFunc(rows, func(a, b []any) int {
		if c := strings.Compare(a[1].(string), b[1].(string)); c != 0 {
			return c
		}
		return cmp.Compare(a[2].(int), b[2].(int))
	})
	if s.d.lockItems != "" {
		if _, err := tx.ExecContext(ctx, s.d.lockItems, job); err != nil {
			return 0, fmt.Errorf("lock the items of job %s: %w", job, err)
		}
	}
	const chunk = 200
	n := 0
	for len(rows) > 0 {
		k := min(chunk, len(rows))
		var b strings.Builder
		b.WriteString(`INSERT INTO baton_items (job, url, idx, label, value) VALUES `)
		args := make([]any, 0, 5*k)
		for i, r := range rows[:k] {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("(?, ?, ?, ?, ?)")
			args = append(args, r...)
		}
		b.WriteString(` ON CONFLICT (job, url, idx) DO NOTHING`)
		res, err := tx.ExecContext(ctx, s.q(b.String()), args...)
		if err != nil {
			return 0, err
		}
		added, err := res.RowsAffected()
		if err != nil {
			return 0, err
		}
		n += int(added)
		rows = rows[k:]
	}
	return n, nil
}

// carries reports whether a record of rs carries items over from a
// baseline (Record.CarryItemsFrom).
func carries(rs []jobs.Record) bool {
	for _, r := range rs {
		if r.CarryItemsFrom != "" {
			return true
		}
	}
	return false
}
