package jobs_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/jobs"
)

// startEnv is a job whose root (in batch 0, claimed by sc-crawler_1)
// links to links (none: a one-page job), with the fetcher gated, and a
// start batch opened for sc-crawler_2.
func startEnv(t *testing.T, links int) (*batchEnv, string) {
	t.Helper()
	e, start := startEnvRobots(t, links)
	// The host's robots.txt is known (none: all allowed, no delay), so
	// batches may share it (the job's politeness).
	require.NoError(t, e.store.PutRobots(e.ctx, e.spec.ID, "http://example.test", crawl.RobotsFile{Status: 404, TTL: time.Hour}))
	return e, start
}

// startEnvRobots is startEnv without the host's robots.txt kept: the
// host is held by one batch at a time (the job's politeness).
func startEnvRobots(t *testing.T, links int) (*batchEnv, string) {
	t.Helper()
	root := "http://example.test/"
	e := newBatchEnv(t, 2, []string{root}, func(s *jobs.Spec) { s.BatchSize = 0 })
	var ls []string
	for i := range links {
		ls = append(ls, fmt.Sprintf("http://example.test/%d", i))
	}
	e.pages.pages[root] = crawl.Page{URL: root, StatusCode: 200, Links: ls}
	e.pages.gate = make(chan struct{})
	start := jobs.BatchID(e.spec.ID, 1)
	b, err := e.store.OpenBatch(e.ctx, e.spec.ID, start)
	require.NoError(t, err)
	require.Zero(t, b.Size)
	_, err = e.store.Claim(e.ctx, e.spec.ID, start, nodeName(2), 1)
	require.NoError(t, err)
	return e, start
}

// letRoot lets the root's fetch through the gate.
func (e *batchEnv) letRoot() {
	e.t.Helper()
	select {
	case e.pages.gate <- struct{}{}:
	case <-time.After(waitLimit):
		e.t.Fatal("the root was not fetched")
	}
}

func (e *batchEnv) runStart(start string) <-chan outcomeRes {
	ch := make(chan outcomeRes, 1)
	go func() {
		out, err := e.br.RunBatch(e.ctx, jobs.BatchRun{Job: e.spec.ID, Batch: start, Runner: nodeName(2), Epoch: 1, Log: quiet()})
		ch <- outcomeRes{out, err}
	}()
	return ch
}

// A start batch, handed out empty at a job's start, waits for the first
// links another batch records and crawls them with its own slots: both
// Runners fetch at once, and every page is recorded once.
func TestStartBatchPullsTheFirstLinks(t *testing.T) {
	e, start := startEnv(t, 40)
	startDone := e.runStart(start)
	seedDone := e.runAsync()
	e.letRoot()
	// Each batch holds 2 fetches blocked at the gate: the start batch
	// pulled links of the root it did not fetch.
	eventually(t, func() bool { _, in, _ := e.pages.count(); return in == 4 }, "4 fetches in flight (2 per batch)")
	close(e.pages.gate)
	seed, err := e.wait(seedDone)
	require.NoError(t, err)
	var st outcomeRes
	st.out, st.err = e.wait(startDone)
	require.NoError(t, st.err)
	assert.Positive(t, st.out.Success, "the start batch crawled pages")
	assert.Equal(t, 41, seed.Success+st.out.Success, "every page recorded by one of the batches")
	assert.Equal(t, jobs.Stats{Seen: 41, Queued: 0, Recorded: 41}, e.stats())
	for u, n := range e.pages.perURL() {
		assert.Equal(t, 1, n, "%s fetched %d times", u, n)
	}
	infos, err := e.store.Batches(e.ctx, e.spec.ID, []string{e.batch, start})
	require.NoError(t, err)
	for _, b := range infos {
		assert.Equal(t, jobs.BatchDone, b.State, "batch %s", b.ID)
	}
}

// A one-page job is not held up by its start batches: once no batch holds
// URLs (the root recorded without links, its batch done), a start batch
// ends at once, empty, instead of waiting out its bound.
func TestStartBatchEndsWhenNoBatchHoldsURLs(t *testing.T) {
	e, start := startEnv(t, 0)
	startDone := e.runStart(start)
	seedDone := e.runAsync()
	close(e.pages.gate)
	_, err := e.wait(seedDone)
	require.NoError(t, err)
	seedEnd := time.Now()
	var st outcomeRes
	st.out, st.err = e.wait(startDone)
	took := time.Since(seedEnd)
	require.NoError(t, st.err)
	assert.Equal(t, jobs.BatchOutcome{}, st.out, "nothing to crawl")
	assert.Less(t, took, jobs.StartWaitForTest/2, "the start batch ended soon after the last batch with URLs")
	infos, err := e.store.Batches(e.ctx, e.spec.ID, []string{start})
	require.NoError(t, err)
	require.Len(t, infos, 1)
	assert.Equal(t, jobs.BatchDone, infos[0].State)
	assert.Equal(t, 1, e.pages.perURL()["http://example.test/"])
}

// A pause ends a waiting start batch (it fetched nothing, holds nothing).
func TestStartBatchEndsWhenTheJobIsPaused(t *testing.T) {
	e, start := startEnv(t, 10)
	e.br.ControlPoll = 10 * time.Millisecond
	startDone := e.runStart(start)
	seedDone := e.runAsync()
	eventually(t, func() bool { _, in, _ := e.pages.count(); return in == 1 }, "the root's fetch blocked at the gate")
	require.NoError(t, e.store.SetControl(e.ctx, e.spec.ID, jobs.ControlPaused))
	var st outcomeRes
	st.out, st.err = e.wait(startDone)
	require.NoError(t, st.err)
	assert.Equal(t, jobs.BatchOutcome{}, st.out)
	_, err := e.wait(seedDone)
	require.NoError(t, err)
	calls, _, _ := e.pages.count()
	assert.Equal(t, 1, calls, "nothing but the root was fetched")
}

// A start batch whose job's URLs are all of a host another batch holds
// (its robots.txt not known yet: one batch at a time) stops waiting after
// a few pulls that found URLs queued but none it may take, instead of
// polling out its bound: the other batch crawls on.
func TestStartBatchEndsWhenTheHostsAreHeld(t *testing.T) {
	e, start := startEnvRobots(t, 40)
	began := time.Now()
	startDone := e.runStart(start)
	seedDone := e.runAsync()
	e.letRoot()
	var st outcomeRes
	st.out, st.err = e.wait(startDone)
	require.NoError(t, st.err)
	assert.Equal(t, jobs.BatchOutcome{}, st.out, "it took nothing")
	assert.Less(t, time.Since(began), jobs.StartWaitForTest/2, "it did not wait out its bound")
	_, in, _ := e.pages.count()
	assert.Equal(t, 2, in, "the seed's batch still crawls (its fetches blocked at the gate)")
	close(e.pages.gate)
	seed, err := e.wait(seedDone)
	require.NoError(t, err)
	assert.Equal(t, 41, seed.Success, "the seed's batch crawled the host alone")
}
