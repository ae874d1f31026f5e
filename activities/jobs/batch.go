package jobs

import (
	"context"
	"log/slog"
)

// Batches is how RunTask and HandOver reach the pages of a crawl-job
// batch: the URLs, their progress and the results live in the job store
// (the data plane), not in the Task znode, which only names the batch.
// *BatchRunner implements it; the worker wires it. Implementations are
// safe for concurrent use.
type Batches interface {
	// Claim makes holder the batch's holder at epoch in the store, as a
	// hand-over does in ZooKeeper, so the old holder's writes are refused
	// there too. Claiming a batch that is finished, or held at a higher
	// epoch already, is not an error (the runner finds out when it runs).
	Claim(ctx context.Context, job, batch, holder string, epoch int64) error
	// RunBatch crawls the unfinished URLs of a batch at epoch, records
	// each page once and marks the batch finished.
	RunBatch(ctx context.Context, in BatchRun) (BatchOutcome, error)
}

// BatchRun names a batch to run and who runs it at which epoch.
type BatchRun struct {
	Job, Batch, Runner string
	Epoch              int64
	// Log is the activity's logger (instance, role, job, batch, epoch).
	Log *slog.Logger
	// Drain, when set, is asked before the runner pulls more URLs into the
	// batch; true stops its growth: the runner finishes what it holds and
	// ends the batch (it steps down after a scale-down, or its worker is
	// leaving). Safe for concurrent use; it must be cheap.
	Drain func() bool
}

// BatchOutcome is how a batch run ended.
type BatchOutcome struct {
	// Fenced: the store refused the runner's epoch (a hand-over or a
	// re-queue raised it); Reason says by whom.
	Fenced bool
	Reason string
	// Failed is set when the batch cannot run (e.g. its job's spec is not
	// in the store); the Task is ended with this error, not retried.
	Failed string
	// Success and Fail count the batch's pages recorded without and with
	// an error, by every holder it had.
	Success, Fail int
	// Ran counts the URLs this call finished.
	Ran int
}
