package jobs_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/jobs"
)

// askedPulls is a store that keeps how many URLs each pull (not a
// renewal) asked for, and how many it got.
type askedPulls struct {
	jobs.Store
	mu    sync.Mutex
	asked []int
	got   []int
}

func (s *askedPulls) Pull(ctx context.Context, job, id string, epoch int64, n, want int) (jobs.Pulled, error) {
	p, err := s.Store.Pull(ctx, job, id, epoch, n, want)
	if n > 0 && err == nil {
		s.mu.Lock()
		s.asked, s.got = append(s.asked, n), append(s.got, len(p.Entries))
		s.mu.Unlock()
	}
	return p, err
}

// A batch whose pulls get all they ask for asks for twice as many URLs
// at a time (fewer hand-outs, each a transaction under the job's lock);
// after a pull that got less, it asks for the smaller size again.
func TestRunBatchPullsMoreWhileTheFrontierHasPlenty(t *testing.T) {
	urls := pageURLs(300)
	e := newBatchEnv(t, 2, urls[:2], func(s *jobs.Spec) {
		s.BatchSize, s.Options.Parallelism, s.Options.IgnoreRobots = 0, 2, true // it grows while the frontier has URLs
	})
	seeds := make([]jobs.Entry, 0, len(urls)-2)
	for _, u := range urls[2:] {
		seeds = append(seeds, jobs.Entry{URL: u})
	}
	_, err := e.store.AddSeeds(e.ctx, e.spec.ID, seeds)
	require.NoError(t, err)
	ap := &askedPulls{Store: e.store}
	e.br.Store = ap
	out, err := e.run()
	require.NoError(t, err)
	assert.Equal(t, len(urls), out.Ran)
	assert.Equal(t, len(urls), e.stats().Recorded)

	ap.mu.Lock()
	defer ap.mu.Unlock()
	require.NotEmpty(t, ap.asked)
	assert.Equal(t, 24, ap.asked[0], "the first pull")
	for i := 1; i < len(ap.asked); i++ {
		want := 24
		if ap.got[i-1] == ap.asked[i-1] {
			want = 48
		}
		assert.Equal(t, want, ap.asked[i], "pull %d after one that asked for %d and got %d", i, ap.asked[i-1], ap.got[i-1])
	}
	assert.Contains(t, ap.asked, 48, "pulls %v", ap.asked)
}
