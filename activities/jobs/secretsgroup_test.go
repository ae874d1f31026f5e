package jobs_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/activities/metadata"
)

func TestBindSecretsKey(t *testing.T) {
	ctx := context.Background()
	m := metadata.NewMemory()
	require.NoError(t, jobs.BindSecretsKey(ctx, m, "/r", "g", "aaa"), "the first worker records its key")
	require.NoError(t, jobs.BindSecretsKey(ctx, m, "/r", "g", "aaa"), "the same key again")
	err := jobs.BindSecretsKey(ctx, m, "/r", "g", "bbb")
	require.ErrorIs(t, err, jobs.ErrOtherSecretsKey)
	assert.Contains(t, err.Error(), `"aaa"`)
	assert.Contains(t, err.Error(), "bbb")
	require.NoError(t, jobs.BindSecretsKey(ctx, m, "/r", "other", "bbb"), "another group, another key")
}
