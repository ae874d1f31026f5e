package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/jobs"
)

// Concurrency: writers racing each other, as Runners and the job's
// supervisor do.

func testConcurrentRecord(t *testing.T, f *fixture) {
	const batches, size, workers = 5, 40, 16
	job := f.newJob("j", 0, seq("s", batches*size)...)
	type work struct {
		batch, runner string
		url           string
		fail          bool
	}
	var todo []work
	for i := range batches {
		id := fmt.Sprintf("b%d", i)
		b, got := f.take(job, id, size)
		require.Equal(t, size, b.Size)
		runner := fmt.Sprintf("r%d", i)
		f.claim(job, id, runner, 1)
		for k, u := range got {
			todo = append(todo, work{batch: id, runner: runner, url: u, fail: k%7 == 0})
		}
	}
	wantFailed := 0
	for _, w := range todo {
		if w.fail {
			wantFailed++
		}
	}
	// Every record is sent twice (a retry racing the first attempt), in an
	// interleaved order; each page links to 3 of 50 shared new pages.
	ch := make(chan work)
	go func() {
		defer close(ch)
		for round := range 2 {
			for i := range todo {
				ch <- todo[(i*7+round*13)%len(todo)]
			}
		}
	}()
	var mu sync.Mutex
	wrote := map[string]int{}
	var errs []error
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for w := range ch {
				n := len(w.url)
				links := []string{URL(fmt.Sprintf("l%02d", n%50)), URL(fmt.Sprintf("l%02d", (n*3+int(w.url[len(w.url)-1]))%50)),
					URL(fmt.Sprintf("l%02d", int(w.url[len(w.url)-2])%50))}
				errMsg := ""
				if w.fail {
					errMsg = "HTTP 404"
					links = nil
				}
				r, err := f.s.Record(f.ctx, jobs.Record{Job: job, Batch: w.batch, Runner: w.runner, Epoch: 1, URL: w.url,
					Page: Page(job, w.batch, w.runner, 1, w.url, 0, errMsg, links...), Links: Entries(1, links...)})
				mu.Lock()
				if err != nil {
					errs = append(errs, fmt.Errorf("record %s: %w", w.url, err))
				} else if r.Wrote {
					wrote[w.url]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	require.Empty(t, errs, "concurrent Record failed")
	assert.Len(t, wrote, len(todo), "Wrote is true once per URL")
	for u, k := range wrote {
		assert.Equal(t, 1, k, "Wrote true %d times for %s", k, u)
	}
	res := f.resultURLs(job)
	assert.Len(t, res, len(todo))
	assert.Len(t, uniq(res), len(todo), "a URL is in the results twice")
	st := f.stats(job)
	assert.Equal(t, len(todo), st.Recorded, "Stats.Recorded")
	assert.Equal(t, wantFailed, st.Failed, "Stats.Failed")
	assert.LessOrEqual(t, st.Seen, len(todo)+50)
	assert.Equal(t, st.Seen-len(todo), st.Queued, "the new links are queued once each")
	for i := range batches {
		done, err := f.s.FinishBatch(f.ctx, job, fmt.Sprintf("b%d", i), 1)
		require.NoError(t, err)
		assert.Equal(t, size, done.Success+done.Failed)
	}
	_, got := f.take(job, "links", 1000)
	assert.Len(t, got, st.Queued)
	assert.Len(t, uniq(got), st.Queued)
}

func (f *fixture) concurrentTake(job string, workers, n int) (map[string]int, []error) {
	var mu sync.Mutex
	handed := map[string]int{}
	var errs []error
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			empty := 0
			for k := 0; empty < 3; k++ {
				id := fmt.Sprintf("w%d-%d", w, k)
				b, err := f.s.TakeBatch(f.ctx, job, id, n)
				if err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("TakeBatch %s: %w", id, err))
					mu.Unlock()
					return
				}
				if b.Size == 0 {
					empty++
					continue
				}
				es, err := f.s.Entries(f.ctx, job, id)
				mu.Lock()
				if err != nil {
					errs = append(errs, fmt.Errorf("Entries %s: %w", id, err))
				} else if len(es) != b.Size {
					errs = append(errs, fmt.Errorf("batch %s: Size %d, %d entries", id, b.Size, len(es)))
				}
				for _, e := range es {
					handed[e.URL]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return handed, errs
}

func testConcurrentTake(t *testing.T, f *fixture) {
	all := seq("s", 300)
	job := f.newJob("j", 0, all...)
	handed, errs := f.concurrentTake(job, 4, 7)
	require.Empty(t, errs)
	for u, k := range handed {
		assert.Equal(t, 1, k, "%s handed out %d times", u, k)
	}
	assert.Equal(t, len(all), len(handed), "every URL handed out")
	assert.Equal(t, jobs.Stats{Seen: 300, Queued: 0}, f.stats(job))
	b, _ := f.take(job, "last", 10)
	assert.Equal(t, 0, b.Size)
}

func testConcurrentTakeMaxPages(t *testing.T, f *fixture) {
	job := f.newJob("j", 50, seq("s", 300)...)
	handed, errs := f.concurrentTake(job, 4, 7)
	require.Empty(t, errs)
	for u, k := range handed {
		assert.Equal(t, 1, k, "%s handed out %d times", u, k)
	}
	assert.Equal(t, 50, len(handed), "exactly max_pages URLs handed out by concurrent TakeBatch calls")
	assert.Equal(t, jobs.Stats{Seen: 50, Queued: 0}, f.stats(job))
}

// testConcurrentTakeSameID: a retried TakeBatch racing the first call
// (a client timed out while the server went on) hands nothing out twice.
func testConcurrentTakeSameID(t *testing.T, f *fixture) {
	job := f.newJob("j", 0, seq("s", 40)...)
	var mu sync.Mutex
	var got []jobs.BatchInfo
	var errs []error
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, err := f.s.TakeBatch(f.ctx, job, "b1", 10)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			got = append(got, b)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		// Allowed (the caller retries), but shown.
		t.Logf("a concurrent TakeBatch of the same id failed: %v", err)
	}
	require.NotEmpty(t, got, "every concurrent TakeBatch of one id failed")
	for _, b := range got {
		assert.Equal(t, got[0], b, "concurrent TakeBatch calls of one id returned different batches")
	}
	b, first := f.take(job, "b1", 10) // the retry that follows
	assert.Equal(t, 10, b.Size)
	assert.Equal(t, jobs.Stats{Seen: 40, Queued: 30}, f.stats(job), "one batch taken")
	_, rest := f.take(job, "b2", 100)
	assert.Len(t, rest, 30)
	assert.Empty(t, intersect(first, rest), "a URL was handed out twice")
}

// testRequeueWhileRecording: a Requeue racing the holder's Records fences
// it promptly (a holder busy recording does not hold it off until it runs
// out of work) and exactly: every URL is either recorded (its Record
// returned nil) or re-queued, never both, never neither.
func testRequeueWhileRecording(t *testing.T, f *fixture) {
	const n = 2000
	job := f.newJob("j", 0, seq("s", n)...)
	_, all := f.take(job, "b1", n)
	require.Len(t, all, n)
	f.claim(job, "b1", "r1", 1)

	ch := make(chan string)
	go func() {
		defer close(ch)
		for _, u := range all {
			select {
			case ch <- u:
			case <-f.ctx.Done():
				return
			}
		}
	}()
	var mu sync.Mutex
	recorded := map[string]bool{}
	var errs []error
	count := 0
	started := make(chan struct{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for u := range ch {
				_, err := f.s.Record(f.ctx, jobs.Record{Job: job, Batch: "b1", Runner: "r1", Epoch: 1, URL: u,
					Page: Page(job, "b1", "r1", 1, u, 0, "")})
				mu.Lock()
				switch {
				case err == nil:
					recorded[u] = true
				case !errors.Is(err, jobs.ErrStale):
					errs = append(errs, err)
				}
				count++
				if count == n/40 {
					close(started)
				}
				mu.Unlock()
			}
		}()
	}
	<-started
	start := time.Now()
	requeued, err := f.s.Requeue(f.ctx, job, "b1", 2)
	took := time.Since(start)
	require.NoError(t, err)
	wg.Wait()
	require.Empty(t, errs)
	t.Logf("Requeue took %v: %d recorded before it, %d re-queued", took, len(recorded), requeued)
	assert.Positive(t, requeued, "Requeue waited %v, until the holder had recorded every URL: "+
		"a busy holder starves the fence", took)
	assert.Equal(t, n, len(recorded)+requeued, "recorded + re-queued")

	res := f.resultURLs(job)
	assert.Equal(t, len(recorded), len(res), "the results are the Records that returned nil")
	for _, u := range res {
		assert.True(t, recorded[u], "%s is in the results, but its Record failed", u)
	}
	_, again := f.take(job, "b2", n)
	assert.Len(t, again, requeued)
	for _, u := range again {
		assert.False(t, recorded[u], "%s was recorded and re-queued", u)
	}
	assert.Equal(t, jobs.Stats{Seen: n, Queued: 0, Recorded: len(recorded)}, f.stats(job))
}

func testConcurrentDuplicates(t *testing.T, f *fixture) {
	const n = 12
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("p%d", i)
	}
	job := f.newJob("j", 0, names...)
	for i := range names {
		b := fmt.Sprintf("b%d", i)
		f.take(job, b, 1)
		f.claim(job, b, "r1", 1)
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := fmt.Sprintf("b%d", i)
			es, err := f.s.Entries(f.ctx, job, b)
			if err != nil || len(es) != 1 {
				errs <- fmt.Errorf("entries of %s: %v %v", b, es, err)
				return
			}
			_, err = f.s.Record(f.ctx, jobs.Record{Job: job, Batch: b, Runner: "r1", Epoch: 1, URL: es[0].URL,
				Page: hashed(job, b, 1, es[0].URL, "same", "")})
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	var originals []string
	dupOf := map[string]int{}
	for _, p := range f.results(job) {
		if p.DuplicateOf == "" {
			originals = append(originals, p.URL)
		} else {
			dupOf[p.DuplicateOf]++
		}
	}
	require.Len(t, originals, 1, "exactly one page owns the body")
	assert.Equal(t, map[string]int{originals[0]: n - 1}, dupOf)
}
