package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/batoncrawl/baton/activities"
	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/telemetry"
	"github.com/batoncrawl/baton/roles"
)

// PageFetcher fetches one page of a crawl job; *crawl.Engine implements
// it (safe for concurrent use, with per-domain delay, parallelism,
// robots.txt and retries across all callers).
type PageFetcher interface {
	Fetch(ctx context.Context, req roles.Request, auth crawl.Auth, depth int, opts crawl.Options) crawl.Page
}

// DefaultConcurrency is how many requests a Runner keeps in flight.
const DefaultConcurrency = 16

// BatchRunner runs crawl-job batches for a Runner (activities.BatchRunner)
// on the job store: up to Concurrency URLs of a batch are fetched at once
// (the job's per-domain parallelism and delay, robots.txt Crawl-delay and
// Retry-After still apply, in the fetcher), and each page is recorded as
// it finishes, in any order, exactly once: the store's Record is one
// transaction checked against the batch's epoch. After a hand-over the new
// holder runs only what is unfinished; a page that was in flight when its
// Runner died is fetched again but recorded once. Nothing per URL is kept
// in memory beyond the batch at hand. Safe for concurrent use.
type BatchRunner struct {
	Store   Store
	Pages   PageFetcher
	Metrics *telemetry.Metrics
	// Concurrency is the most requests in flight per batch (the worker's
	// --concurrency); 0 means DefaultConcurrency.
	Concurrency int

	specs sync.Map // job → Spec (immutable; read once per worker)
}

var _ activities.BatchRunner = (*BatchRunner)(nil)

// Claim raises the batch's epoch in the store to epoch, for holder.
func (r *BatchRunner) Claim(ctx context.Context, job, batch, holder string, epoch int64) error {
	_, err := r.Store.Claim(ctx, job, batch, holder, epoch)
	if errors.Is(err, ErrStale) || errors.Is(err, ErrNoBatch) {
		return nil // the runner finds out when it runs the batch
	}
	return err
}

func (r *BatchRunner) spec(ctx context.Context, job string) (Spec, error) {
	if v, ok := r.specs.Load(job); ok {
		return v.(Spec), nil
	}
	s, err := r.Store.Spec(ctx, job)
	if err != nil {
		return s, err
	}
	r.specs.Store(job, s)
	return s, nil
}

// RunBatch crawls the unfinished URLs of a batch (see BatchRunner).
func (r *BatchRunner) RunBatch(ctx context.Context, in activities.BatchRun) (activities.BatchOutcome, error) {
	log := in.Log
	if log == nil {
		log = slog.Default()
	}
	spec, err := r.spec(ctx, in.Job)
	if err != nil {
		if errors.Is(err, ErrNoJob) || !isTransient(ctx, err) {
			reason := fmt.Sprintf("job %s: its spec cannot be read from %s: %v", in.Job, r.Store.Identity(), err)
			if ferr := r.Store.FailBatch(ctx, in.Job, in.Batch, in.Epoch, reason); ferr != nil && !errors.Is(ferr, ErrNoBatch) && !errors.Is(ferr, ErrStale) {
				return activities.BatchOutcome{}, ferr
			}
			return activities.BatchOutcome{Failed: reason}, nil
		}
		return activities.BatchOutcome{}, err
	}
	info, err := r.Store.Claim(ctx, in.Job, in.Batch, in.Runner, in.Epoch)
	switch {
	case errors.Is(err, ErrStale):
		return activities.BatchOutcome{Fenced: true, Reason: err.Error()}, nil
	case errors.Is(err, ErrNoBatch):
		return activities.BatchOutcome{Failed: fmt.Sprintf("job %s batch %s is not in %s", in.Job, in.Batch, r.Store.Identity())}, nil
	case err != nil:
		return activities.BatchOutcome{}, err
	}
	if info.State != BatchRunning {
		// Finished, re-queued or failed while its Task waited: nothing to
		// run here.
		log.Info("batch no longer running", "state", info.State)
		return activities.BatchOutcome{}, nil
	}
	entries, err := r.Store.Entries(ctx, in.Job, in.Batch)
	if err != nil {
		return activities.BatchOutcome{}, err
	}
	var todo []Entry
	for _, e := range entries {
		if !e.Done {
			todo = append(todo, e.Entry)
		}
	}
	ran, fenced, err := r.crawl(ctx, in, spec, todo)
	if err != nil {
		return activities.BatchOutcome{Ran: ran}, err
	}
	if fenced != "" {
		return activities.BatchOutcome{Fenced: true, Reason: fenced, Ran: ran}, nil
	}
	fin, err := r.Store.FinishBatch(ctx, in.Job, in.Batch, in.Epoch)
	if errors.Is(err, ErrStale) {
		return activities.BatchOutcome{Fenced: true, Reason: err.Error(), Ran: ran}, nil
	}
	if err != nil {
		return activities.BatchOutcome{Ran: ran}, err
	}
	return activities.BatchOutcome{Success: fin.Success, Fail: fin.Failed, Ran: ran}, nil
}

// crawl fetches and records todo with up to Concurrency requests in
// flight. It stops at the first refusal by the store (fenced says why) or
// error.
func (r *BatchRunner) crawl(ctx context.Context, in activities.BatchRun, spec Spec, todo []Entry) (ran int, fenced string, err error) {
	conc := r.Concurrency
	if conc <= 0 {
		conc = DefaultConcurrency
	}
	conc = min(conc, len(todo))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu       sync.Mutex
		firstErr error
	)
	fail := func(e error, stale bool) {
		mu.Lock()
		defer mu.Unlock()
		if firstErr == nil && fenced == "" {
			if stale {
				fenced = e.Error()
			} else {
				firstErr = e
			}
		}
		cancel()
	}
	work := make(chan Entry)
	var wg sync.WaitGroup
	auth := crawl.Auth{Cookie: spec.Cookie, Authorization: spec.Authorization}
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for e := range work {
				if err := r.one(ctx, in, spec, auth, e); err != nil {
					if ctx.Err() != nil && !errors.Is(err, ErrStale) {
						return
					}
					fail(err, errors.Is(err, ErrStale))
					return
				}
				mu.Lock()
				ran++
				mu.Unlock()
			}
		}()
	}
feed:
	for _, e := range todo {
		select {
		case work <- e:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if firstErr == nil && fenced == "" && ctx.Err() != nil {
		firstErr = ctx.Err()
	}
	return ran, fenced, firstErr
}

// one fetches one URL and records it.
func (r *BatchRunner) one(ctx context.Context, in activities.BatchRun, spec Spec, auth crawl.Auth, e Entry) error {
	req := roles.Request{URL: e.URL, Method: "GET", Depth: e.Depth}
	page := r.Pages.Fetch(ctx, req, auth, e.Depth, spec.Options)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	rec := Record{Job: in.Job, Batch: in.Batch, Runner: in.Runner, Epoch: in.Epoch, URL: e.URL}
	if page.Disallowed {
		// Refused by robots.txt: not fetched, so not a page of the results.
		r.Metrics.PageError()
	} else {
		r.Metrics.Page(page.StatusCode, page.Error != "", page.Bytes, time.Duration(page.DurationMS)*time.Millisecond)
		pr := PageRecord{Page: page, Job: in.Job, Batch: in.Batch, Runner: in.Runner, Epoch: in.Epoch}
		if pr.URL == "" {
			pr.URL = e.URL
		}
		rec.Page = &pr
		rec.Links = make([]Entry, 0, len(page.Links))
		for _, l := range page.Links {
			rec.Links = append(rec.Links, Entry{URL: l, Depth: e.Depth + 1})
		}
	}
	_, err := r.Store.Record(ctx, rec)
	return err
}

// isTransient: worth retrying (the activity is retried by Temporal).
func isTransient(ctx context.Context, err error) bool {
	return ctx.Err() != nil || !errors.Is(err, ErrNoJob) && !errors.Is(err, ErrBadSpec)
}
