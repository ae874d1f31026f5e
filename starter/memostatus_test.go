package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"

	"github.com/batoncrawl/baton/workflows"
)

// A running job whose progress query no worker answers (right after a
// fail-over) shows what its memo last recorded: its state and batches,
// not a job that never started.
func TestStatusFromMemoKeepsBatches(t *testing.T) {
	st := workflows.JobState{State: workflows.JobRunning, Batches: 7, Requeued: 1, FailedBatches: 2}
	memo := &commonpb.Memo{Fields: map[string]*commonpb.Payload{}}
	for k, v := range workflows.JobProgressMemo(st) {
		pl, err := converter.GetDefaultDataConverter().ToPayload(v)
		require.NoError(t, err)
		memo.Fields[k] = pl
	}
	var p workflows.JobProgress
	memoProgress(memo, &p)
	assert.Equal(t, workflows.JobRunning, p.State)
	assert.Equal(t, 7, p.Batches)
	assert.Equal(t, 1, p.Requeued)
	assert.Equal(t, 2, p.FailedBatches)

	var none workflows.JobProgress
	memoProgress(nil, &none)
	assert.Equal(t, workflows.JobProgress{}, none, "no memo: nothing filled")
}
