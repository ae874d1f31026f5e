package jobs_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/jobs"
)

// failingSink is a seedSink whose AddSeeds fails from its nth call on.
type failingSink struct {
	seedSink
	calls, failFrom int
}

func (s *failingSink) AddSeeds(ctx context.Context, job string, seeds []jobs.Entry) (int, error) {
	if s.calls++; s.calls >= s.failFrom {
		return 0, errors.New("store unreachable")
	}
	return s.seedSink.AddSeeds(ctx, job, seeds)
}

// seedFilePlan writes n seeds to a file and returns the plan of a job
// queueing them.
func seedFilePlan(t *testing.T, n int) jobs.Plan {
	t.Helper()
	file := filepath.Join(t.TempDir(), "seeds.txt")
	f, err := os.Create(file)
	require.NoError(t, err)
	w := bufio.NewWriter(f)
	for i := range n {
		fmt.Fprintf(w, "http://127.0.0.1:1/p/%d\n", i)
	}
	require.NoError(t, w.Flush())
	require.NoError(t, f.Close())
	sf, err := jobs.ScanSeedFile(file, nil)
	require.NoError(t, err)
	t.Cleanup(sf.Close)
	plan, err := jobs.Submission{ID: "j", Group: "g", Options: crawl.DefaultOptions(), File: sf}.Build()
	require.NoError(t, err)
	return plan
}

// A seed file of several chunks is queued whole and in the file's order
// (the job's crawl order), each seed normalised.
func TestQueueSeedFileInOrderAcrossChunks(t *testing.T) {
	const n = 45001 // two full chunks and a partial one
	sink := &seedSink{}
	got, err := seedFilePlan(t, n).Queue(context.Background(), sink)
	require.NoError(t, err)
	assert.Equal(t, n, got)
	require.Len(t, sink.entries, n)
	for i, e := range sink.entries {
		if want := fmt.Sprintf("http://127.0.0.1:1/p/%d", i); e.URL != want {
			t.Fatalf("entry %d: %s, want %s", i, e.URL, want)
		}
	}
}

// A store that fails mid-file stops the queueing with its error, at once
// (the file's reader stops too), and nothing is reported queued.
func TestQueueSeedFileStopsOnAStoreError(t *testing.T) {
	sink := &failingSink{failFrom: 2}
	plan := seedFilePlan(t, 70000)
	done := make(chan error, 1)
	go func() {
		_, err := plan.Queue(context.Background(), sink)
		done <- err
	}()
	select {
	case err := <-done:
		require.Error(t, err)
		assert.Contains(t, err.Error(), "store unreachable")
		assert.Contains(t, err.Error(), "job j")
	case <-time.After(30 * time.Second):
		t.Fatal("Queue did not return after the store failed")
	}
	assert.Equal(t, 2, sink.calls, "no chunk is written after the failure")
}
