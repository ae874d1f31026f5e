package jobs

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/batoncrawl/baton/activities/crawl"
)

// batchRun is one run of a batch by a BatchRunner (BatchRunner.crawl): its
// queue of URLs, its fetches, its group commits, its pulls from the job's
// frontier and the renewals of its host leases, and the job's control
// state, all driven by one event loop (run). Only the loop's goroutine
// touches its fields; the fetches, commits and pulls run in goroutines of
// their own and answer on its channels.
type batchRun struct {
	r    *BatchRunner
	in   BatchRun
	jr   *jobRun
	auth crawl.Auth

	// ctx ends the whole run; the fetches run under fctx, which a pause or
	// cancel of the job also ends (and nothing else).
	ctx, fctx       context.Context
	cancel, abandon context.CancelFunc

	conc         int           // requests in flight at most
	grp          int           // pages a group commit lingers for
	aheadMax     int           // pages fetched and not yet committed at most
	limit        int           // the batch's size at most
	commitLinger time.Duration // how long a group commit may linger

	fetched   chan fetchedPage
	committed chan commitDone
	extended  chan pulled
	renewed   chan pulled
	halt      <-chan string

	// The batch's host leases: renewed (and sized to conc) before the
	// first fetch, with every pull, and every TTL/4 without one. A host
	// whose lease is lost (expired, taken by another batch) stops the
	// batch: what it did not fetch goes back to the frontier.
	leases    *hostLeases
	lastPull  time.Time
	renewing  bool
	renewNow  bool // leases read, not renewed (open): renew at once
	renewTick *time.Ticker

	size         int
	queue        []Entry
	pending      []Record         // fetched, waiting for the next commit
	pendingSince time.Time        // when the first of pending was fetched
	lingerC      <-chan time.Time // a held group commit's deadline
	inflight     int
	recording    int  // commits under way
	committing   int  // records in the commits under way
	extending    bool // a pull is under way
	// exhausted: the frontier had nothing for us at the last pull, and no
	// page of ours has added links since (linksGen counts the commits that
	// added some).
	exhausted bool
	linksGen  int
	plenty    bool // the last pull got all it asked for
	draining  bool // Drain said stop growing: exhausted for good

	// A start batch waits for the first links (startWait); sawQueued: the
	// last poll saw URLs queued, heldOut: pulls in a row after such a poll
	// that got none (URLs that another batch pulled first do not count: the
	// next poll sees none queued).
	starting  bool
	startBy   time.Time
	startTick <-chan time.Time
	sawQueued bool
	heldOut   int

	halted string // the job's control state once it is not running

	// The bulk carry of pages not due (carry.go): carrier is nil when the
	// batch does not carry in bulk; toCarry wait for it, carrying says one
	// is under way, carriedMost that the last carried most of its
	// entries (pullSize); carrySeq numbers the carries, leftQueued is the
	// last whose entries left (carryLeft) were queued while it wrote.
	carrier     BulkCarrier
	toCarry     []Entry
	carrying    bool
	carriedMost bool
	carrySeq    int
	leftQueued  int
	carried     chan carryDone
	carryLeft   chan carryLeft

	// The bulk recording of pages answered 304 (notmodified.go): nm is
	// nil when the batch records them page by page; nmPending wait for
	// the next recording (since nmSince, held until nmLingerC at most),
	// nmRecording are the pages of the one under way.
	nm          NotModifiedRecorder
	nmPending   []Record
	nmSince     time.Time
	nmLingerC   <-chan time.Time
	nmRecording int
	nmDone      chan notModifiedDone

	ran    int
	fenced string
	err    error
}

type fetchedPage struct {
	rec Record
	err error
}

type commitDone struct {
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
	jr, doneWARC, err := withWARC(jr, r.Limits, in.Log)
	if err != nil {
		return 0, "", err
	}
	defer doneWARC() // after the batch's fetches end (b.close)
	b := r.newBatchRun(ctx, in, jr, todo, size)
	defer b.close()
	if b.open(early) {
		b.run()
	}
	return b.result()
}

func (r *BatchRunner) newBatchRun(ctx context.Context, in BatchRun, jr *jobRun, todo []Entry, size int) *batchRun {
	conc := r.concurrency()
	b := &batchRun{
		r: r, in: in, jr: jr, auth: jr.auth(),
		conc: conc, grp: commitGroup(conc), aheadMax: max(2*conc, commitGroup(conc)+conc),
		limit: max(jr.spec.BatchSize, size), commitLinger: r.CommitLinger,
		fetched: make(chan fetchedPage, conc), committed: make(chan commitDone, maxCommits),
		extended: make(chan pulled, 1), renewed: make(chan pulled, 1),
		leases: &hostLeases{}, size: size,
		starting: size == 0 && len(todo) == 0, startBy: time.Now().Add(startWait),
		carried: make(chan carryDone, 1), carryLeft: make(chan carryLeft, 1), nmDone: make(chan notModifiedDone, 1),
	}
	if bc, ok := r.bulkCarries(jr); ok {
		b.carrier = bc
	}
	if nm, ok := r.bulkNotModified(jr); ok {
		b.nm = nm
	}
	b.enqueue(todo)
	if b.commitLinger <= 0 {
		b.commitLinger = DefaultCommitLinger
	}
	if jr.spec.BatchSize == 0 {
		b.limit = math.MaxInt // the lease lasts while the frontier has work
	}
	b.ctx, b.cancel = context.WithCancel(ctx)
	b.fctx, b.abandon = context.WithCancel(b.ctx)
	return b
}

// open takes the batch's first renewal of its host leases (early, or a
// pull made here), starts the control polling and the renewal ticker, and
// checks the leases of the URLs handed over. It says whether to run.
func (b *batchRun) open(early *renewal) bool {
	if early == nil { // not renewed as the batch was opened (open)
		p, err := b.r.Store.Pull(b.ctx, b.in.Job, b.in.Batch, b.in.Epoch, 0, b.conc)
		switch {
		case errors.Is(err, ErrStale):
			b.fenced = err.Error()
			return false
		case err != nil:
			b.err = err
			return false
		}
		early = &renewal{p: p, at: time.Now()}
	}
	b.leases.set(early.p, early.at)
	b.lastPull = early.at
	// Leases read, not renewed (open): renewed at once, by the first pull
	// when the batch pulls at once.
	b.renewNow = early.read
	b.renewTick = time.NewTicker(b.leases.renewEvery())
	b.halt = b.r.watchControl(b.ctx, b.in.Job)
	b.checkLeases(pulled{p: early.p, at: b.lastPull}) // a hand-over's URLs of a host lost meanwhile
	return true
}

// close ends what the run started: its fetches, pulls, control polling
// and ticker.
func (b *batchRun) close() {
	if b.renewTick != nil {
		b.renewTick.Stop()
	}
	b.abandon()
	b.cancel()
}

// result is what crawl returns once the loop has ended.
func (b *batchRun) result() (ran int, fenced string, err error) {
	if b.fenced == "" && b.err == nil && b.ctx.Err() != nil {
		b.err = b.ctx.Err()
	}
	return b.ran, b.fenced, b.err
}

// stopping says whether the store refused the batch or an error stopped it.
func (b *batchRun) stopping() bool { return b.fenced != "" || b.err != nil }

// stop ends the run at the first refusal (fenced) or error.
func (b *batchRun) stop(e error) {
	if b.stopping() {
		return
	}
	if errors.Is(e, ErrStale) {
		b.fenced = e.Error()
	} else {
		b.err = e
	}
	b.cancel()
}

// stopFetching abandons the fetches once the job is not running (state)
// or the batch lost a host: what was fetched is committed, the rest goes
// back to the frontier.
func (b *batchRun) stopFetching(state string, why string) {
	if b.halted != "" {
		return
	}
	b.halted = state
	b.abandon()
	b.in.Log.Info("batch stops fetching ("+state+"): the URLs not fetched go back to the frontier", "why", why, "ran", b.ran,
		"in_flight", b.inflight, "to_commit", len(b.pending)+b.committing, "not_fetched", len(b.queue))
}

// checkLeases takes the host leases a pull answered with.
func (b *batchRun) checkLeases(p pulled) {
	every := b.leases.renewEvery()
	b.leases.set(p.p, p.at)
	b.lastPull = p.at
	if e := b.leases.renewEvery(); e != every {
		b.renewTick.Reset(e) // the job's TTL, as the store answers it
	}
	if h := b.leases.lost(b.queue); h != "" {
		b.stopFetching("host lease lost", "the batch no longer holds host "+h+" (its lease expired and another batch took it)")
	}
}
