package jobs

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/batoncrawl/baton/activities/crawler"
)

// ErrLeaseHeld is returned by LeaseSink when another holder's lease on a
// job's sink has not expired; ErrLeaseLost by the writes of a lease
// holder (RenewSink, AckSink, FailSink, DeadLetter) when the caller's
// lease is no longer the sink's: it ran out, or another worker took it;
// ErrSinkBackoff by LeaseSink while the sink waits after a failed
// delivery (SinkState.RetryAt, the database's clock).
var (
	ErrLeaseHeld   = errors.New("sink lease held by another worker")
	ErrLeaseLost   = errors.New("sink lease lost")
	ErrSinkBackoff = errors.New("sink waiting after a failed delivery")
)

// ItemRecord is an item as the store keeps it: Seq orders a job's items in
// the order they were recorded (increasing, not necessarily contiguous).
type ItemRecord struct {
	Seq int64 `json:"seq"`
	crawler.StoredItem
}

// SinkState is the delivery state of one sink of one job: its cursor (the
// Seq of the last item delivered or dead-lettered), who holds its lease
// and until when (the database's clock), what was delivered, the failures
// of the batch at the cursor and its dead letters.
type SinkState struct {
	Job        string    `json:"job"`
	Sink       string    `json:"sink"`
	Holder     string    `json:"holder,omitempty"`
	LeaseUntil time.Time `json:"lease_until,omitzero"`
	Cursor     int64     `json:"cursor"`
	Delivered  int64     `json:"delivered"`
	Failures   int       `json:"failures"` // consecutive failed deliveries
	// Refusals counts the failures that were refusals (not
	// crawler.ErrSinkUnavailable): at the sink's most, the batch is
	// dead-lettered.
	Refusals  int    `json:"refusals"`
	LastError string `json:"last_error,omitempty"`
	// RetryAt is when a failing sink is tried again (the database's
	// clock); zero when it is not waiting.
	RetryAt time.Time `json:"retry_at,omitzero"`
	// Skipped counts the items of the dead letters skipped (baton sink
	// skip): never delivered.
	Skipped     int64        `json:"skipped"`
	DeadLetters []DeadLetter `json:"dead_letters,omitempty"`
	// Epoch fences the lease: it changes each time the lease is taken
	// anew, and a holder's writes name the epoch it leased at.
	Epoch int64 `json:"-"`
}

// Lease is the lease a holder took of a job's sink (LeaseSink): what its
// writes name.
func (s SinkState) Lease(holder string) SinkLease {
	return SinkLease{Job: s.Job, Sink: s.Sink, Holder: holder, Epoch: s.Epoch}
}

// SinkLease names a lease of a job's sink: its holder and epoch.
type SinkLease struct {
	Job, Sink, Holder string
	Epoch             int64
}

// DeadLetter is a batch of a job's items a sink refused as many times as
// it allows (crawler.Sink.MaxFailures): the items with First <= Seq <=
// Last, set aside so that the items after them are delivered. It stays
// until skipped (SkipDeadLetters) or delivered again (RetryDeadLetters).
type DeadLetter struct {
	First     int64     `json:"first_seq"`
	Last      int64     `json:"last_seq"`
	Items     int       `json:"items"`
	Failures  int       `json:"failures"`
	LastError string    `json:"last_error"`
	At        time.Time `json:"at"`
	// Retry: to be delivered again (RetryDeadLetters), before the items
	// at the cursor.
	Retry bool `json:"retry,omitempty"`
}

// SinkFailure is a failed delivery as the store records it: the error
// (without URLs' paths and queries: RedactURLs), whether the sink refused
// the batch (else it was unavailable: crawler.ErrSinkUnavailable), and
// how long the sink waits before it is tried again.
type SinkFailure struct {
	Reason  string
	Refused bool
	Backoff time.Duration
}

// PendingJob is a job with items its sinks may not all have: Seq is the
// highest Seq of its items when it was listed.
type PendingJob struct {
	Job string
	Seq int64
}

// ItemQuery selects a batch of a job's items: those with After < Seq (and
// Seq <= UpTo unless UpTo is 0), in Seq order, at most Limit of them and
// no more than MaxBytes by crawler.StoredItem.Size (0: no bound), but at
// least one.
type ItemQuery struct {
	After, UpTo int64
	Limit       int
	MaxBytes    int64
}

// ItemStore holds the items of user crawlers and the cursors of their
// sinks (the data plane of items: nothing of them travels in ZooKeeper or
// a workflow's history). Safe for concurrent use by goroutines and
// processes.
type ItemStore interface {
	// Items returns up to limit items of job with Seq > after, in Seq
	// order, each with its stable ID (crawler.ItemID).
	Items(ctx context.Context, job string, after int64, limit int) ([]ItemRecord, error)
	// Sinks returns the states of a job's sinks, by name, each with its
	// dead letters in Seq order.
	Sinks(ctx context.Context, job string) ([]SinkState, error)
	SinkDelivery
	SinkOperator
}

// SinkDelivery is what a worker delivering items to sinks writes and
// reads (Deliverer).
type SinkDelivery interface {
	// ItemBatch returns the items of job q selects (ItemQuery), read one
	// by one: never more than q.MaxBytes of them in memory.
	ItemBatch(ctx context.Context, job string, q ItemQuery) ([]ItemRecord, error)
	// PendingJobs lists the jobs of group with items recorded since the
	// job was last marked delivered (SinkJobDone), by job ID: one indexed
	// read of those jobs only. A job is listed again by its next items
	// (a trigger of the items' table: whatever Baton wrote them) or by
	// RetryDeadLetters.
	PendingJobs(ctx context.Context, group string) ([]PendingJob, error)
	// SinkJobDone marks job delivered up to seq: it is not listed by
	// PendingJobs until an item past seq is recorded.
	SinkJobDone(ctx context.Context, job string, seq int64) error
	// LeaseSink gives holder the lease of job's sink for ttl (creating the
	// sink's row at cursor 0 the first time) and returns its state; it
	// renews holder's own lease that has not run out (same epoch), and
	// takes one that ran out at a new epoch; ErrLeaseHeld while another
	// holder's lease runs, ErrSinkBackoff while the sink waits after a
	// failure.
	LeaseSink(ctx context.Context, job, sink, holder string, ttl time.Duration) (SinkState, error)
	// RenewSink extends l for ttl if it is still the sink's and has not
	// run out; else ErrLeaseLost.
	RenewSink(ctx context.Context, l SinkLease, ttl time.Duration) error
	// AckSink moves the cursor to upTo (never back), adds n to Delivered
	// and clears the failures, if l is the sink's lease and has not run
	// out; else ErrLeaseLost.
	AckSink(ctx context.Context, l SinkLease, upTo int64, n int) error
	// FailSink records a failed delivery of the batch at the cursor
	// (Failures+1, Refusals+1 if refused, LastError, RetryAt), under l as
	// AckSink.
	FailSink(ctx context.Context, l SinkLease, f SinkFailure) error
	// DeadLetter sets the batch d aside, moves the cursor past it
	// (d.Last) and clears the failures, under l as AckSink.
	DeadLetter(ctx context.Context, l SinkLease, d DeadLetter) error
	// AckDeadLetter records the delivery of a retried dead letter's items
	// up to upTo: it ends when they are all delivered. Under l as AckSink;
	// a dead letter skipped meanwhile is no error.
	AckDeadLetter(ctx context.Context, l SinkLease, last, upTo int64, n int) error
	// FailDeadLetter records a retried dead letter refused again: it is
	// not retried any more (Retry false) until RetryDeadLetters. Under l.
	FailDeadLetter(ctx context.Context, l SinkLease, last int64, reason string) error
}

// SinkOperator is what an operator does to a sink's dead letters (baton
// sink skip, baton sink retry). Neither needs the sink's lease.
type SinkOperator interface {
	// SkipDeadLetters drops the dead letters of job's sink, adds their
	// items to its Skipped count, and returns them.
	SkipDeadLetters(ctx context.Context, job, sink string) ([]DeadLetter, error)
	// RetryDeadLetters marks the dead letters of job's sink to be
	// delivered again, lists the job for delivery, and returns them.
	RetryDeadLetters(ctx context.Context, job, sink string) ([]DeadLetter, error)
}

// DefaultMaxCommitBytes bounds the items and bodies one group commit
// writes unless the worker sets its own cap (Limits.MaxCommitBytes).
const DefaultMaxCommitBytes = 64 << 20

// commitSplit returns the longest prefix of pending whose items and
// stored bodies stay within limit bytes (at least one record: a page is
// never split), and the records left for the next commit.
func commitSplit(pending []Record, limit int64) (group, rest []Record) {
	var n int64
	for i, rec := range pending {
		n += int64(len(rec.Body))
		for _, it := range rec.Items {
			n += int64(len(it.Value))
		}
		if n > limit && i > 0 {
			return pending[:i], slices.Clone(pending[i:])
		}
	}
	return pending, nil
}
