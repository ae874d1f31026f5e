package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/crawler"
	"github.com/batoncrawl/baton/activities/telemetry"
)

// DefaultConcurrency is how many requests a Runner keeps in flight.
const DefaultConcurrency = 16

// DefaultControlPoll is how often a Runner reads the control state of the
// job whose batch it runs: a pause or cancel stops its fetching within it.
const DefaultControlPoll = 200 * time.Millisecond

// maxCommits is how many group commits of one batch may be under way at
// once. One: the pages that finish while it runs go into the next, so the
// groups are larger and the transactions fewer (two side by side cost
// PostgreSQL a sixth more CPU, BenchmarkPostgresCrawl, for no throughput).
const maxCommits = 1

// DefaultCommitLinger is how long a group commit of a batch that has a
// round of URLs queued of its own, or whose frontier has plenty, waits for
// commitGroup(conc) pages after the first of them (BatchRunner.crawl):
// fewer, larger transactions at the same pages/s (BenchmarkPostgresCrawl,
// README: PostgreSQL against bare Colly).
const DefaultCommitLinger = 40 * time.Millisecond

// commitGroup is the group a commit lingers for: a round of the batch's
// slots, or up to two for minCommitGroup pages (fewer transactions).
func commitGroup(conc int) int { return max(2, conc, min(2*conc, minCommitGroup)) }

const minCommitGroup = 16

// minPull is the fewest URLs a Runner asks the frontier for at a time:
// three rounds of 8 slots. With 3 Runners × 8 on a cross-linked site
// (BenchmarkPostgresCrawl, 3 runs each) the first 500 pages took 603–607 ms
// with 24, 617–641 ms with 16, 621–634 ms with one round (8).
const minPull = 24

// A start batch (handed out empty to an idle Runner at a job's start,
// SupervisorStore.OpenBatch) waits up to startWait for the first links of
// the other batches' pages, reading the job's counters every startPoll,
// and pulls them itself as soon as they are queued: the Runners of a
// cluster start crawling as one does with all their slots, instead of
// each waiting for the job's next hand-out (an await, an assignment and a
// Task write, tens of milliseconds) once the first pages are recorded.
// It stops waiting as soon as no batch of the job holds URLs (nothing
// will queue links: a one-page job is not held up), when the job is
// paused, cancelled or the worker leaves, and after startHeldOut pulls in
// a row that found URLs queued but none it may take (their hosts held by
// other batches: the job's politeness).
const (
	startWait    = time.Second
	startPoll    = 5 * time.Millisecond
	startHeldOut = 3
)

// BatchRunner runs crawl-job batches for a Runner on the job store (it is
// the Batches of cluster.Deps): up to Concurrency URLs of a batch are
// fetched at once (the job's per-domain parallelism and delay, robots.txt
// Crawl-delay and Retry-After still apply, in the fetcher, for the whole
// job: the batch holds its hosts' leases in the store, RunnerStore.Pull,
// and fetches each host within its share; the job's robots.txt files are
// kept in the store), and each page
// is recorded soon after it finishes, in any order, exactly once: pages
// are recorded in group commits, the store's RecordAll writing the pages
// that finished meanwhile, with their items and links, in one transaction
// checked against the batch's epoch. After a hand-over the new
// holder runs only what is unfinished; a page that was in flight when its
// Runner died is fetched again but recorded once. Nothing per URL is kept
// in memory beyond the batch at hand. Safe for concurrent use.
type BatchRunner struct {
	Store   RunnerStore
	Pages   crawl.Fetcher
	Metrics *telemetry.Metrics
	// Concurrency is the most requests in flight per batch (the worker's
	// --concurrency); 0 means DefaultConcurrency.
	Concurrency int
	// Sealer opens the jobs' secrets (the group's secrets key); nil: a job
	// with secrets cannot run here.
	Sealer *Sealer
	// ControlPoll is how often the job's control state is read while a
	// batch runs; 0 means DefaultControlPoll.
	ControlPoll time.Duration
	// CommitLinger is how long a group commit may wait for a fuller group
	// while its batch has a round of URLs of its own queued; 0 means
	// DefaultCommitLinger.
	CommitLinger time.Duration

	// Crawlers are the user crawlers this worker carries, by name (the
	// built-in one is not among them); set before the first batch.
	Crawlers map[string]*crawler.Crawler

	// Limits are this worker's operator limits (its --max-job-* flags and
	// --bodies-root): a job above them fails its batches, saying why,
	// before anything is fetched. Zero: none.
	Limits Limits

	specs sync.Map // job → *jobRun (immutable; read once per worker)
}

var _ Batches = (*BatchRunner)(nil)

// Claim raises the batch's epoch in the store to epoch, for holder.
func (r *BatchRunner) Claim(ctx context.Context, job, batch, holder string, epoch int64) error {
	_, err := r.Store.Claim(ctx, job, batch, holder, epoch)
	if errors.Is(err, ErrStale) || errors.Is(err, ErrNoBatch) {
		return nil // the runner finds out when it runs the batch
	}
	return err
}

// RunBatch crawls the unfinished URLs of a batch (see BatchRunner).
func (r *BatchRunner) RunBatch(ctx context.Context, in BatchRun) (BatchOutcome, error) {
	log := in.Log
	if log == nil {
		log = slog.Default()
	}
	in.Log = log
	o := r.open(ctx, in)
	jr, err := o.jr, o.jerr
	if errors.Is(err, ErrNoCrawler) {
		return r.giveBack(ctx, in, err)
	}
	if err != nil {
		if ctx.Err() == nil && (errors.Is(err, ErrNoJob) || errors.Is(err, ErrBadSpec)) {
			reason := fmt.Sprintf("job %s: its spec cannot be read from %s: %v", in.Job, r.Store.Identity(), err)
			if errors.Is(err, ErrOverLimit) {
				reason = fmt.Sprintf("job %s: refused by the operator limits of %s: %v", in.Job, in.Runner, err)
			}
			if ferr := r.Store.FailBatch(ctx, in.Job, in.Batch, in.Epoch, reason); ferr != nil && !errors.Is(ferr, ErrNoBatch) && !errors.Is(ferr, ErrStale) {
				return BatchOutcome{}, ferr
			}
			return BatchOutcome{Failed: reason}, nil
		}
		return BatchOutcome{}, err
	}
	info, err := o.info, o.herr
	switch {
	case errors.Is(err, ErrStale):
		return BatchOutcome{Fenced: true, Reason: err.Error()}, nil
	case errors.Is(err, ErrNoBatch):
		return BatchOutcome{Failed: fmt.Sprintf("job %s batch %s is not in %s", in.Job, in.Batch, r.Store.Identity())}, nil
	case err != nil:
		return BatchOutcome{}, err
	}
	if info.State != BatchRunning {
		// Finished, re-queued or failed while its Task waited: nothing to
		// run here.
		log.Info("batch no longer running", "state", info.State)
		return BatchOutcome{}, nil
	}
	if o.uerr != nil {
		return BatchOutcome{}, o.uerr
	}
	ran, fenced, err := r.crawl(ctx, in, jr, o.todo, info.Size, o.first)
	if err != nil {
		return BatchOutcome{Ran: ran}, err
	}
	if fenced != "" {
		return BatchOutcome{Fenced: true, Reason: fenced, Ran: ran}, nil
	}
	fin, err := r.Store.FinishBatch(ctx, in.Job, in.Batch, in.Epoch)
	if errors.Is(err, ErrStale) {
		return BatchOutcome{Fenced: true, Reason: err.Error(), Ran: ran}, nil
	}
	if err != nil {
		return BatchOutcome{Ran: ran}, err
	}
	return BatchOutcome{Success: fin.Success, Fail: fin.Failed, Ran: ran}, nil
}

// giveBack ends a batch this worker cannot run because it does not carry
// its job's crawler (the job's assignment gives batches only to Runners
// that do; this is the guard): its URLs go back to the frontier for a
// Runner that carries it, and the batch ends.
func (r *BatchRunner) giveBack(ctx context.Context, in BatchRun, why error) (BatchOutcome, error) {
	info, _, err := r.holding(ctx, in)
	switch {
	case errors.Is(err, ErrStale):
		return BatchOutcome{Fenced: true, Reason: err.Error()}, nil
	case errors.Is(err, ErrNoBatch):
		return BatchOutcome{}, nil
	case err != nil:
		return BatchOutcome{}, err
	}
	if info.State != BatchRunning {
		return BatchOutcome{}, nil
	}
	n, err := r.Store.Release(ctx, in.Job, in.Batch, in.Epoch)
	if err != nil {
		return BatchOutcome{}, err
	}
	in.Log.Warn("batch given back: this worker does not carry the job's crawler", "why", why.Error(), "released", n)
	if _, err := r.Store.FinishBatch(ctx, in.Job, in.Batch, in.Epoch); err != nil && !errors.Is(err, ErrStale) {
		return BatchOutcome{}, err
	}
	return BatchOutcome{}, nil
}

// holding returns the batch's row once in.Runner holds it at in.Epoch.
// The job's assignment and a hand-over claim the batch in the store
// before they write the Task that names it, so the row normally says so
// already and is only read; it is claimed here only when it does not
// (ErrStale when a higher epoch holds it); claimed says whether it was.
func (r *BatchRunner) holding(ctx context.Context, in BatchRun) (info BatchInfo, claimed bool, err error) {
	bs, err := r.Store.Batches(ctx, in.Job, []string{in.Batch})
	if err != nil {
		return BatchInfo{}, false, err
	}
	if len(bs) == 0 {
		return BatchInfo{}, false, ErrNoBatch
	}
	if bs[0].Epoch == in.Epoch && bs[0].Holder == in.Runner {
		return bs[0], false, nil
	}
	info, err = r.Store.Claim(ctx, in.Job, in.Batch, in.Runner, in.Epoch)
	return info, true, err
}

// crawl fetches todo with up to Concurrency requests in flight and
// records the pages as they come, in group commits (one transaction for
// the pages that finished while the previous commit ran). It pulls more
// URLs from the job's frontier into the batch (Store.Extend) as the queue
// runs low, so the Runner never idles while the frontier has work: the
// batch grows until the frontier is empty with nothing of ours in flight,
// or until it holds the job's batch size when one is set (then the job
// hands out the next one).
// It stops at the first refusal by the store (fenced says why) or error;
// pages fetched but not yet committed then are not recorded (the next
// holder fetches them again).
//
// While it runs, it reads the job's control state every ControlPoll (and
// Extend refuses to hand out URLs of a job that is not running). Once the
// job is paused or cancelled it starts no fetch, abandons the fetches in
// flight (a request waiting for its domain's turn or a retry must not
// start after the pause), commits the pages fetched, gives the URLs it did
// not fetch back to the frontier (Store.Release) and returns, so that the
// batch ends as done and the job sees it end. early is the batch's first
// renewal of its host leases when open made it (nil: crawl makes it).
func (r *BatchRunner) crawl(ctx context.Context, in BatchRun, jr *jobRun, todo []Entry, size int, early *renewal) (ran int, fenced string, err error) {
	spec := jr.spec
	conc := r.concurrency()
	commitLinger := r.CommitLinger
	if commitLinger <= 0 {
		commitLinger = DefaultCommitLinger
	}
	grp, aheadMax := commitGroup(conc), max(2*conc, commitGroup(conc)+conc) // pages fetched, not committed
	limit := max(spec.BatchSize, size)
	if spec.BatchSize == 0 {
		limit = math.MaxInt // the lease lasts while the frontier has work
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The fetches run under fctx: a pause or cancel of the job ends them
	// (and nothing else).
	fctx, abandon := context.WithCancel(ctx)
	defer abandon()
	auth := jr.auth()
	type fetchedPage struct {
		rec Record
		err error
	}
	type commit struct {
		n, added int
		taken    []Entry // links handed to the batch with the commit
		err      error
	}
	type pulled struct {
		p   Pulled
		at  time.Time // when it answered
		gen int       // linksGen when the pull started
		n   int       // URLs it asked for
		err error
	}
	fetched := make(chan fetchedPage, conc)
	committed := make(chan commit, maxCommits)
	extended := make(chan pulled, 1)
	renewed := make(chan pulled, 1)
	// The batch's host leases: renewed (and sized to conc) before the
	// first fetch, with every pull, and every TTL/4 without one. A host
	// whose lease is lost (expired, taken by another batch) stops the
	// batch: what it did not fetch goes back to the frontier.
	leases := &hostLeases{}
	if early == nil { // not renewed as the batch was opened (open)
		p, err := r.Store.Pull(ctx, in.Job, in.Batch, in.Epoch, 0, conc)
		switch {
		case errors.Is(err, ErrStale):
			return 0, err.Error(), nil
		case err != nil:
			return 0, "", err
		}
		early = &renewal{p: p, at: time.Now()}
	}
	first := early.p
	leases.set(first, early.at)
	lastPull, renewing := early.at, false
	renew := func() {
		renewing = true
		go func() {
			p, err := r.Store.Pull(ctx, in.Job, in.Batch, in.Epoch, 0, conc)
			renewed <- pulled{p: p, at: time.Now(), err: err}
		}()
	}
	// Leases read, not renewed (open): renewed at once, by the first pull
	// when the batch pulls at once.
	renewNow := early.read
	renewTick := time.NewTicker(leases.renewEvery())
	defer renewTick.Stop()
	queue := todo
	var pending []Record         // fetched, waiting for the next commit
	var pendingSince time.Time   // when the first of pending was fetched
	var lingerC <-chan time.Time // a held group commit's deadline
	inflight, recording, extending := 0, 0, false
	committing := 0 // records in the commits under way
	// exhausted: the frontier had nothing for us at the last pull, and no
	// page of ours has added links since (linksGen counts the commits that
	// added some).
	exhausted, linksGen := false, 0
	plenty := false // the last pull got all it asked for
	// A start batch waits for the first links (startWait); sawQueued: the
	// last poll saw URLs queued, heldOut: pulls in a row after such a poll
	// that got none (URLs that another batch pulled first do not count: the
	// next poll sees none queued).
	starting := size == 0 && len(todo) == 0
	startBy := time.Now().Add(startWait)
	var startTick <-chan time.Time
	sawQueued, heldOut := false, 0
	draining := false // Drain said stop growing: exhausted for good
	halt := r.watchControl(ctx, in.Job)
	halted := "" // the job's control state once it is not running
	stopFetching := func(state string, why string) {
		if halted != "" {
			return
		}
		halted = state
		abandon()
		in.Log.Info("batch stops fetching ("+state+"): the URLs not fetched go back to the frontier", "why", why, "ran", ran,
			"in_flight", inflight, "to_commit", len(pending)+committing, "not_fetched", len(queue))
	}
	checkLeases := func(p pulled) {
		every := leases.renewEvery()
		leases.set(p.p, p.at)
		lastPull = p.at
		if e := leases.renewEvery(); e != every {
			renewTick.Reset(e) // the job's TTL, as the store answers it
		}
		if h := leases.lost(queue); h != "" {
			stopFetching("host lease lost", "the batch no longer holds host "+h+" (its lease expired and another batch took it)")
		}
	}
	stop := func(e error) {
		if fenced != "" || err != nil {
			return
		}
		if errors.Is(e, ErrStale) {
			fenced = e.Error()
		} else {
			err = e
		}
		cancel()
	}
	checkLeases(pulled{p: first, at: lastPull}) // a hand-over's URLs of a host lost meanwhile
	for {
		stopping := fenced != "" || err != nil
		// Pull, commit and fetch all run at once: none waits for another.
		if !stopping && halted == "" && !extending && !exhausted && size < limit && len(queue) <= conc/2 && in.Drain != nil && in.Drain() {
			// Scaled down or leaving: no more pulls, finish what we hold.
			exhausted, draining = true, true
			in.Log.Info("batch draining: no more URLs pulled", "ran", ran, "held", len(queue)+inflight+len(pending)+committing)
		}
		if !stopping && halted == "" && !extending && !renewing && !exhausted && size < limit && len(queue) <= conc/2 {
			extending = true
			// At least minPull a pull: a Runner with few slots does not
			// pay a hand-out (the job's lock, its leases) per few pages.
			n, gen := min(max(conc, minPull), limit-size), linksGen
			go func() {
				p, err := r.Store.Pull(ctx, in.Job, in.Batch, in.Epoch, n, conc)
				extended <- pulled{p: p, at: time.Now(), gen: gen, n: n, err: err}
			}()
			renewNow = false
		}
		if renewNow && !stopping && !renewing && !extending {
			renewNow = false
			renew()
		}
		// Fetching runs ahead of the commits by a group and a round at most.
		for !stopping && halted == "" && inflight < conc && len(queue) > 0 && len(pending)+committing < aheadMax {
			e := queue[0]
			queue = queue[1:]
			inflight++
			go func() {
				rec, err := r.fetch(fctx, in, jr, auth, e, leases)
				fetched <- fetchedPage{rec, err}
			}()
		}
		// While the batch has a round of URLs queued of its own, or its
		// last pull got all it asked for (its pulls refill its queue), a
		// group commit waits for a fuller group (commitGroup), at most
		// commitLinger: fewer, larger transactions leave the database's
		// CPU to the crawl. A batch whose URLs run short commits at once.
		ahead := len(queue) >= conc || plenty && !draining && size < limit
		hold := halted == "" && ahead && len(pending) < grp && time.Since(pendingSince) < commitLinger
		if !stopping && recording < maxCommits && len(pending) > 0 && hold && lingerC == nil {
			lingerC = time.After(commitLinger - time.Since(pendingSince))
		}
		if !stopping && recording < maxCommits && len(pending) > 0 && !hold {
			group, rest := commitSplit(pending, r.Limits.commitBytes())
			pending = rest
			recording++
			committing += len(group)
			// Slots that nothing queued will fill take the group's own new
			// links with the commit (a crawl's first waves).
			take := 0
			if halted == "" && !draining && size < limit {
				take = min(max(0, conc-inflight-len(queue)), limit-size)
			}
			go func() {
				got, taken, err := r.Store.RecordTake(ctx, group, take)
				c := commit{n: len(group), taken: taken, err: err}
				for _, g := range got {
					c.added += g.Added
				}
				committed <- c
			}()
		}
		if inflight == 0 && recording == 0 && !extending && (len(pending) == 0 || stopping) {
			if !stopping && halted != "" {
				// Everything fetched is committed: what is left unfinished
				// in the batch was not fetched.
				n, rerr := r.Store.Release(ctx, in.Job, in.Batch, in.Epoch)
				if rerr != nil {
					stop(rerr)
				} else {
					in.Log.Info("batch stopped ("+halted+"): URLs not fetched given back to the frontier", "released", n, "ran", ran)
				}
				break
			}
			pullable := !stopping && len(queue) == 0 && !exhausted && size < limit
			if pullable && !renewing {
				continue // pull again: the frontier may have grown
			}
			// (pullable while a renewal of the leases is under way: the
			// pull starts once it has answered, select.)
			if !pullable {
				if stopping || !starting || size > 0 || draining || heldOut >= startHeldOut || !time.Now().Before(startBy) {
					break
				}
				if startTick == nil {
					startTick = time.After(startPoll) // a start batch: wait for the first links
				}
			}
		}
		select {
		case <-startTick:
			startTick = nil
			st, serr := r.Store.Stats(ctx, in.Job)
			switch {
			case serr != nil:
				in.Log.Warn("start batch: job counters not read: it stops waiting for links", "err", serr)
				starting = false
			case in.Drain != nil && in.Drain():
				starting = false
			case st.Queued > 0:
				exhausted, sawQueued = false, true // pull them
			default:
				heldOut = 0 // the URLs seen went to other batches: not held from us
				n, aerr := r.Store.ActiveBatches(ctx, in.Job)
				if aerr != nil {
					in.Log.Warn("start batch: active batches not read: it stops waiting for links", "err", aerr)
				}
				starting = aerr == nil && n > 0 // no batch holds URLs: none will come
			}
		case state := <-halt:
			stopFetching("job "+state, "control state")
		case <-renewTick.C:
			if since := time.Since(lastPull); since >= 4*leases.renewEvery() {
				// Not renewed for a lease's TTL (the store unreachable):
				// another batch may hold our hosts by now.
				stopFetching("host leases not renewed", fmt.Sprintf("no renewal for %v", since.Round(time.Millisecond)))
			}
			if !stopping && !renewing && !extending && time.Since(lastPull) >= leases.renewEvery() {
				renew()
			}
		case p := <-renewed:
			renewing = false
			switch {
			case errors.Is(p.err, ErrStale):
				stop(p.err)
			case p.err != nil:
				// Tried again at the next tick; the lease lasts TTL.
				in.Log.Warn("host leases not renewed", "err", p.err)
			case !stopping:
				checkLeases(p)
			}
		case <-lingerC:
			lingerC = nil
		case f := <-fetched:
			inflight--
			switch {
			case f.err != nil:
				if ctx.Err() == nil && fctx.Err() == nil {
					stop(f.err)
				}
				// Abandoned (paused or cancelled): its URL is released.
			case !stopping:
				if len(pending) == 0 {
					pendingSince = time.Now()
				}
				pending = append(pending, f.rec)
			}
		case c := <-committed:
			recording--
			committing -= c.n
			switch {
			case c.err != nil:
				if ctx.Err() == nil || errors.Is(c.err, ErrStale) {
					stop(c.err)
				}
			default:
				ran += c.n
				if len(c.taken) > 0 {
					size += len(c.taken)
					queue = append(queue, c.taken...)
				}
				if c.added > 0 && !draining {
					exhausted = false
					linksGen++
				}
			}
		case p := <-extended:
			extending = false
			switch {
			case errors.Is(p.err, ErrHalted):
				state := ControlPaused
				if s, cerr := r.Store.Control(ctx, in.Job); cerr == nil && s != ControlRunning {
					state = s
				}
				stopFetching("job "+state, p.err.Error())
			case p.err != nil:
				if ctx.Err() == nil || errors.Is(p.err, ErrStale) {
					stop(p.err)
				}
			case len(p.p.Entries) == 0:
				plenty = false
				checkLeases(p)
				exhausted = p.gen == linksGen
				if sawQueued {
					heldOut++
				}
				sawQueued = false
			default:
				size += len(p.p.Entries)
				queue = append(queue, p.p.Entries...)
				plenty = len(p.p.Entries) >= p.n
				checkLeases(p)
			}
		}
	}
	if fenced == "" && err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	return ran, fenced, err
}

// watchControl reads the job's control state at once and then every
// ControlPoll until ctx ends, and sends it on the channel returned when it
// is not running (once). A failed read is tried again at the next tick.
func (r *BatchRunner) watchControl(ctx context.Context, job string) <-chan string {
	every := r.ControlPoll
	if every <= 0 {
		every = DefaultControlPoll
	}
	ch := make(chan string, 1)
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			if state, err := r.Store.Control(ctx, job); err == nil && state != ControlRunning {
				ch <- state
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return ch
}
