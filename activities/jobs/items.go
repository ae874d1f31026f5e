package jobs

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/batoncrawl/baton/activities/crawler"
)

// ErrLeaseHeld is returned by LeaseSink when another holder's lease on a
// job's sink has not expired; ErrLeaseLost by AckSink and FailSink when
// the caller's lease is no longer the sink's (it expired and another
// worker took it).
var (
	ErrLeaseHeld = errors.New("sink lease held by another worker")
	ErrLeaseLost = errors.New("sink lease lost")
)

// ItemRecord is an item as the store keeps it: Seq orders a job's items in
// the order they were recorded (increasing, not necessarily contiguous).
type ItemRecord struct {
	Seq int64 `json:"seq"`
	crawler.StoredItem
}

// SinkState is the delivery state of one sink of one job: its cursor (the
// Seq of the last item delivered), who holds its lease and until when (the
// database's clock), what was delivered and the last failure.
type SinkState struct {
	Job        string    `json:"job"`
	Sink       string    `json:"sink"`
	Holder     string    `json:"holder,omitempty"`
	LeaseUntil time.Time `json:"lease_until,omitzero"`
	Cursor     int64     `json:"cursor"`
	Delivered  int64     `json:"delivered"`
	Failures   int       `json:"failures"` // consecutive failed deliveries
	LastError  string    `json:"last_error,omitempty"`
}

// ItemStore holds the items of user crawlers and the cursors of their
// sinks (the data plane of items: nothing of them travels in ZooKeeper or
// a workflow's history). Safe for concurrent use by goroutines and
// processes.
type ItemStore interface {
	// Items returns up to limit items of job with Seq > after, in Seq
	// order, each with its stable ID (crawler.ItemID).
	Items(ctx context.Context, job string, after int64, limit int) ([]ItemRecord, error)
	// LeaseSink gives holder the lease of job's sink for ttl (creating the
	// sink's row at cursor 0 the first time) and returns its state; it
	// renews holder's own lease; ErrLeaseHeld while another holder's lease
	// runs.
	LeaseSink(ctx context.Context, job, sink, holder string, ttl time.Duration) (SinkState, error)
	// AckSink moves the cursor of job's sink to upTo (never back), adds
	// n to Delivered and clears the failures, if holder holds the lease;
	// else ErrLeaseLost.
	AckSink(ctx context.Context, job, sink, holder string, upTo int64, n int) error
	// FailSink records a failed delivery (Failures+1, LastError) if holder
	// holds the lease; else ErrLeaseLost.
	FailSink(ctx context.Context, job, sink, holder, reason string) error
	// Sinks returns the states of a job's sinks, by name.
	Sinks(ctx context.Context, job string) ([]SinkState, error)
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
