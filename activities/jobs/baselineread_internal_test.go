package jobs

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/crawl"
)

// readsLog is a BaselineBatchReader that records each read's URLs and
// holds the first read until released.
type readsLog struct {
	mu      sync.Mutex
	reads   [][]string
	release chan struct{}
	first   chan struct{}
}

func (r *readsLog) BaselinePages(_ context.Context, job string, urls []string) (map[string]BaselinePage, error) {
	r.mu.Lock()
	r.reads = append(r.reads, append([]string(nil), urls...))
	n := len(r.reads)
	r.mu.Unlock()
	if n == 1 {
		close(r.first)
		<-r.release
	}
	out := map[string]BaselinePage{}
	for _, u := range urls {
		if u != "none" {
			out[u] = BaselinePage{Page: PageRecord{Job: job, Page: crawl.Page{URL: u}}}
		}
	}
	return out, nil
}

// The asks that come while a read runs are answered by one next read,
// and every ask gets its own URL's record (nil for a URL with none).
func TestBaselineReadsCoalesce(t *testing.T) {
	store := &readsLog{release: make(chan struct{}), first: make(chan struct{})}
	b := &baselineReads{store: store, job: "base"}
	ctx := context.Background()
	var wg sync.WaitGroup
	got := make([]*BaselinePage, 9)
	errs := make([]error, 9)
	wg.Add(1)
	go func() { defer wg.Done(); got[0], errs[0] = b.page(ctx, "u0") }()
	<-store.first
	for i := 1; i < 9; i++ {
		url := fmt.Sprintf("u%d", i)
		if i == 8 {
			url = "none"
		}
		wg.Add(1)
		go func() { defer wg.Done(); got[i], errs[i] = b.page(ctx, url) }()
	}
	require.Eventually(t, func() bool { b.mu.Lock(); defer b.mu.Unlock(); return len(b.pending) == 8 }, 10*time.Second, time.Millisecond,
		"the other asks wait for the read in flight")
	close(store.release)
	wg.Wait()
	require.Len(t, store.reads, 2, "one read for the first ask, one for the 8 that came meanwhile")
	assert.Len(t, store.reads[1], 8)
	for i := 0; i < 8; i++ {
		require.NoError(t, errs[i])
		require.NotNil(t, got[i], "ask %d", i)
		assert.Equal(t, fmt.Sprintf("u%d", i), got[i].Page.URL)
	}
	assert.Nil(t, got[8], "a URL the baseline has no page of")
	assert.False(t, b.reading, "no read left running")
}

// The URLs queued to be fetched are read ahead of their fetches' asks:
// the first ask reads its URL and the next readAhead expected, whose asks
// then read nothing; the ask after them reads again.
func TestBaselineReadsAhead(t *testing.T) {
	store := &readsLog{release: make(chan struct{}), first: make(chan struct{})}
	close(store.release)
	b := &baselineReads{store: store, job: "base"}
	ctx := context.Background()
	urls := make([]string, readAhead+10)
	for i := range urls {
		urls[i] = fmt.Sprintf("u%d", i)
	}
	urls[5] = "none"
	b.expect(urls)
	for i, u := range urls {
		p, err := b.page(ctx, u)
		require.NoError(t, err)
		if u == "none" {
			assert.Nil(t, p, "a URL the baseline has no page of, read ahead")
			continue
		}
		require.NotNil(t, p, "ask %d", i)
		assert.Equal(t, u, p.Page.URL)
	}
	require.Len(t, store.reads, 2, "one read for the first ask and the %d expected after it, one for the rest", readAhead)
	assert.Len(t, store.reads[0], readAhead+1)
	assert.Equal(t, urls[readAhead+1:], store.reads[1])
	assert.Empty(t, b.kept, "every record read ahead was asked for")
}
