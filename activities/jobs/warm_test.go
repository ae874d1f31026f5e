package jobs_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/roles"
)

// robotsSite is a site whose robots.txt answers only once let through
// (gate), and which counts its requests.
type robotsSite struct {
	*httptest.Server
	gate         chan struct{}
	robotsHits   atomic.Int32
	robotsDone   atomic.Bool
	pageHits     atomic.Int32
	pageEarly    atomic.Bool // a page was requested before robots.txt was answered
	disallowRoot bool
}

func newRobotsSite(t *testing.T, disallowRoot bool) *robotsSite {
	s := &robotsSite{gate: make(chan struct{}), disallowRoot: disallowRoot}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			s.robotsHits.Add(1)
			select {
			case <-s.gate:
			case <-r.Context().Done():
				return
			}
			if s.disallowRoot {
				_, _ = w.Write([]byte("User-agent: *\nDisallow: /\n"))
			} else {
				_, _ = w.Write([]byte("User-agent: *\nDisallow: /private\n"))
			}
			s.robotsDone.Store(true)
			return
		}
		s.pageHits.Add(1)
		if !s.robotsDone.Load() {
			s.pageEarly.Store(true)
		}
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte("<html><title>root</title></html>"))
	}))
	t.Cleanup(s.Close)
	return s
}

// warmEnv is a one-page job of the site's root, taken into a batch for
// sc-crawler_1, run by a BatchRunner on a real fetch engine.
func warmEnv(t *testing.T, site *robotsSite, ignoreRobots bool) *batchEnv {
	t.Helper()
	e := newBatchEnv(t, 2, []string{site.URL + "/"}, func(s *jobs.Spec) {
		s.Options = crawl.DefaultOptions()
		s.Options.IgnoreRobots = ignoreRobots
	})
	e.br.Pages = crawl.NewEngine()
	return e
}

// Warm gets the robots.txt of a new job's seeds before its batch runs;
// the batch's fetch of the seed waits for that robots.txt and obeys it:
// robots.txt is fetched once, before the page, and kept for the job.
func TestWarmFetchesTheSeedsRobotsOnceBeforeTheBatch(t *testing.T) {
	site := newRobotsSite(t, false)
	e := warmEnv(t, site, false)
	e.br.Warm(e.ctx, e.spec, e.urls, nil)
	eventually(t, func() bool { return site.robotsHits.Load() == 1 }, "robots.txt requested by Warm, before the batch runs")
	done := e.runAsync()
	close(site.gate)
	out, err := e.wait(done)
	require.NoError(t, err)
	assert.Equal(t, 1, out.Success, "the root recorded")
	assert.EqualValues(t, 1, site.robotsHits.Load(), "robots.txt fetched once: the batch's fetch waited for Warm's")
	assert.EqualValues(t, 1, site.pageHits.Load())
	assert.False(t, site.pageEarly.Load(), "the root was requested only once robots.txt was answered")
	kept, ok, err := e.store.Robots(e.ctx, e.spec.ID, site.URL)
	require.NoError(t, err)
	require.True(t, ok, "the robots.txt Warm fetched is kept for the job")
	assert.Equal(t, 200, kept.Status)
}

// A seed that the robots.txt Warm got disallows is not fetched.
func TestWarmRobotsIsObeyed(t *testing.T) {
	site := newRobotsSite(t, true)
	e := warmEnv(t, site, false)
	e.br.Warm(e.ctx, e.spec, e.urls, nil)
	eventually(t, func() bool { return site.robotsHits.Load() == 1 }, "robots.txt requested by Warm")
	close(site.gate)
	out, err := e.run()
	require.NoError(t, err)
	assert.Zero(t, out.Success)
	assert.EqualValues(t, 0, site.pageHits.Load(), "the disallowed root was not requested")
	assert.EqualValues(t, 1, site.robotsHits.Load())
}

// A job that ignores robots.txt warms nothing.
func TestWarmIgnoresAJobThatIgnoresRobots(t *testing.T) {
	site := newRobotsSite(t, false)
	close(site.gate)
	e := warmEnv(t, site, true)
	e.br.Warm(e.ctx, e.spec, e.urls, nil)
	out, err := e.run()
	require.NoError(t, err)
	assert.Equal(t, 1, out.Success)
	assert.EqualValues(t, 0, site.robotsHits.Load(), "robots.txt never requested")
}

// warmCalls records the Warm calls of a Local Runner.
type warmCalls struct {
	mu      sync.Mutex
	calls   [][]string
	claimed chan struct{} // what Warm returns (nil: closed)
}

func (w *warmCalls) Warm(_ context.Context, spec jobs.Spec, seeds []string, _ <-chan struct{}) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls = append(w.calls, append([]string{spec.ID}, seeds...))
	if w.claimed != nil {
		return w.claimed
	}
	done := make(chan struct{})
	close(done)
	return done
}

func (w *warmCalls) get() [][]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.calls)
}

// A new job's first JobAssign warms the worker's own Runner for the
// seeds (up to a first batch of them), whichever Runner gets them, and
// gives the seeds' batch to it when it is idle.
func TestJobAssignStartGivesTheSeedsToItsOwnIdleRunner(t *testing.T) {
	assign := func(f *fixture, spec jobs.Spec) {
		t.Helper()
		_, err := f.a.JobAssign(f.ctx, jobs.AssignInput{Spec: spec, Start: true})
		require.NoError(t, err)
	}
	seedHolder := func(f *fixture, job string) (string, int) {
		holder, n := "", 0
		for _, r := range f.runners {
			if tk := f.task(r); tk.Job != nil && tk.Job.ID == job && tk.Job.Size > 0 {
				holder, n = r, n+1
			}
		}
		return holder, n
	}
	t.Run("idle", func(t *testing.T) {
		f := newFixture(t, 3, 0)
		w := &warmCalls{}
		local := f.runners[2] // not the first in the hand-out's order
		f.a.Local = jobs.Local{Group: testGroup, Name: local, Runner: w}
		spec := f.spec("job-local", 0, "http://example.test/")
		assign(f, spec)
		holder, n := seedHolder(f, spec.ID)
		assert.Equal(t, 1, n)
		assert.Equal(t, local, holder, "the seed's batch went to the worker's own Runner")
		assert.Equal(t, [][]string{{spec.ID, "http://example.test/"}}, w.get())
	})
	t.Run("busy", func(t *testing.T) {
		f := newFixture(t, 3, 0)
		w := &warmCalls{}
		local := f.runners[2]
		f.a.Local = jobs.Local{Group: testGroup, Name: local, Runner: w}
		busy := roles.EmptyTask()
		busy.Job = &roles.JobRef{ID: "other", Batch: jobs.BatchID("other", 0), Size: 3}
		busy.Epoch, busy.Holder = 1, local
		f.setTask(local, busy)
		spec := f.spec("job-busy", 0, "http://example.test/")
		assign(f, spec)
		holder, n := seedHolder(f, spec.ID)
		assert.Equal(t, 1, n)
		assert.NotEqual(t, local, holder)
		assert.Equal(t, [][]string{{spec.ID, "http://example.test/"}}, w.get(), "warmed for the Runner that gets the seeds, on another worker")
	})
	t.Run("seeds over Runners", func(t *testing.T) {
		f := newFixture(t, 3, 0)
		w := &warmCalls{}
		f.a.Local = jobs.Local{Group: testGroup, Name: f.runners[2], Runner: w}
		spec := f.spec("job-spread", 0, seedURLs(3)...) // one seed per Runner
		assign(f, spec)
		assert.Equal(t, [][]string{append([]string{spec.ID}, seedURLs(3)...)}, w.get())
	})
	t.Run("seeds over a first batch", func(t *testing.T) {
		f := newFixture(t, 3, 0)
		w := &warmCalls{}
		f.a.Local = jobs.Local{Group: testGroup, Name: f.runners[2], Runner: w}
		assign(f, f.spec("job-many", 0, seedURLs(2*jobs.DefaultConcurrency+1)...))
		assert.Empty(t, w.get(), "more seeds than a first batch: none warmed")
	})
	t.Run("other workers' batches handed out once claimed", func(t *testing.T) {
		f := newFixture(t, 3, 0)
		w := &warmCalls{claimed: make(chan struct{})}
		local := f.runners[2]
		f.a.Local = jobs.Local{Group: testGroup, Name: local, Runner: w}
		spec := f.spec("job-claim", 0, "http://example.test/")
		done := make(chan error, 1)
		go func() {
			_, err := f.a.JobAssign(f.ctx, jobs.AssignInput{Spec: spec, Start: true})
			done <- err
		}()
		// The worker's own Runner gets the seeds at once: its fetches
		// wait for the warm-up in the process.
		eventually(t, func() bool {
			holder, n := seedHolder(f, spec.ID)
			return n == 1 && holder == local
		}, "the seeds' batch handed to the worker's own Runner before the claim")
		// The start batches of the other Runners (their Runners would
		// read the store for robots.txt) wait for the claim.
		batch := jobs.BatchID(spec.ID, 1)
		eventually(t, func() bool {
			infos, err := f.store.Batches(f.ctx, spec.ID, []string{batch})
			return err == nil && len(infos) == 1 && infos[0].Holder != ""
		}, "the next batch claimed in the store for another Runner")
		for _, r := range f.runners[:2] {
			assert.Nil(t, f.task(r).Job, "no Task of another worker's Runner (%s) names a batch before the warm-up claimed robots.txt", r)
		}
		close(w.claimed)
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(waitLimit):
			t.Fatal("JobAssign did not return once the warm-up claimed")
		}
		named := 0
		for _, r := range f.runners[:2] {
			if tk := f.task(r); tk.Job != nil && tk.Job.ID == spec.ID {
				named++
			}
		}
		assert.Equal(t, 2, named, "the other Runners' start batches handed out then")
	})
	t.Run("a warm-up that never claims", func(t *testing.T) {
		f := newFixture(t, 3, 0)
		w := &warmCalls{claimed: make(chan struct{})} // never closed: its store, or the seed's DNS, hangs
		f.a.Local = jobs.Local{Group: testGroup, Name: f.runners[2], Runner: w}
		spec := f.spec("job-stuck", 0, "http://example.test/")
		assign(f, spec)
		_, n := seedHolder(f, spec.ID)
		assert.Equal(t, 1, n, "handed out all the same, after a bounded wait")
	})
	t.Run("another group", func(t *testing.T) {
		f := newFixture(t, 3, 0)
		w := &warmCalls{}
		f.a.Local = jobs.Local{Group: "elsewhere", Name: f.runners[2], Runner: w}
		assign(f, f.spec("job-group", 0, "http://example.test/"))
		assert.Empty(t, w.get())
	})
}

// A new job's warm-up starts before the job is in the store (JobAssign
// stores it meanwhile): its robots.txt is fetched at once and kept in
// the store only once the job is there.
func TestWarmBeforeTheJobIsStored(t *testing.T) {
	site := newRobotsSite(t, false)
	close(site.gate)
	e := warmEnv(t, site, false)
	spec := e.spec
	spec.ID = "job-not-yet"
	reads := &robotsReads{Store: e.store}
	e.br.Store = reads
	stored := make(chan struct{})
	e.br.Warm(e.ctx, spec, e.urls, stored)
	eventually(t, func() bool { return site.robotsDone.Load() }, "robots.txt fetched before the job is stored")
	assert.Zero(t, reads.n.Load(), "the store read for a job it does not hold yet")
	_, ok, _ := e.store.Robots(e.ctx, spec.ID, site.URL)
	assert.False(t, ok, "kept before the job is stored")
	seeds, err := spec.SeedEntries(nil)
	require.NoError(t, err)
	_, err = e.store.CreateJob(e.ctx, spec, seeds)
	require.NoError(t, err)
	close(stored)
	eventually(t, func() bool {
		f, ok, err := e.store.Robots(e.ctx, spec.ID, site.URL)
		return err == nil && ok && !f.Fetching
	}, "robots.txt kept once the job is stored")
	assert.EqualValues(t, 1, site.robotsHits.Load())
}

// robotsReads counts the reads of robots.txt files its Runner's store
// answered, and the claims (RobotsFile.Fetching) among them.
type robotsReads struct {
	jobs.Store
	n, claims atomic.Int32
}

func (c *robotsReads) Robots(ctx context.Context, job, origin string) (crawl.RobotsFile, bool, error) {
	c.n.Add(1)
	f, ok, err := c.Store.Robots(ctx, job, origin)
	if f.Fetching {
		c.claims.Add(1)
	}
	return f, ok, err
}

// A new job's warm-up on one worker claims its seed's robots.txt in the
// store; a batch of the seed on another worker waits for that file
// instead of fetching robots.txt again, and fetches the seed once it is
// kept: robots.txt fetched once for the job, before the page.
func TestWarmOnAnotherWorkerIsWaitedFor(t *testing.T) {
	site := newRobotsSite(t, false)
	e := warmEnv(t, site, false) // the worker whose Runner holds the batch
	reads := &robotsReads{Store: e.store}
	e.br.Store = reads
	other := &jobs.BatchRunner{Store: e.store, Pages: crawl.NewEngine(), Concurrency: 2} // the worker that warms
	claimed := other.Warm(e.ctx, e.spec, e.urls, nil)
	select {
	case <-claimed:
	case <-time.After(waitLimit):
		t.Fatal("the warm-up did not claim robots.txt")
	}
	eventually(t, func() bool { return site.robotsHits.Load() == 1 }, "robots.txt requested by the warm-up")
	done := e.runAsync()
	eventually(t, func() bool { return reads.claims.Load() > 0 }, "the batch's Runner read the claim")
	assert.EqualValues(t, 1, site.robotsHits.Load(), "the batch's Runner did not fetch robots.txt itself")
	close(site.gate)
	out, err := e.wait(done)
	require.NoError(t, err)
	assert.Equal(t, 1, out.Success, "the root recorded")
	assert.EqualValues(t, 1, site.robotsHits.Load(), "robots.txt fetched once for the job")
	assert.EqualValues(t, 1, site.pageHits.Load())
	assert.False(t, site.pageEarly.Load(), "the root was requested only once robots.txt was answered")
}

// A claim whose warm-up never keeps the file (its worker died) holds a
// batch back only until it runs out: the batch's Runner fetches
// robots.txt itself then.
func TestARobotsClaimThatRunsOutIsFetchedAgain(t *testing.T) {
	site := newRobotsSite(t, false)
	close(site.gate)
	e := warmEnv(t, site, false)
	require.NoError(t, e.store.PutRobots(e.ctx, e.spec.ID, site.URL, crawl.RobotsFile{Fetching: true, TTL: 300 * time.Millisecond}))
	out, err := e.run()
	require.NoError(t, err)
	assert.Equal(t, 1, out.Success)
	assert.EqualValues(t, 1, site.robotsHits.Load(), "fetched by the batch's Runner, once the claim ran out")
	assert.False(t, site.pageEarly.Load())
}
