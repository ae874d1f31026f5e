package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/batoncrawl/baton/activities/jobs"
)

// This file holds the hand-out of queued URLs to a running batch: Pull
// and Extend statement by statement (PostgreSQL's pipelined pull:
// pipeline.go), bounded by max_pages and shared among the batches
// waiting for their first URLs; the hosts are leased as hosts.go says.

// pull hands up to n queued URLs of job to batch (counted as taken by
// shard) as a batch wanting want requests in flight, after renewing,
// resizing and dropping the batch's leases; it returns the URLs in
// frontier order and the batch's leases after it. The caller holds the
// batch's row (Extend, Pull); size is how many URLs the batch was ever
// handed (its row's).
// What needs no lock of the job is read before its lock is taken, which
// every hand-out of the job waits for.
func (s *frontierStore) pull(ctx context.Context, tx dbtx, job, batch, shard string, n, want, size int) ([]jobs.Entry, []jobs.HostLease, error) {
	pol, err := s.policy(ctx, tx, job)
	if err != nil {
		return nil, nil, err
	}
	// The hosts of the batch's unfinished URLs: none when it was never
	// handed a URL (a start batch's first pull).
	var open []string
	if size > 0 {
		if open, err = s.hosts.openHosts(ctx, tx, job, batch); err != nil {
			return nil, nil, err
		}
	}
	now, err := s.lockJobNow(ctx, tx, job, pol.shared)
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
func (s *frontierStore) pullLocked(ctx context.Context, tx dbtx, job, batch, shard string, n, want int, pol hostPolicy, open []string, now int64, grow bool) ([]jobs.Entry, []jobs.HostLease, error) {
	var err error
	if n > 0 {
		if n, err = s.underMaxPages(ctx, tx, job, n); err != nil {
			return nil, nil, err
		}
	}
	v, err := s.hosts.view(ctx, tx, job, batch, pol, now)
	if err != nil {
		return nil, nil, err
	}
	done, err := s.pullView(ctx, tx, &writes{tx: tx}, v, shard, n, want, open, grow)
	if err != nil {
		return nil, nil, err
	}
	return done()
}

// pullView is pullLocked once the job's leases are read (v), and n
// bounded by max_pages: it reads on tx and writes with w, and returns
// what to call once w's writes are done (at once, or committed in a
// pipeline) for the URLs handed out and the batch's leases.
func (s *frontierStore) pullView(ctx context.Context, tx dbtx, w *writes, v *leaseView, shard string, n, want int, open []string, grow bool) (func() ([]jobs.Entry, []jobs.HostLease, error), error) {
	job, batch := v.job, v.batch
	if v.expired {
		// Their holders stopped renewing them a lease's TTL ago.
		if err := s.hosts.dropExpired(ctx, w, v); err != nil {
			return nil, err
		}
	}
	if err := s.hosts.tend(ctx, tx, w, v, batch, want, open); err != nil {
		return nil, err
	}
	out := func() []jobs.Entry { return nil }
	if n > 0 {
		spare, err := v.spare(ctx, want)
		if err != nil {
			return nil, err
		}
		chosen, acquired, err := v.choose(ctx, n, spare)
		if err != nil {
			return nil, err
		}
		if chosen, acquired, err = s.fairShare(ctx, tx, v, batch, chosen, acquired); err != nil {
			return nil, err
		}
		if err := s.hosts.acquire(ctx, tx, w, v, batch, acquired); err != nil {
			return nil, err
		}
		if out, err = s.handTo(ctx, tx, w, job, batch, shard, grow, chosen); err != nil {
			return nil, err
		}
	}
	return func() ([]jobs.Entry, []jobs.HostLease, error) {
		leases, err := v.leases(ctx)
		return out(), leases, err
	}, nil
}

// fairShare trims a hand-out from a short queue (choose saw all of it)
// to its part among the batches of the job waiting for their first URLs
// (start batches, handed out empty at the job's start, which pull the
// first pages' links themselves): a Runner whose slots are busy pulls
// ahead, and at a crawl's start, with a few dozen URLs queued, one such
// pull would take all of them while the other Runners' slots stay empty
// until their next commit. The hosts leased for the URLs trimmed are not
// leased.
func (s *frontierStore) fairShare(ctx context.Context, tx dbtx, v *leaseView, batch string, chosen []candidate, acquired map[string]int) ([]candidate, map[string]int, error) {
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
	waiting := v.waiting
	if waiting < 0 {
		if err := tx.QueryRowContext(ctx, s.q(waitingQuery), v.job, jobs.BatchRunning, batch).Scan(&waiting); err != nil {
			return nil, nil, fmt.Errorf("job %s: batches waiting for URLs: %w", v.job, err)
		}
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

// waitingQuery counts the start batches of a job waiting for URLs, but
// one (fairShare): job, jobs.BatchRunning, the batch.
const waitingQuery = `SELECT COUNT(*) FROM baton_batches WHERE job = ? AND state = ? AND size = 0 AND holder > '' AND id <> ?`

// startBatchesLook is how long after this store's first hand-out of a
// job from a short queue fairShare looks for start batches: twice how
// long they wait (jobs' startWait, a second).
const startBatchesLook = 2 * time.Second

// underMaxPages bounds n by what max_pages leaves of the job (the job's
// row is locked on PostgreSQL: two hand-outs never both take the
// remainder).
func (s *frontierStore) underMaxPages(ctx context.Context, tx dbtx, job string, n int) (int, error) {
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

// Pull hands a running batch held at epoch more URLs of hosts it may hold
// (see jobs.RunnerStore). Retried while the database is unreachable; a
// retry after a try whose outcome is unknown returns what that try handed
// out if it committed (handout.go).
func (s *frontierStore) Pull(ctx context.Context, job, id string, epoch int64, n, want int) (jobs.Pulled, error) {
	ctx, h := withHandout(ctx)
	var out jobs.Pulled
	err := s.retrying(ctx, func() error {
		if h.retried() && n > 0 {
			before, ok, err := s.pulledBefore(ctx, job, id, h.token)
			if err != nil || ok {
				out = before
				return err
			}
		}
		var err error
		out, err = s.pullOnce(ctx, job, id, epoch, n, want)
		return err
	})
	if err == nil {
		s.remember(job, out.Entries)
	}
	return out, err
}

// pullOnce is one try of Pull: pipelined where it may be.
func (s *frontierStore) pullOnce(ctx context.Context, job, id string, epoch int64, n, want int) (jobs.Pulled, error) {
	if out, ok, err := s.pullPipelined(ctx, job, id, epoch, n, want); ok {
		return out, err
	}
	var out jobs.Pulled
	err := s.writeOnce(ctx, func(tx *sql.Tx) error {
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
