package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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
// PostgreSQL more CPU for no throughput: BenchmarkPostgresCrawl,
// docs/benchmarks.md).
const maxCommits = 1

// DefaultCommitLinger is how long a group commit of a batch that has a
// round of URLs queued of its own, or whose frontier has plenty, waits for
// commitGroup(conc) pages after the first of them (BatchRunner.crawl):
// fewer, larger transactions at the same pages/s (BenchmarkPostgresCrawl,
// docs/benchmarks.md).
const DefaultCommitLinger = 40 * time.Millisecond

// commitGroup is the group a commit lingers for: a round of the batch's
// slots, or up to two for minCommitGroup pages (fewer transactions).
func commitGroup(conc int) int { return max(2, conc, min(2*conc, minCommitGroup)) }

const minCommitGroup = 16

// minPull is the fewest URLs a Runner asks the frontier for at a time:
// three rounds of 8 slots, which starts a cluster of few slots per Runner
// fastest on a cross-linked site (BenchmarkPostgresCrawl,
// docs/benchmarks.md).
const minPull = 24

// pullWant is how many URLs the batch's next pull asks for: at least
// minPull, so a Runner with few slots does not pay a hand-out (the job's
// lock, its leases, a transaction) per few pages, and twice that while
// its pulls get all they ask for (a frontier with plenty queued: half the
// hand-outs); a short queue, as at a crawl's start and end, is shared in
// pulls of minPull.
func (b *batchRun) pullWant() int {
	n := max(b.conc, minPull)
	if b.plenty && !b.draining {
		n *= 2
	}
	return n
}

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
	// Clock is the time the adaptive schedule (Spec.Adaptive) reads: when
	// a page is due, and its next fetch time. Nil: time.Now. A benchmark
	// of a daily schedule sets a calendar of its own.
	Clock func() time.Time
	// NoBulkCarry records the pages not due of an adaptive run page by page
	// (fetch's carried) even on a store that carries them in bulk
	// (BulkCarrier): the reference a test compares the bulk carry with.
	NoBulkCarry bool
	// NoBulkNotModified records the pages answered 304 page by page, in
	// the group commits, even on a store that records them in bulk
	// (NotModifiedRecorder): the reference a test compares the bulk
	// recording with.
	NoBulkNotModified bool

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

// now is the Clock's time.
func (r *BatchRunner) now() time.Time {
	if r.Clock != nil {
		return r.Clock()
	}
	return time.Now()
}
