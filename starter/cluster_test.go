package main

import (
	"bytes"
	"context"
	"errors"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/metadata"
	"github.com/batoncrawl/baton/roles"
)

// baton cluster shows a crawl job on the instance whose Task runs one of
// its batches now, not on those whose Task ran one before.
func TestClusterShowsAJobWhereItsBatchRunsNow(t *testing.T) {
	ctx := context.Background()
	store := metadata.NewMemory()
	c := metadata.NewCluster(store, "/baton", "g")
	mk := func(p string, v any) {
		t.Helper()
		var dirs []string
		for dir := path.Dir(p); dir != "/"; dir = path.Dir(dir) {
			dirs = append([]string{dir}, dirs...)
		}
		for _, d := range dirs {
			if _, err := store.Create(ctx, d, nil, metadata.Persistent); err != nil && !errors.Is(err, metadata.ErrExists) {
				t.Fatal(err)
			}
		}
		_, err := c.Put(ctx, p, v, metadata.AnyVersion)
		require.NoError(t, err)
	}
	mk(c.GroupPath(), roles.GroupState{CurrentCrawler: []string{"g_1", "g_2"}, CurrentRunner: []string{"g_1", "g_2"}, TotalRunner: 2})
	running := roles.Task{RunningStatus: roles.TaskProcessing, Holder: "g_1", Epoch: 3, Job: &roles.JobRef{ID: "shop", Batch: "b2"}}
	ended := roles.Task{RunningStatus: roles.TaskDone, Holder: "g_2", Epoch: 2, Job: &roles.JobRef{ID: "shop", Batch: "b1"}}
	mk(c.TaskPath("g_1"), running)
	mk(c.TaskPath("g_2"), ended)
	v, err := readCluster(ctx, c, time.Now())
	require.NoError(t, err)
	require.Len(t, v.Instances, 2)
	assert.Equal(t, "shop", v.Instances[0].Task.Job, "g_1 runs a batch of job shop")
	assert.Empty(t, v.Instances[1].Task.Job, "g_2's batch of job shop ended")
	var out bytes.Buffer
	require.NoError(t, printCluster(ctx, &out, c, time.Now()))
	lines := strings.Split(out.String(), "\n")
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "g_1 "):
			assert.Contains(t, l, "processing (job shop)")
		case strings.HasPrefix(l, "g_2 "):
			assert.NotContains(t, l, "shop")
		}
	}
}
