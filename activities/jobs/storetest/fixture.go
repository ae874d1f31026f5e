package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/roles"
)

// The fixture of a subtest and the helpers the subtests share.

// fixture bundles a subtest's store with helpers that fail the test on
// an unexpected error.
type fixture struct {
	t   *testing.T
	ctx context.Context
	s   jobs.Store
}

// JobID returns a valid job ID unique to t and tag (t's name, sanitised,
// and a random suffix).
func JobID(t testing.TB, tag string) string {
	var b strings.Builder
	for _, r := range t.Name() {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	rnd := make([]byte, 4)
	_, _ = rand.Read(rnd)
	suffix := "-" + tag + "-" + hex.EncodeToString(rnd)
	name := b.String()
	if over := len(name) + len(suffix) - 128; over > 0 {
		name = name[min(over, len(name)):]
	}
	name = strings.TrimLeft(name, "._-")
	if name == "" {
		name = "job"
	}
	id := name + suffix
	if err := jobs.ValidID(id); err != nil {
		t.Fatalf("storetest: made an invalid job id: %v", err)
	}
	return id
}

// URL names a test page.
func URL(path string) string { return "https://example.com/" + path }

// Spec returns a valid job spec.
func Spec(id string, maxPages int, seeds ...string) jobs.Spec {
	timers := roles.DefaultTimers()
	timers.UpdateTime, timers.UpdateTimeout, timers.HeartRhythmTimeout = 2*time.Second, 5*time.Second, 3
	opts := crawl.DefaultOptions()
	opts.Follow = true
	opts.MaxDepth = 5
	opts.AllowedDomains = []string{"example.com"}
	opts.Selectors = map[string]string{"h1": "h1"}
	// Every URL is of one host: a parallelism that leaves a share of it to
	// every batch, and robots.txt ignored (a host whose robots.txt is not
	// known is held by one batch), so that the batches of the other
	// subtests never wait for each other's host leases (hosts.go tests
	// those, with specs of their own); each job keeps its own budget per
	// host, as the subtests' jobs may share a database (crossjob.go tests
	// the group's budget, on hosts of their own).
	opts.Parallelism, opts.IgnoreRobots = 1024, true
	return jobs.Spec{
		PolitenessScope: jobs.PolitenessJob,
		ID:              id,
		Group:           "storetest",
		Seeds:           seeds,
		Options:         opts,
		MaxPages:        maxPages,
		BatchSize:       10,
		Cookie:          map[string]string{"session": "s1"},
		Authorization:   map[string]string{"example.com": "Bearer t"},
		Timers:          timers,
	}
}

// Entries makes depth-d frontier entries of urls.
func Entries(depth int, urls ...string) []jobs.Entry {
	out := make([]jobs.Entry, len(urls))
	for i, u := range urls {
		out[i] = jobs.Entry{URL: u, Depth: depth}
	}
	return out
}

// Page makes a page record with every field set; errMsg != "" makes it a
// failed page.
func Page(job, batch, runner string, epoch int64, url string, depth int, errMsg string, links ...string) *jobs.PageRecord {
	p := &jobs.PageRecord{
		Page: crawl.Page{
			URL:         url,
			FinalURL:    url + "?final",
			StatusCode:  200,
			ContentType: "text/html; charset=utf-8",
			Bytes:       int64(1000 + len(url)),
			DurationMS:  12,
			Title:       "Title of " + url + " — ünïcode",
			Fields:      map[string][]string{"h1": {"Heading", url}},
			Links:       links,
			Depth:       depth,
			Attempts:    1,
			Error:       errMsg,
		},
		Job: job, Batch: batch, Runner: runner, Epoch: epoch,
	}
	if errMsg != "" {
		p.StatusCode = 500
		p.Fields = nil
		p.Links = nil
		p.Attempts = 3
	}
	return p
}

// newJob creates a job with seeds (paths under URL) and returns its ID.
func (f *fixture) newJob(tag string, maxPages int, seeds ...string) string {
	f.t.Helper()
	id := JobID(f.t, tag)
	urls := make([]string, len(seeds))
	for i, s := range seeds {
		urls[i] = URL(s)
	}
	if len(urls) == 0 {
		urls = []string{URL("unused-seed")} // a spec needs a seed
	}
	_, err := f.s.CreateJob(f.ctx, Spec(id, maxPages, urls...), Entries(0, urls[:len(seeds)]...))
	require.NoError(f.t, err, "CreateJob %s", id)
	return id
}

func (f *fixture) take(job, id string, n int) (jobs.BatchInfo, []string) {
	f.t.Helper()
	b, err := f.s.TakeBatch(f.ctx, job, id, n)
	require.NoError(f.t, err, "TakeBatch %s %s", job, id)
	assert.Equal(f.t, b.Job, job, "TakeBatch: Job")
	assert.Equal(f.t, b.ID, id, "TakeBatch: ID")
	if b.Size == 0 {
		return b, nil
	}
	es := f.entries(job, id)
	require.Len(f.t, es, b.Size, "TakeBatch %s: Entries do not match Size", id)
	urls := make([]string, len(es))
	for i, e := range es {
		urls[i] = e.URL
	}
	return b, urls
}

func (f *fixture) entries(job, id string) []jobs.BatchEntry {
	f.t.Helper()
	es, err := f.s.Entries(f.ctx, job, id)
	require.NoError(f.t, err, "Entries %s %s", job, id)
	return es
}

func (f *fixture) claim(job, id, holder string, epoch int64) jobs.BatchInfo {
	f.t.Helper()
	b, err := f.s.Claim(f.ctx, job, id, holder, epoch)
	require.NoError(f.t, err, "Claim %s %s %s@%d", job, id, holder, epoch)
	return b
}

// record records url in batch at epoch as a successful page with links
// (full URLs, depth 1).
func (f *fixture) record(job, batch, runner string, epoch int64, url string, links ...string) jobs.Recorded {
	f.t.Helper()
	r, err := f.s.Record(f.ctx, jobs.Record{
		Job: job, Batch: batch, Runner: runner, Epoch: epoch, URL: url,
		Page:  Page(job, batch, runner, epoch, url, 0, "", links...),
		Links: Entries(1, links...),
	})
	require.NoError(f.t, err, "Record %s in %s@%d", url, batch, epoch)
	return r
}

func (f *fixture) stats(job string) jobs.Stats {
	f.t.Helper()
	st, err := f.s.Stats(f.ctx, job)
	require.NoError(f.t, err, "Stats %s", job)
	return st
}

func (f *fixture) results(job string) []jobs.PageRecord {
	f.t.Helper()
	var out []jobs.PageRecord
	require.NoError(f.t, f.s.Results(f.ctx, job, func(p jobs.PageRecord) error {
		out = append(out, p)
		return nil
	}), "Results %s", job)
	return out
}

func (f *fixture) resultURLs(job string) []string {
	f.t.Helper()
	var out []string
	for _, p := range f.results(job) {
		out = append(out, p.URL)
	}
	return out
}

func (f *fixture) batch(job, id string) jobs.BatchInfo {
	f.t.Helper()
	bs, err := f.s.Batches(f.ctx, job, []string{id})
	require.NoError(f.t, err, "Batches %s %s", job, id)
	require.Len(f.t, bs, 1, "Batches %s %s", job, id)
	return bs[0]
}

func (f *fixture) isRecorded(job, url string) bool {
	f.t.Helper()
	ok, err := f.s.Recorded(f.ctx, job, url)
	require.NoError(f.t, err, "Recorded %s %s", job, url)
	return ok
}

func urls(paths ...string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = URL(p)
	}
	return out
}

func seq(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%04d", prefix, i)
	}
	return out
}

func requireStale(t *testing.T, err error, what string) {
	t.Helper()
	require.Error(t, err, "%s: want ErrStale, got no error", what)
	require.True(t, errors.Is(err, jobs.ErrStale), "%s: want ErrStale, got %v", what, err)
}

func uniq(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return slices.Compact(out)
}

func intersect(a, b []string) []string {
	var out []string
	for _, x := range a {
		if slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}
