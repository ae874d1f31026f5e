package crawl

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// memRobots is a RobotsStore in memory, counting its loads and saves.
type memRobots struct {
	scope        string
	mu           sync.Mutex
	files        map[string]RobotsFile
	saved        map[string]time.Time
	loads, saves atomic.Int32
}

func newMemRobots(scope string) *memRobots {
	return &memRobots{scope: scope, files: map[string]RobotsFile{}, saved: map[string]time.Time{}}
}

func (m *memRobots) Scope() string { return m.scope }

func (m *memRobots) LoadRobots(_ context.Context, origin string) (RobotsFile, bool, error) {
	m.loads.Add(1)
	m.mu.Lock()
	defer m.mu.Unlock()
	f, ok := m.files[origin]
	if !ok {
		return f, false, nil
	}
	f.TTL -= time.Since(m.saved[origin])
	return f, f.TTL > 0, nil
}

func (m *memRobots) SaveRobots(_ context.Context, origin string, f RobotsFile) error {
	m.saves.Add(1)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.files[origin], m.saved[origin] = f, time.Now()
	return nil
}

// Two Engines (two workers) crawling one job with its robots.txt store:
// the first fetches robots.txt and keeps it there, with its Crawl-delay;
// the second reads it from the store and never asks the site; a job of
// its own (another scope) fetches it again.
func TestRobotsKeptInTheJobsStoreAreFetchedOncePerJob(t *testing.T) {
	t.Parallel()
	var robots atomic.Int32
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			robots.Add(1)
			fmt.Fprint(w, "User-agent: *\nDisallow: /private/\nCrawl-delay: 0.05\n")
			return
		}
		fmt.Fprint(w, "<title>ok</title>")
	})
	store := newMemRobots("job-1")
	o := testOptions()
	o.Robots = store
	first, second := NewEngine(), NewEngine()
	p := first.Fetch(context.Background(), get(srv.URL+"/a"), Auth{}, 0, o)
	require.Empty(t, p.Error)
	require.Equal(t, int32(1), robots.Load())
	require.Equal(t, int32(1), store.saves.Load())
	origin := "http://" + HostKey(srv.URL+"/")
	f, ok, err := store.LoadRobots(context.Background(), origin)
	require.NoError(t, err)
	require.True(t, ok, "kept under its origin %s", origin)
	assert.Equal(t, 200, f.Status)
	assert.Equal(t, 50*time.Millisecond, f.CrawlDelay, "the Crawl-delay for the fetch's User-Agent")
	assert.Greater(t, f.TTL, 59*time.Minute)

	p = second.Fetch(context.Background(), get(srv.URL+"/private/x"), Auth{}, 0, o)
	assert.True(t, p.Disallowed, "the kept rules apply: %+v", p)
	p = second.Fetch(context.Background(), get(srv.URL+"/b"), Auth{}, 0, o)
	require.Empty(t, p.Error)
	assert.Equal(t, int32(1), robots.Load(), "the second Engine read robots.txt from the store")
	assert.Equal(t, int32(1), store.saves.Load())

	other := newMemRobots("job-2")
	o.Robots = other
	p = second.Fetch(context.Background(), get(srv.URL+"/c"), Auth{}, 0, o)
	require.Empty(t, p.Error)
	assert.Equal(t, int32(2), robots.Load(), "another job keeps its own")
	assert.Equal(t, int32(1), other.saves.Load())
}

// An unreachable robots.txt is kept for a minute (and allows all); a 5xx
// one disallows all for a minute, from the store too.
func TestRobotsKeptWithTheirFailures(t *testing.T) {
	t.Parallel()
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, "<title>ok</title>")
	})
	store := newMemRobots("job")
	o := testOptions()
	o.Robots = store
	p := NewEngine().Fetch(context.Background(), get(srv.URL+"/a"), Auth{}, 0, o)
	require.True(t, p.Disallowed, "%+v", p)
	f, ok, _ := store.LoadRobots(context.Background(), "http://"+HostKey(srv.URL))
	require.True(t, ok)
	assert.Equal(t, 503, f.Status)
	assert.LessOrEqual(t, f.TTL, robotsFailTTL)
	p = NewEngine().Fetch(context.Background(), get(srv.URL+"/b"), Auth{}, 0, o)
	assert.True(t, p.Disallowed, "the kept 503 disallows all: %+v", p)
	assert.Contains(t, p.Error, "HTTP 503")
}

// NotBefore holds the first request of a fetch back (a host lease handed
// over with the last request's time), and a deadline before it fails the
// fetch at once.
func TestNotBeforeHoldsTheFirstRequest(t *testing.T) {
	t.Parallel()
	srv, rc := serverTimes(t, "")
	o := testOptions()
	o.IgnoreRobots = true
	start := time.Now()
	o.NotBefore = start.Add(200 * time.Millisecond)
	p := NewEngine().Fetch(context.Background(), get(srv.URL+"/a"), Auth{}, 0, o)
	require.True(t, p.OK(), p.Error)
	reqs := rc.all()
	require.Len(t, reqs, 1)
	assert.GreaterOrEqual(t, reqs[0].At.Sub(start), 200*time.Millisecond)

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	o.NotBefore = time.Now().Add(time.Hour)
	p = NewEngine().Fetch(ctx, get(srv.URL+"/b"), Auth{}, 0, o)
	assert.Contains(t, p.Error, "deadline")
}

func TestHostKey(t *testing.T) {
	for raw, want := range map[string]string{
		"http://Example.com/a":       "example.com",
		"http://example.com:80/a":    "example.com",
		"https://example.com:443/":   "example.com",
		"http://example.com:8080/x":  "example.com:8080",
		"http://127.0.0.2:1234/page": "127.0.0.2:1234",
		"not a url":                  "",
		"/relative":                  "",
	} {
		assert.Equal(t, want, HostKey(raw), raw)
	}
}

// blockingRobots is a memRobots whose saves wait until release is closed.
type blockingRobots struct {
	*memRobots
	release chan struct{}
}

func (b *blockingRobots) SaveRobots(ctx context.Context, origin string, f RobotsFile) error {
	<-b.release
	return b.memRobots.SaveRobots(ctx, origin, f)
}

// A Fetch that comes while WarmRobots gets robots.txt waits for its
// rules, not for the store's write of the file as well (a job's first
// page is not held up by it); the file is still fetched once and kept.
func TestWarmedRobotsDoNotWaitForTheStore(t *testing.T) {
	t.Parallel()
	var robots, pages atomic.Int32
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			robots.Add(1)
			fmt.Fprint(w, "User-agent: *\nDisallow: /private/\n")
			return
		}
		pages.Add(1)
		fmt.Fprint(w, "<title>ok</title>")
	})
	store := &blockingRobots{memRobots: newMemRobots("job-1"), release: make(chan struct{})}
	o := testOptions()
	o.Robots = store
	e := NewEngine()
	e.WarmRobots(context.Background(), get(srv.URL+"/a"), Auth{}, 0, o)
	require.Eventually(t, func() bool { return robots.Load() == 1 }, 10*time.Second, time.Millisecond, "the warm-up asks for robots.txt")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p := e.Fetch(ctx, get(srv.URL+"/a"), Auth{}, 0, o)
	require.Empty(t, p.Error, "the page waited for the store's write of robots.txt")
	assert.Equal(t, int32(1), pages.Load(), "the page was fetched while the store's write waited")
	assert.Equal(t, int32(0), store.saves.Load(), "not kept yet")
	close(store.release)
	origin := "http://" + HostKey(srv.URL+"/")
	require.Eventually(t, func() bool {
		_, ok, _ := store.LoadRobots(context.Background(), origin)
		return ok
	}, 10*time.Second, time.Millisecond, "kept in the store once its write could go on")
	assert.Equal(t, int32(1), robots.Load(), "robots.txt fetched once")
	assert.Contains(t, e.Fetch(context.Background(), get(srv.URL+"/private/x"), Auth{}, 0, o).Error, "disallowed", "its rules obeyed")
}

// While another worker fetches a robots.txt (a new job's warm-up), a
// batch waiting for it reads the store every robotsClaimPoll for the
// first robotsClaimSteady: a fetch of a nearby site is kept tens of
// milliseconds after the claim, and a read that backs off finds it late
// (from 2 ms growing by half each read, the file of a 20 ms fetch was
// read about 5 ms after it was kept, and the crawl's first page waited
// for it). Then the reads slow down, to at most robotsClaimMaxPoll.
func TestClaimedRobotsAreReadSteadilyWhileANearbyFetchMayAnswer(t *testing.T) {
	var at, last time.Duration
	for at < robotsClaimSteady {
		p := claimPoll(at)
		assert.Equal(t, robotsClaimPoll, p, "read again after %v of waiting", at)
		at += p
	}
	for ; at < 10*time.Second; at += last {
		p := claimPoll(at)
		assert.GreaterOrEqual(t, p, last, "never faster as the wait goes on (%v)", at)
		assert.LessOrEqual(t, p, robotsClaimMaxPoll, "at %v", at)
		last = p
	}
	assert.Equal(t, robotsClaimMaxPoll, last, "a slow fetch is read every robotsClaimMaxPoll")
}
