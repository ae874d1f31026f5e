package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/roles"
)

// The host leases (RunnerStore.Pull): the job's parallelism and delay per
// host hold across its batches, whichever Runners hold them.

// hostURL names a page of host.
func hostURL(host, path string) string { return "https://" + host + "/" + path }

// hostURLs names n pages of host.
func hostURLs(host string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = hostURL(host, fmt.Sprintf("p%03d", i))
	}
	return out
}

// politeJob creates a job of seeds whose options mod sets (parallelism,
// delay, robots) and returns its ID.
func (f *fixture) politeJob(tag string, mod func(*crawl.Options, *roles.Timers), seeds ...string) string {
	f.t.Helper()
	id := JobID(f.t, tag)
	spec := Spec(id, 0, seeds...)
	spec.Options.AllowedDomains = nil
	mod(&spec.Options, &spec.Timers)
	_, err := f.s.CreateJob(f.ctx, spec, Entries(0, seeds...))
	require.NoError(f.t, err, "CreateJob %s", id)
	return id
}

// takeAs takes batch id of up to n URLs and claims it for holder at epoch
// 1; it returns the URLs taken.
func (f *fixture) takeAs(job, id, holder string, n int) []string {
	f.t.Helper()
	b, got := f.take(job, id, n)
	if b.Size > 0 {
		f.claim(job, id, holder, 1)
	}
	return got
}

// pull pulls up to n URLs into batch id (held at epoch) as a Runner
// wanting want requests in flight.
func (f *fixture) pull(job, id string, epoch int64, n, want int) jobs.Pulled {
	f.t.Helper()
	p, err := f.s.Pull(f.ctx, job, id, epoch, n, want)
	require.NoError(f.t, err, "Pull %s %s@%d", job, id, epoch)
	return p
}

func (f *fixture) leases(job, id string) map[string]jobs.HostLease {
	f.t.Helper()
	ls, err := f.s.Leases(f.ctx, job, id)
	require.NoError(f.t, err, "Leases %s %s", job, id)
	out := map[string]jobs.HostLease{}
	for _, l := range ls {
		out[l.Host] = l
	}
	return out
}

func (f *fixture) available(job string) bool {
	f.t.Helper()
	ok, err := f.s.Available(f.ctx, job)
	require.NoError(f.t, err, "Available %s", job)
	return ok
}

// With a delay, a host is one batch's at a time: a second batch gets
// none of its URLs (however many are queued) but the URLs of another
// host, and the holder pulls the rest of its host's URLs.
func testHostLeasesExclusive(t *testing.T, f *fixture) {
	seeds := append(hostURLs("a.example", 6), hostURLs("b.example", 2)...)
	job := f.politeJob("j", func(o *crawl.Options, _ *roles.Timers) {
		o.Parallelism, o.Delay, o.IgnoreRobots = 2, 50*time.Millisecond, true
	}, seeds...)
	got := f.takeAs(job, "b1", "r1", 2)
	assert.Equal(t, hostURLs("a.example", 2), got, "frontier order, one host leased")
	assert.Equal(t, map[string]jobs.HostLease{"a.example": {Host: "a.example", Share: 2, Exclusive: true}}, f.leases(job, "b1"))

	got = f.takeAs(job, "b2", "r2", 5)
	assert.Equal(t, hostURLs("b.example", 2), got, "a.example is b1's: only b.example's URLs")
	_, got = f.take(job, "b3", 5)
	assert.Empty(t, got, "every queued URL is of a host held")
	assert.False(t, f.available(job), "nothing a new batch could take")

	p := f.pull(job, "b1", 1, 10, 4)
	assert.Equal(t, Entries(0, hostURLs("a.example", 6)[2:]...), p.Entries, "the holder pulls the rest of its host")
	assert.Equal(t, []jobs.HostLease{{Host: "a.example", Share: 2, Exclusive: true}}, p.Hosts)
	assert.Equal(t, jobs.LeaseTTL(Spec(job, 0).Timers), p.TTL)
	assert.Empty(t, f.pull(job, "b2", 1, 10, 4).Entries)
}

// Without a delay (robots.txt ignored), a host's parallelism is shared:
// each batch takes a share of at most what it wants in flight, the shares
// add up to at most the parallelism, and a holder's pull sizes its share
// to what it wants (shrinking it leaves the rest to the others).
func testHostLeasesShares(t *testing.T, f *fixture) {
	job := f.politeJob("j", func(o *crawl.Options, _ *roles.Timers) { o.Parallelism, o.IgnoreRobots = 4, true }, hostURLs("a.example", 20)...)
	require.Len(t, f.takeAs(job, "b1", "r1", 3), 3)
	require.Len(t, f.takeAs(job, "b2", "r2", 3), 3, "another batch shares the host")
	assert.Equal(t, 3, f.leases(job, "b1")["a.example"].Share, "a batch of 3 wants 3 in flight")
	assert.Equal(t, 1, f.leases(job, "b2")["a.example"].Share, "what b1 left of 4")
	assert.False(t, f.leases(job, "b2")["a.example"].Exclusive)
	_, got := f.take(job, "b3", 3)
	assert.Empty(t, got, "the host's 4 are shared out")
	assert.False(t, f.available(job))

	// b1 wants 2 at once: its share shrinks, b2 grows into it on its pull.
	p := f.pull(job, "b1", 1, 0, 2)
	assert.Equal(t, []jobs.HostLease{{Host: "a.example", Share: 2}}, p.Hosts)
	assert.True(t, f.available(job), "a share is free")
	p = f.pull(job, "b2", 1, 2, 8)
	assert.Len(t, p.Entries, 2)
	assert.Equal(t, []jobs.HostLease{{Host: "a.example", Share: 2}}, p.Hosts, "grown to what b1 left")
	assert.False(t, f.available(job))

	// Pulls from many batches at once never share out more than 4.
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := f.s.TakeBatch(f.ctx, job, fmt.Sprintf("c%d", i), 2)
			assert.NoError(t, err)
		}()
	}
	wg.Wait()
	total := 0
	for _, id := range []string{"b1", "b2", "c0", "c1", "c2", "c3", "c4", "c5"} {
		total += f.leases(job, id)["a.example"].Share
	}
	assert.Equal(t, 4, total, "the shares of the host add up to its parallelism")
}

// A host whose robots.txt is not known yet is one batch's (its holder
// fetches robots.txt, once for the job); once kept without a
// Crawl-delay, its parallelism is shared; with one, it stays one batch's
// and its Crawl-delay holds the next holder back.
func testHostLeasesFollowRobots(t *testing.T, f *fixture) {
	seeds := append(hostURLs("a.example", 10), hostURLs("slow.example", 4)...)
	job := f.politeJob("j", func(o *crawl.Options, _ *roles.Timers) { o.Parallelism, o.IgnoreRobots = 4, false }, seeds...)
	require.Len(t, f.takeAs(job, "b1", "r1", 2), 2)
	assert.True(t, f.leases(job, "b1")["a.example"].Exclusive, "robots.txt not known: one batch's")
	assert.Equal(t, 4, f.leases(job, "b1")["a.example"].Share)
	assert.Equal(t, hostURLs("slow.example", 2), f.takeAs(job, "b2", "r2", 2))

	_, ok, err := f.s.Robots(f.ctx, job, "https://a.example")
	require.NoError(t, err)
	require.False(t, ok, "none kept yet")
	require.NoError(t, f.s.PutRobots(f.ctx, job, "https://a.example", crawl.RobotsFile{Status: 200, Body: []byte("User-agent: *\nDisallow: /x\n"), TTL: time.Hour}))
	require.NoError(t, f.s.PutRobots(f.ctx, job, "https://slow.example", crawl.RobotsFile{Status: 200, Body: []byte("Crawl-delay: 0.3\n"), TTL: time.Hour, CrawlDelay: 300 * time.Millisecond}))
	kept, ok, err := f.s.Robots(f.ctx, job, "https://a.example")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, 200, kept.Status)
	assert.Equal(t, "User-agent: *\nDisallow: /x\n", string(kept.Body))
	assert.InDelta(t, time.Hour, kept.TTL, float64(time.Minute))
	require.Error(t, f.s.PutRobots(f.ctx, job, "https://a.example/robots.txt", kept), "an origin, not a URL")

	// b1's next pull finds a.example shared: its share shrinks to what it
	// wants, and another batch takes the rest.
	p := f.pull(job, "b1", 1, 0, 2)
	assert.Equal(t, []jobs.HostLease{{Host: "a.example", Share: 2}}, p.Hosts)
	assert.Equal(t, hostURLs("a.example", 10)[2:4], f.takeAs(job, "b3", "r3", 2))
	assert.Equal(t, 2, f.leases(job, "b3")["a.example"].Share)

	// slow.example stays b2's; released, its next holder waits for the
	// Crawl-delay from the release.
	assert.Equal(t, map[string]jobs.HostLease{"slow.example": {Host: "slow.example", Share: 4, Exclusive: true}}, f.leases(job, "b2"))
	for _, u := range hostURLs("slow.example", 2) {
		f.record(job, "b2", "r2", 1, u)
	}
	_, err = f.s.FinishBatch(f.ctx, job, "b2", 1)
	require.NoError(t, err)
	assert.Equal(t, hostURLs("slow.example", 4)[2:], f.takeAs(job, "b4", "r2", 2))
	l := f.leases(job, "b4")["slow.example"]
	assert.True(t, l.Exclusive)
	assert.Greater(t, l.Wait, time.Duration(0), "the Crawl-delay from the release")
	assert.LessOrEqual(t, l.Wait, 300*time.Millisecond)
}

// A claim on a robots.txt's fetch (a new job's warm-up fetches it) is
// read as such, with what is left of it, until the file replaces it or it
// runs out; it never replaces a file, and the hand-outs do not take it
// for the host's robots.txt known: the host stays one batch's.
func testRobotsClaim(t *testing.T, f *fixture) {
	job := f.politeJob("j", func(o *crawl.Options, _ *roles.Timers) { o.Parallelism, o.IgnoreRobots = 4, false }, hostURLs("a.example", 10)...)
	claim := crawl.RobotsFile{Fetching: true, TTL: time.Hour}
	require.NoError(t, f.s.PutRobots(f.ctx, job, "https://a.example", claim))
	require.NoError(t, f.s.PutRobots(f.ctx, job, "https://a.example", claim), "claimed again: kept as it is")
	got, ok, err := f.s.Robots(f.ctx, job, "https://a.example")
	require.NoError(t, err)
	require.True(t, ok)
	assert.True(t, got.Fetching)
	assert.Zero(t, got.Status)
	assert.Empty(t, got.Body)
	assert.InDelta(t, time.Hour, got.TTL, float64(time.Minute))
	require.Len(t, f.takeAs(job, "b1", "r1", 2), 2)
	assert.True(t, f.leases(job, "b1")["a.example"].Exclusive, "a claim is not the robots.txt known")

	file := crawl.RobotsFile{Status: 200, Body: []byte("User-agent: *\nDisallow: /x\n"), TTL: time.Hour}
	require.NoError(t, f.s.PutRobots(f.ctx, job, "https://a.example", file))
	require.NoError(t, f.s.PutRobots(f.ctx, job, "https://a.example", claim), "a claim after the file")
	got, ok, err = f.s.Robots(f.ctx, job, "https://a.example")
	require.NoError(t, err)
	require.True(t, ok)
	assert.False(t, got.Fetching, "the file replaced the claim, and a claim does not replace it")
	assert.Equal(t, 200, got.Status)
	assert.Equal(t, string(file.Body), string(got.Body))
	p := f.pull(job, "b1", 1, 0, 2)
	assert.Equal(t, []jobs.HostLease{{Host: "a.example", Share: 2}}, p.Hosts, "known now: shared")

	require.NoError(t, f.s.PutRobots(f.ctx, job, "https://b.example", crawl.RobotsFile{Fetching: true, TTL: 50 * time.Millisecond}))
	assert.Eventually(t, func() bool {
		_, ok, err := f.s.Robots(f.ctx, job, "https://b.example")
		return err == nil && !ok
	}, 10*time.Second, 10*time.Millisecond, "a claim that ran out is no file")
}

// A lease expires its TTL after its last renewal: a batch that stopped
// pulling (its Runner gone, nobody re-queued it) loses its host to the
// next batch then, not before; the first batch's next pull finds it lost.
// takeOnceExpired takes up to n URLs into job's batch as soon as it can,
// which is once the lease renewed at renewed (whose TTL is ttl) has
// expired, and says how long after the renewal that was. A lease still
// held ttl + 10 s after its renewal fails the test.
func (f *fixture) takeOnceExpired(job, batch string, n int, renewed time.Time, ttl time.Duration) ([]string, time.Duration) {
	t := f.t
	t.Helper()
	deadline := renewed.Add(ttl + 10*time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		require.True(t, time.Now().Before(deadline), "the lease never expired (TTL %v)", ttl)
		if _, got := f.take(job, batch, n); len(got) > 0 {
			return got, time.Since(renewed)
		}
		<-tick.C
	}
}

func testHostLeaseExpiry(t *testing.T, f *fixture) {
	job := f.politeJob("j", func(o *crawl.Options, tm *roles.Timers) {
		o.Parallelism, o.Delay, o.IgnoreRobots = 2, 10*time.Millisecond, true
		*tm = roles.FastTimers()
	}, hostURLs("a.example", 6)...)
	ttl := jobs.LeaseTTL(roles.FastTimers())
	require.Len(t, f.takeAs(job, "b1", "r1", 2), 2)
	renewed := time.Now()
	f.pull(job, "b1", 1, 0, 2)
	got, took := f.takeOnceExpired(job, "b2", 2, renewed, ttl)
	assert.GreaterOrEqual(t, took, ttl-time.Second, "taken %v after b1's renewal, TTL %v", took, ttl)
	f.claim(job, "b2", "r2", 1)
	assert.Equal(t, hostURLs("a.example", 4)[2:], got)
	p := f.pull(job, "b1", 1, 2, 2)
	assert.Empty(t, p.Entries)
	assert.Empty(t, p.Hosts, "b1 lost a.example to b2")
	assert.Contains(t, f.leases(job, "b2"), "a.example")
}

// A hand-over (Claim by another holder at a higher epoch) keeps the
// batch's leases: no other batch gets the host meanwhile, and the new
// holder's first request waits for the delay from the hand-over.
func testHostLeaseHandOver(t *testing.T, f *fixture) {
	job := f.politeJob("j", func(o *crawl.Options, _ *roles.Timers) {
		// A delay no loaded machine outlasts between the claim and the
		// pull (nothing here waits for it).
		o.Parallelism, o.Delay, o.IgnoreRobots = 2, 10*time.Second, true
	},
		hostURLs("a.example", 6)...)
	require.Len(t, f.takeAs(job, "b1", "r1", 2), 2)
	f.claim(job, "b1", "r2", 2)
	_, got := f.take(job, "b2", 2)
	assert.Empty(t, got, "the host goes with the batch")
	_, err := f.s.Pull(f.ctx, job, "b1", 1, 2, 2)
	requireStale(t, err, "Pull by the old holder")
	p := f.pull(job, "b1", 2, 2, 2)
	assert.Len(t, p.Entries, 2, "the new holder pulls the host's URLs")
	require.Len(t, p.Hosts, 1)
	assert.Equal(t, "a.example", p.Hosts[0].Host)
	assert.Greater(t, p.Hosts[0].Wait, time.Duration(0), "the delay from the hand-over")
	assert.LessOrEqual(t, p.Hosts[0].Wait, 10*time.Second)
}

// A batch's leases go when it ends (FinishBatch, FailBatch), gives its
// URLs back (Release) or is re-queued (Requeue), and when it has no
// unfinished URL of the host left (its next pull).
func testHostLeaseRelease(t *testing.T, f *fixture) {
	exclusive := func(o *crawl.Options, _ *roles.Timers) {
		o.Parallelism, o.Delay, o.IgnoreRobots = 2, time.Millisecond, true
	}
	job := f.politeJob("j", exclusive, hostURLs("a.example", 20)...)
	next := func(id string) {
		t.Helper()
		_, got := f.take(job, id, 2)
		require.Len(t, got, 2, "%s takes the host", id)
		f.claim(job, id, "r-"+id, 1)
	}
	blocked := func(why string) {
		t.Helper()
		assert.False(t, f.available(job), "held: %s", why)
	}

	next("finished")
	blocked("finished")
	for _, e := range f.entries(job, "finished") {
		f.record(job, "finished", "r-finished", 1, e.URL)
	}
	_, err := f.s.FinishBatch(f.ctx, job, "finished", 1)
	require.NoError(t, err)
	assert.Empty(t, f.leases(job, "finished"))

	next("failed")
	blocked("failed")
	require.NoError(t, f.s.FailBatch(f.ctx, job, "failed", 1, "cannot run"))
	assert.Empty(t, f.leases(job, "failed"))

	next("released")
	blocked("released")
	_, err = f.s.Release(f.ctx, job, "released", 1)
	require.NoError(t, err)
	assert.Empty(t, f.leases(job, "released"))

	next("requeued")
	blocked("requeued")
	_, err = f.s.Requeue(f.ctx, job, "requeued", 2)
	require.NoError(t, err)
	assert.Empty(t, f.leases(job, "requeued"), "a dead holder's hosts are free once its batch is re-queued")

	next("drained")
	for _, e := range f.entries(job, "drained") {
		f.record(job, "drained", "r-drained", 1, e.URL)
	}
	blocked("drained, before its next pull")
	p := f.pull(job, "drained", 1, 0, 2)
	assert.Empty(t, p.Hosts, "no unfinished URL of the host left")
	assert.True(t, f.available(job))
}

// A queue whose first few thousand URLs are all of a host another batch
// holds does not hide the hosts further on: a new batch gets their URLs.
func testHostLeasesLookPastAHeldHost(t *testing.T, f *fixture) {
	seeds := append(hostURLs("big.example", 3000), hostURLs("small.example", 3)...)
	job := f.politeJob("j", func(o *crawl.Options, _ *roles.Timers) {
		o.Parallelism, o.Delay, o.IgnoreRobots = 2, 10*time.Millisecond, true
	}, seeds...)
	require.Len(t, f.takeAs(job, "b1", "r1", 4), 4)
	assert.True(t, f.available(job), "small.example is free")
	assert.Equal(t, hostURLs("small.example", 3), f.takeAs(job, "b2", "r2", 10))
	assert.False(t, f.available(job))
}
