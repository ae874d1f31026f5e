package storetest

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/roles"
)

// The group's budget per host (jobs.PolitenessGroup): a host's
// parallelism and delay hold across every running job of the store that
// keeps it, the stricter job's where they differ; a job with
// jobs.PolitenessJob keeps its own. Each subtest crawls a host of its own
// (the suite's subtests may share a database).

// ownHost is a host name no other subtest crawls.
func ownHost(t *testing.T) string {
	return strings.ToLower(strings.ReplaceAll(JobID(t, "h"), "_", "-")) + ".example"
}

// scopedJob creates a job of seeds keeping the budget of scope, whose
// options mod sets, and returns its ID.
func (f *fixture) scopedJob(tag, scope string, mod func(*crawl.Options, *roles.Timers), seeds ...string) string {
	f.t.Helper()
	id := JobID(f.t, tag)
	spec := Spec(id, 0, seeds...)
	spec.Options.AllowedDomains, spec.PolitenessScope = nil, scope
	mod(&spec.Options, &spec.Timers)
	_, err := f.s.CreateJob(f.ctx, spec, Entries(0, seeds...))
	require.NoError(f.t, err, "CreateJob %s", id)
	return id
}

// finish records the batch's URLs and finishes it (its leases go).
func (f *fixture) finish(job, batch, holder string) {
	f.t.Helper()
	for _, e := range f.entries(job, batch) {
		f.record(job, batch, holder, 1, e.URL)
	}
	_, err := f.s.FinishBatch(f.ctx, job, batch, 1)
	require.NoError(f.t, err, "FinishBatch %s %s", job, batch)
}

// With a delay, a host is one batch's at a time across the jobs keeping
// the group's budget: a second job gets none of its URLs while the first
// holds it, and once it is released, the second job's first request
// waits for the delay from the first job's release. A job keeping its
// own budget takes the host meanwhile.
func testHostDelayAcrossJobs(t *testing.T, f *fixture) {
	host := ownHost(t)
	delayed := func(o *crawl.Options, _ *roles.Timers) {
		o.Parallelism, o.Delay, o.IgnoreRobots = 2, 400*time.Millisecond, true
	}
	first := f.scopedJob("first", jobs.PolitenessGroup, delayed, hostURLs(host, 4)...)
	second := f.scopedJob("second", "", delayed, hostURLs(host, 4)...) // empty: the group's
	own := f.scopedJob("own", jobs.PolitenessJob, delayed, hostURLs(host, 4)...)

	require.Len(t, f.takeAs(first, "b1", "r1", 2), 2)
	_, got := f.take(second, "b1", 2)
	assert.Empty(t, got, "the host is held by the first job")
	assert.False(t, f.available(second), "nothing the second job could take")
	assert.Len(t, f.takeAs(own, "b1", "r3", 2), 2, "a job keeping its own budget takes the host")

	f.finish(first, "b1", "r1")
	require.True(t, f.available(second), "the host released")
	require.Len(t, f.takeAs(second, "b2", "r2", 2), 2)
	l := f.leases(second, "b2")[host]
	assert.True(t, l.Exclusive)
	assert.Greater(t, l.Wait, time.Duration(0), "the first request waits for the delay from the first job's release")
	assert.LessOrEqual(t, l.Wait, 400*time.Millisecond)
	_, got = f.take(first, "b3", 2)
	assert.Empty(t, got, "now the second job holds the host")
}

// Where the jobs sharing a host differ, the stricter wins: the first
// request of a job with a short delay after a job with a long one waits
// for the long one, and a job with a lower parallelism takes no share of
// a host whose holders are in flight up to it.
func testHostStricterAcrossJobs(t *testing.T, f *fixture) {
	host := ownHost(t)
	slow := f.scopedJob("slow", jobs.PolitenessGroup, func(o *crawl.Options, _ *roles.Timers) {
		o.Parallelism, o.Delay, o.IgnoreRobots = 1, 800*time.Millisecond, true
	}, hostURLs(host, 2)...)
	fast := f.scopedJob("fast", jobs.PolitenessGroup, func(o *crawl.Options, _ *roles.Timers) {
		o.Parallelism, o.Delay, o.IgnoreRobots = 1, 10*time.Millisecond, true
	}, hostURLs(host, 2)...)
	require.Len(t, f.takeAs(slow, "b1", "r1", 2), 2)
	f.finish(slow, "b1", "r1")
	require.Len(t, f.takeAs(fast, "b1", "r2", 2), 2)
	assert.Greater(t, f.leases(fast, "b1")[host].Wait, 400*time.Millisecond, "the slow job's delay from its release, not the fast job's")

	shared := ownHost(t)
	wide := func(p int) func(*crawl.Options, *roles.Timers) {
		return func(o *crawl.Options, _ *roles.Timers) { o.Parallelism, o.IgnoreRobots = p, true }
	}
	a := f.scopedJob("a", jobs.PolitenessGroup, wide(4), hostURLs(shared, 10)...)
	b := f.scopedJob("b", jobs.PolitenessGroup, wide(4), hostURLs(shared, 10)...)
	narrow := f.scopedJob("narrow", jobs.PolitenessGroup, wide(2), hostURLs(shared, 10)...)
	require.Len(t, f.takeAs(a, "b1", "r1", 3), 3)
	require.Len(t, f.takeAs(b, "b1", "r2", 3), 3, "another job shares the host")
	assert.Equal(t, 3, f.leases(a, "b1")[shared].Share)
	assert.Equal(t, 1, f.leases(b, "b1")[shared].Share, "what the first job left of 4")
	_, got := f.take(narrow, "b1", 2)
	assert.Empty(t, got, "4 in flight: over the narrow job's 2")
	p := f.pull(a, "b1", 1, 0, 1)
	assert.Equal(t, []jobs.HostLease{{Host: shared, Share: 1}}, p.Hosts, "shrunk to 1")
	_, got = f.take(narrow, "b1", 2)
	assert.Empty(t, got, "2 in flight: the narrow job's 2 are used")
	f.finish(b, "b1", "r2")
	require.Len(t, f.takeAs(narrow, "b2", "r3", 2), 2, "a share is free")
	assert.Equal(t, 1, f.leases(narrow, "b2")[shared].Share, "1 in flight: 1 left of the narrow job's 2")
}

// A lease of a job whose Runner stopped renewing it blocks the other
// jobs of the group up to its TTL, not longer; that job's batch then
// finds the host lost.
func testHostLeaseExpiryAcrossJobs(t *testing.T, f *fixture) {
	host := ownHost(t)
	fast := func(o *crawl.Options, tm *roles.Timers) {
		o.Parallelism, o.Delay, o.IgnoreRobots = 2, 10*time.Millisecond, true
		*tm = roles.FastTimers()
	}
	dead := f.scopedJob("dead", jobs.PolitenessGroup, fast, hostURLs(host, 4)...)
	next := f.scopedJob("next", jobs.PolitenessGroup, fast, hostURLs(host, 4)...)
	ttl := jobs.LeaseTTL(roles.FastTimers())
	require.Len(t, f.takeAs(dead, "b1", "r1", 2), 2)
	renewed := time.Now()
	f.pull(dead, "b1", 1, 0, 2)
	_, took := f.takeOnceExpired(next, "b1", 2, renewed, ttl)
	assert.GreaterOrEqual(t, took, ttl-time.Second, "taken %v after the renewal, TTL %v", took, ttl)
	f.claim(next, "b1", "r2", 1)
	p := f.pull(dead, "b1", 1, 2, 2)
	assert.Empty(t, p.Entries)
	assert.Empty(t, p.Hosts, "the dead job's batch lost the host to the other job")
	assert.Contains(t, f.leases(next, "b1"), host)
}
