package activities

import (
	"context"

	"github.com/batoncrawl/baton/roles"
)

// claimBatch raises a crawl-job Task's batch epoch in the store to the
// Task's (a hand-over), when t belongs to a crawl job.
func (a *Activities) claimBatch(ctx context.Context, t roles.Task, holder string) error {
	if t.Job == nil || a.Batches == nil {
		return nil
	}
	return a.Batches.Claim(ctx, t.Job.ID, t.Job.Batch, holder, t.Epoch)
}
