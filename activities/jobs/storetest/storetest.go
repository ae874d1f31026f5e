// Package storetest is the conformance suite of jobs.Store: every engine
// must pass Run. Each subtest asserts a property a caller relies on (the
// doc comments of jobs.Store are the contract).
//
// The suite never assumes a store is empty: every job it creates has an ID
// made from the subtest's name and a random suffix, so one store (one
// PostgreSQL database) may serve every subtest and every run.
package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/roles"
)

// Run runs the conformance suite. open is called once per subtest and
// must return a ready store (it may be the same database each time: the
// suite's jobs have unique IDs); Run closes it at the end of the subtest
// (open may register its own cleanup too: closing twice must be harmless).
func Run(t *testing.T, open func(t *testing.T) jobs.Store) {
	tests := []struct {
		name string
		fn   func(*testing.T, *fixture)
	}{
		{"CreateJob", testCreateJob},
		{"SpecUnknownJob", testSpecUnknownJob},
		{"TakeBatchFIFO", testTakeBatchFIFO},
		{"TakeBatchIdempotent", testTakeBatchIdempotent},
		{"TakeBatchEmptyFrontier", testTakeBatchEmpty},
		{"MaxPagesWithLinks", testMaxPagesLinks},
		{"MaxPagesSeedsAndRequeue", testMaxPagesSeedsRequeue},
		{"MaxPagesKnownLinks", testMaxPagesKnownLinks},
		{"Secrets", testSecrets},
		{"AddSeeds", testAddSeeds},
		{"ClaimEpochs", testClaimEpochs},
		{"FinishBatch", testFinishBatch},
		{"RecordOnce", testRecordOnce},
		{"RecordLinksOnce", testRecordLinksOnce},
		{"RecordNilPage", testRecordNilPage},
		{"ResultsOrderAndFields", testResults},
		{"Requeue", testRequeue},
		{"UnfinishedAfterExtend", testUnfinished},
		{"RequeueStaleEpoch", testRequeueStale},
		{"FailBatch", testFailBatch},
		{"ConcurrentRecord", testConcurrentRecord},
		{"ConcurrentTakeBatch", testConcurrentTake},
		{"ConcurrentTakeBatchMaxPages", testConcurrentTakeMaxPages},
		{"ConcurrentTakeBatchSameID", testConcurrentTakeSameID},
		{"RequeueWhileRecording", testRequeueWhileRecording},
		{"Identity", testIdentity},
		{"TwoJobs", testTwoJobs},
		{"Duplicates", testDuplicates},
		{"ConcurrentDuplicates", testConcurrentDuplicates},
		{"Bodies", testBodies},
		{"Refused", testRefused},
		{"Control", testControl},
		{"ExtendRefusedWhileHalted", testExtendHalted},
		{"Release", testRelease},
		{"ReleaseStaleEpoch", testReleaseStale},
		{"RequeueFailed", testRequeueFailed},
		{"RequeueFailedMaxPages", testRequeueFailedMaxPages},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			require.NotNil(t, s, "open returned a nil store")
			t.Cleanup(func() { _ = s.Close() })
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			tc.fn(t, &fixture{t: t, ctx: ctx, s: s})
		})
	}
}

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
	return jobs.Spec{
		ID:            id,
		Group:         "storetest",
		Seeds:         seeds,
		Options:       opts,
		MaxPages:      maxPages,
		BatchSize:     10,
		Cookie:        map[string]string{"session": "s1"},
		Authorization: map[string]string{"example.com": "Bearer t"},
		Timers:        timers,
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

// ---- CreateJob and Spec ----

func testCreateJob(t *testing.T, f *fixture) {
	id := JobID(t, "j")
	seeds := urls("a", "b", "a", "c", "b")
	spec := Spec(id, 0, seeds...)
	before := time.Now()
	st, err := f.s.CreateJob(f.ctx, spec, Entries(0, seeds...))
	require.NoError(t, err)
	assert.Equal(t, jobs.Stats{Seen: 3, Queued: 3}, st, "seeds are deduplicated")
	assert.Equal(t, st, f.stats(id))

	got, err := f.s.Spec(f.ctx, id)
	require.NoError(t, err)
	assert.Equal(t, spec, got, "Spec round trip")

	// A second call with the same spec (a retried activity) changes
	// nothing, even with more seeds.
	st2, err := f.s.CreateJob(f.ctx, spec, Entries(0, urls("a", "d", "e")...))
	require.NoError(t, err, "CreateJob again")
	assert.Equal(t, st, st2, "CreateJob again returns the job's counters unchanged")
	assert.Equal(t, st, f.stats(id))
	// Another spec under the same ID (another group sharing the store) is
	// refused, and changes nothing either.
	other := spec
	other.Group = "elsewhere"
	other.MaxPages = 1
	_, err = f.s.CreateJob(f.ctx, other, Entries(0, urls("a", "d", "e")...))
	require.ErrorIs(t, err, jobs.ErrJobExists)
	assert.Equal(t, st, f.stats(id))
	got, err = f.s.Spec(f.ctx, id)
	require.NoError(t, err)
	assert.Equal(t, spec, got, "CreateJob again must not replace the spec")

	// The job is listed, with its group, creation time and counters.
	list, err := f.s.Jobs(f.ctx)
	require.NoError(t, err)
	i := slices.IndexFunc(list, func(j jobs.JobInfo) bool { return j.ID == id })
	require.GreaterOrEqual(t, i, 0, "Jobs does not list %s", id)
	assert.Equal(t, "storetest", list[i].Group)
	assert.Equal(t, st, list[i].Stats)
	assert.WithinDuration(t, before, list[i].Created, time.Minute, "Created")

	// All the seeds are handed out, once each.
	b, got3 := f.take(id, "b1", 10)
	assert.Equal(t, 3, b.Size)
	assert.ElementsMatch(t, urls("a", "b", "c"), got3)
}

func testSpecUnknownJob(t *testing.T, f *fixture) {
	_, err := f.s.Spec(f.ctx, JobID(t, "missing"))
	require.Error(t, err)
	assert.True(t, errors.Is(err, jobs.ErrNoJob), "Spec of an unknown job: want ErrNoJob, got %v", err)
}

// ---- TakeBatch ----

func testTakeBatchFIFO(t *testing.T, f *fixture) {
	job := f.newJob("j", 0, "s0", "s1", "s2", "s3", "s4")
	assert.Equal(t, jobs.Stats{Seen: 5, Queued: 5}, f.stats(job))

	b1, got := f.take(job, "b1", 2)
	assert.Equal(t, 2, b1.Size)
	assert.Equal(t, jobs.BatchRunning, b1.State)
	assert.ElementsMatch(t, urls("s0", "s1"), got, "first batch: the first seeds")
	assert.Equal(t, jobs.Stats{Seen: 5, Queued: 3}, f.stats(job))

	f.claim(job, "b1", "r1", 1)
	// s0 links to new pages: they queue behind the seeds (breadth first).
	f.record(job, "b1", "r1", 1, URL("s0"), URL("l0"), URL("l1"))
	assert.Equal(t, jobs.Stats{Seen: 7, Queued: 5, Recorded: 1}, f.stats(job))

	_, got = f.take(job, "b2", 2)
	assert.ElementsMatch(t, urls("s2", "s3"), got, "second batch: the next seeds")
	_, got = f.take(job, "b3", 2)
	assert.ElementsMatch(t, urls("s4", "l0"), got, "third batch: the last seed, then the links in order")
	_, got = f.take(job, "b4", 2)
	assert.ElementsMatch(t, urls("l1"), got)
	assert.Equal(t, jobs.Stats{Seen: 7, Queued: 0, Recorded: 1}, f.stats(job))

	es := f.entries(job, "b3")
	for _, e := range es {
		want := 0
		if e.URL == URL("l0") {
			want = 1
		}
		assert.Equal(t, want, e.Depth, "depth of %s", e.URL)
		assert.False(t, e.Done)
	}
}

func testTakeBatchIdempotent(t *testing.T, f *fixture) {
	job := f.newJob("j", 0, seq("p", 10)...)
	b1, first := f.take(job, "b1", 4)
	require.Equal(t, 4, b1.Size)
	st := f.stats(job)
	assert.Equal(t, jobs.Stats{Seen: 10, Queued: 6}, st)

	// A retried call returns the same batch and takes nothing more.
	again, second := f.take(job, "b1", 4)
	assert.Equal(t, b1, again)
	assert.Equal(t, first, second, "the same URLs again")
	again, _ = f.take(job, "b1", 7) // even with another n
	assert.Equal(t, 4, again.Size)
	assert.Equal(t, st, f.stats(job), "a retried TakeBatch must not change the counters")

	// After a claim, the retry returns the batch as it is now.
	f.claim(job, "b1", "r1", 3)
	again, _ = f.take(job, "b1", 4)
	assert.Equal(t, int64(3), again.Epoch)
	assert.Equal(t, "r1", again.Holder)

	b2, rest := f.take(job, "b2", 100)
	assert.Equal(t, 6, b2.Size)
	assert.Empty(t, intersect(first, rest), "a URL was handed out twice")
	assert.Equal(t, 0, f.stats(job).Queued)
}

func testTakeBatchEmpty(t *testing.T, f *fixture) {
	job := f.newJob("j", 0, "s0")
	f.take(job, "b1", 10)
	f.claim(job, "b1", "r1", 1)

	b, got := f.take(job, "empty", 10)
	assert.Equal(t, 0, b.Size, "an empty frontier gives a batch of size 0")
	assert.Empty(t, got)
	bs, err := f.s.Batches(f.ctx, job, []string{"empty"})
	require.NoError(t, err)
	assert.Empty(t, bs, "an empty batch is not stored")

	// Not stored: the same id may take URLs queued later.
	f.record(job, "b1", "r1", 1, URL("s0"), URL("l0"))
	b, got = f.take(job, "empty", 10)
	assert.Equal(t, 1, b.Size)
	assert.Equal(t, urls("l0"), got)
}

// crawlAll hands out and finishes batches of n until the frontier is
// empty; each page links to fanout new pages. It returns how often each
// URL was handed out.
func (f *fixture) crawlAll(job string, n, fanout int, maxPages int) map[string]int {
	t := f.t
	t.Helper()
	handed := map[string]int{}
	for i := 0; ; i++ {
		id := fmt.Sprintf("b%d", i)
		b, got := f.take(job, id, n)
		if b.Size == 0 {
			break
		}
		require.Less(t, i, 1000, "the crawl does not end")
		f.claim(job, id, "r1", 1)
		for _, u := range got {
			handed[u]++
			var links []string
			for k := range fanout {
				links = append(links, fmt.Sprintf("%s/%d", u, k))
			}
			f.record(job, id, "r1", 1, u, links...)
		}
		done, err := f.s.FinishBatch(f.ctx, job, id, 1)
		require.NoError(t, err)
		assert.Equal(t, jobs.BatchDone, done.State)
		st := f.stats(job)
		if maxPages > 0 {
			require.LessOrEqual(t, len(handed), maxPages, "more than max_pages distinct URLs handed out")
			require.LessOrEqual(t, st.Seen, maxPages, "Stats.Seen above max_pages")
		}
		require.Equal(t, st.Seen-len(handed), st.Queued, "Stats.Queued after batch %s: %+v, %d handed out", id, st, len(handed))
	}
	return handed
}

func testMaxPagesLinks(t *testing.T, f *fixture) {
	job := f.newJob("j", 5, "s0")
	handed := f.crawlAll(job, 3, 10, 5)
	assert.Len(t, handed, 5, "exactly max_pages URLs handed out when links abound")
	for u, k := range handed {
		assert.Equal(t, 1, k, "%s handed out %d times", u, k)
	}
	assert.Equal(t, jobs.Stats{Seen: 5, Queued: 0, Recorded: 5}, f.stats(job))
	assert.Len(t, f.results(job), 5)

	// Without max_pages the same crawl goes on (control).
	free := f.newJob("free", 0, "s0")
	f.take(free, "b0", 1)
	f.claim(free, "b0", "r1", 1)
	f.record(free, "b0", "r1", 1, URL("s0"), seq(URL("s0")+"/", 10)...)
	assert.Equal(t, jobs.Stats{Seen: 11, Queued: 10, Recorded: 1}, f.stats(free))
}

// testAddSeeds: seeds added in chunks to a stored job are queued and
// counted once, whatever is added twice.
func testAddSeeds(t *testing.T, f *fixture) {
	job := f.newJob("j", 0, "a")
	n, err := f.s.AddSeeds(f.ctx, job, Entries(0, URL("a"), URL("b"), URL("c")))
	require.NoError(t, err)
	assert.Equal(t, 2, n, "a was queued by CreateJob")
	n, err = f.s.AddSeeds(f.ctx, job, Entries(0, URL("c"), URL("d")))
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Equal(t, jobs.Stats{Seen: 4, Queued: 4}, f.stats(job))
	_, err = f.s.AddSeeds(f.ctx, JobID(t, "nope"), Entries(0, URL("x")))
	require.ErrorIs(t, err, jobs.ErrNoJob)
}

// testSecrets: sealed secrets are kept as given, once per job.
func testSecrets(t *testing.T, f *fixture) {
	job := f.newJob("j", 0, "a")
	_, _, err := f.s.Secrets(f.ctx, job)
	require.ErrorIs(t, err, jobs.ErrNoSecrets)
	sealed := []byte{0, 1, 2, 0xff, 'x'}
	require.NoError(t, f.s.PutSecrets(f.ctx, job, "key1", sealed))
	require.NoError(t, f.s.PutSecrets(f.ctx, job, "key1", sealed), "the same again (a retry)")
	require.ErrorIs(t, f.s.PutSecrets(f.ctx, job, "key1", []byte("other")), jobs.ErrJobExists)
	id, got, err := f.s.Secrets(f.ctx, job)
	require.NoError(t, err)
	assert.Equal(t, "key1", id)
	assert.Equal(t, sealed, got)
}

// testMaxPagesKnownLinks: links already in the frontier do not use up
// the quota of new ones (a page linking back to the seeds before its new
// links, in URL order, ended a 5-page job at 4).
func testMaxPagesKnownLinks(t *testing.T, f *fixture) {
	job := f.newJob("j", 5, "a", "b")
	f.take(job, "b0", 2)
	f.claim(job, "b0", "r1", 1)
	// a, b are known; c, d, e new: 2 + 3 = max_pages.
	got := f.record(job, "b0", "r1", 1, URL("a"), URL("a"), URL("b"), URL("c"), URL("d"), URL("e"))
	assert.Equal(t, 3, got.Added, "new links queued")
	assert.Equal(t, jobs.Stats{Seen: 5, Queued: 3, Recorded: 1}, f.stats(job))
	f.record(job, "b0", "r1", 1, URL("b"), URL("f"))
	_, more := f.take(job, "b1", 10)
	assert.ElementsMatch(t, []string{URL("c"), URL("d"), URL("e")}, more, "the new links, up to max_pages")
}

func testMaxPagesSeedsRequeue(t *testing.T, f *fixture) {
	job := f.newJob("j", 3, seq("s", 8)...)
	assert.Equal(t, jobs.Stats{Seen: 3, Queued: 3}, f.stats(job), "seeds beyond max_pages are not counted")

	b1, first := f.take(job, "b1", 2)
	assert.Equal(t, 2, b1.Size)
	assert.Equal(t, 1, f.stats(job).Queued)
	b2, second := f.take(job, "b2", 5)
	assert.Equal(t, 1, b2.Size, "the second batch stops at max_pages")
	assert.Equal(t, 0, f.stats(job).Queued)
	b3, _ := f.take(job, "b3", 5)
	assert.Equal(t, 0, b3.Size, "nothing beyond max_pages")

	// Re-queued URLs count again only once: they are the same URLs.
	f.claim(job, "b1", "r1", 1)
	n, err := f.s.Requeue(f.ctx, job, "b1", 2)
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	assert.Equal(t, jobs.Stats{Seen: 3, Queued: 2}, f.stats(job))
	b4, again := f.take(job, "b4", 10)
	assert.Equal(t, 2, b4.Size)
	assert.ElementsMatch(t, first, again, "the re-queued URLs are handed out again")
	b5, _ := f.take(job, "b5", 10)
	assert.Equal(t, 0, b5.Size)
	all := append(append([]string{}, first...), second...)
	assert.Len(t, uniq(all), 3)
}

// ---- Claim, epochs, FinishBatch ----

func testClaimEpochs(t *testing.T, f *fixture) {
	job := f.newJob("j", 0, "a", "b")
	b, got := f.take(job, "b1", 10)
	require.Len(t, got, 2)
	assert.Equal(t, int64(0), b.Epoch)

	_, err := f.s.Claim(f.ctx, job, "nope", "r1", 1)
	require.Error(t, err)
	assert.True(t, errors.Is(err, jobs.ErrNoBatch), "Claim of an unknown batch: want ErrNoBatch, got %v", err)

	c := f.claim(job, "b1", "r1", 1)
	assert.Equal(t, "r1", c.Holder)
	assert.Equal(t, int64(1), c.Epoch)
	assert.Equal(t, c, f.claim(job, "b1", "r1", 1), "a retried Claim is harmless")
	assert.Equal(t, "r1", f.batch(job, "b1").Holder)

	c = f.claim(job, "b1", "r2", 5)
	assert.Equal(t, "r2", c.Holder)
	assert.Equal(t, int64(5), c.Epoch)

	_, err = f.s.Claim(f.ctx, job, "b1", "r3", 4)
	requireStale(t, err, "Claim at a lower epoch")
	assert.Equal(t, jobs.BatchInfo{Job: job, ID: "b1", Holder: "r2", Epoch: 5, Size: 2, State: jobs.BatchRunning}, f.batch(job, "b1"),
		"a refused Claim changes nothing")

	// The old holder is fenced: nothing it writes lands.
	st := f.stats(job)
	_, err = f.s.Record(f.ctx, jobs.Record{Job: job, Batch: "b1", Runner: "r1", Epoch: 1, URL: URL("a"),
		Page: Page(job, "b1", "r1", 1, URL("a"), 0, "", URL("x")), Links: Entries(1, URL("x"))})
	requireStale(t, err, "Record at the old epoch")
	assert.False(t, f.isRecorded(job, URL("a")), "a stale Record wrote its page")
	assert.Equal(t, st, f.stats(job), "a stale Record changed the counters")
	assert.Empty(t, f.results(job))
	for _, e := range f.entries(job, "b1") {
		assert.False(t, e.Done, "a stale Record finished %s", e.URL)
	}
	_, err = f.s.FinishBatch(f.ctx, job, "b1", 1)
	requireStale(t, err, "FinishBatch at the old epoch")

	// The new holder writes.
	f.record(job, "b1", "r2", 5, URL("a"))
	f.record(job, "b1", "r2", 5, URL("b"))
	_, err = f.s.FinishBatch(f.ctx, job, "b1", 4)
	requireStale(t, err, "FinishBatch at a stale epoch")
	assert.Equal(t, jobs.BatchRunning, f.batch(job, "b1").State)
	done, err := f.s.FinishBatch(f.ctx, job, "b1", 5)
	require.NoError(t, err)
	assert.Equal(t, jobs.BatchDone, done.State)

	// A batch that is no longer running is returned as it is.
	c, err = f.s.Claim(f.ctx, job, "b1", "r9", 9)
	require.NoError(t, err, "Claim of a finished batch")
	assert.Equal(t, jobs.BatchDone, c.State)
	assert.Equal(t, jobs.BatchInfo{Job: job, ID: "b1", Holder: "r2", Epoch: 5, Size: 2, State: jobs.BatchDone}, f.batch(job, "b1"))
}

func testFinishBatch(t *testing.T, f *fixture) {
	job := f.newJob("j", 0, "ok1", "ok2", "bad", "robots", "late")
	_, got := f.take(job, "b1", 4)
	require.ElementsMatch(t, urls("ok1", "ok2", "bad", "robots"), got)
	f.claim(job, "b1", "r1", 1)
	f.record(job, "b1", "r1", 1, URL("ok1"))
	f.record(job, "b1", "r1", 1, URL("ok2"))

	_, err := f.s.FinishBatch(f.ctx, job, "b1", 1)
	require.Error(t, err, "FinishBatch with unfinished URLs")
	assert.False(t, errors.Is(err, jobs.ErrStale), "unfinished URLs are not a stale epoch: %v", err)
	assert.Equal(t, jobs.BatchRunning, f.batch(job, "b1").State)

	_, err = f.s.Record(f.ctx, jobs.Record{Job: job, Batch: "b1", Runner: "r1", Epoch: 1, URL: URL("bad"),
		Page: Page(job, "b1", "r1", 1, URL("bad"), 0, "HTTP 500")})
	require.NoError(t, err)
	_, err = f.s.Record(f.ctx, jobs.Record{Job: job, Batch: "b1", Runner: "r1", Epoch: 1, URL: URL("robots")})
	require.NoError(t, err)

	done, err := f.s.FinishBatch(f.ctx, job, "b1", 1)
	require.NoError(t, err)
	assert.Equal(t, jobs.BatchDone, done.State)
	assert.Equal(t, 2, done.Success, "Success: pages without error")
	assert.Equal(t, 1, done.Failed, "Failed: pages with an error")
	assert.Equal(t, 4, done.Size)
	assert.Equal(t, jobs.BatchDone, f.batch(job, "b1").State)

	again, err := f.s.FinishBatch(f.ctx, job, "b1", 1)
	require.NoError(t, err, "a retried FinishBatch")
	assert.Equal(t, done, again)
	assert.Equal(t, jobs.Stats{Seen: 5, Queued: 1, Recorded: 3, Failed: 1}, f.stats(job))
}

// ---- Record ----

func testRecordOnce(t *testing.T, f *fixture) {
	job := f.newJob("j", 0, "a", "b")
	f.take(job, "b1", 1) // a
	f.claim(job, "b1", "r1", 1)
	r := f.record(job, "b1", "r1", 1, URL("a"), URL("x"))
	assert.Equal(t, jobs.Recorded{Wrote: true, Added: 1}, r)
	assert.True(t, f.isRecorded(job, URL("a")))
	assert.False(t, f.isRecorded(job, URL("b")))
	st := f.stats(job)
	assert.Equal(t, jobs.Stats{Seen: 3, Queued: 2, Recorded: 1}, st)

	// A retried Record writes nothing more.
	r = f.record(job, "b1", "r1", 1, URL("a"), URL("x"))
	assert.False(t, r.Wrote, "a retried Record wrote again")
	assert.Equal(t, 0, r.Added)
	assert.Equal(t, st, f.stats(job))

	// The same URL coming in another batch is not recorded twice, and a
	// link back to it is not queued again.
	f.take(job, "b2", 10) // b, x
	f.claim(job, "b2", "r2", 1)
	r = f.record(job, "b2", "r2", 1, URL("b"), URL("a"), URL("b"), URL("x"))
	assert.Equal(t, jobs.Recorded{Wrote: true, Added: 0}, r, "links already seen are not queued")
	r2, err := f.s.Record(f.ctx, jobs.Record{Job: job, Batch: "b2", Runner: "r2", Epoch: 1, URL: URL("a"),
		Page: Page(job, "b2", "r2", 1, URL("a"), 0, "")})
	if err == nil {
		assert.False(t, r2.Wrote, "a URL recorded in another batch was written again")
	}
	assert.Equal(t, []string{URL("a"), URL("b")}, f.resultURLs(job))
	assert.Equal(t, jobs.Stats{Seen: 3, Queued: 0, Recorded: 2}, f.stats(job))
	for _, p := range f.results(job) {
		if p.URL == URL("a") {
			assert.Equal(t, "b1", p.Batch, "the first record of a URL stays")
		}
	}
}

func testRecordLinksOnce(t *testing.T, f *fixture) {
	job := f.newJob("j", 0, "a", "b")
	f.take(job, "b1", 2)
	f.claim(job, "b1", "r1", 1)
	r := f.record(job, "b1", "r1", 1, URL("a"), URL("x"), URL("y"), URL("x"), URL("a"), URL("b"))
	assert.Equal(t, 2, r.Added, "x and y are new; the repeated x and the seeds are not")
	r = f.record(job, "b1", "r1", 1, URL("b"), URL("y"), URL("z"))
	assert.Equal(t, 1, r.Added, "only z is new")
	assert.Equal(t, jobs.Stats{Seen: 5, Queued: 3, Recorded: 2}, f.stats(job))
	_, got := f.take(job, "b2", 10)
	assert.ElementsMatch(t, urls("x", "y", "z"), got)
	for _, e := range f.entries(job, "b2") {
		assert.Equal(t, 1, e.Depth, "depth of %s", e.URL)
	}
}

func testRecordNilPage(t *testing.T, f *fixture) {
	job := f.newJob("j", 0, "a", "robots")
	f.take(job, "b1", 2)
	f.claim(job, "b1", "r1", 1)
	r, err := f.s.Record(f.ctx, jobs.Record{Job: job, Batch: "b1", Runner: "r1", Epoch: 1, URL: URL("robots")})
	require.NoError(t, err)
	assert.False(t, r.Wrote, "a nil page writes no result")
	assert.False(t, f.isRecorded(job, URL("robots")))
	assert.Equal(t, jobs.Stats{Seen: 2, Queued: 0}, f.stats(job))
	for _, e := range f.entries(job, "b1") {
		assert.Equal(t, e.URL == URL("robots"), e.Done, "Done of %s", e.URL)
	}
	f.record(job, "b1", "r1", 1, URL("a"))
	done, err := f.s.FinishBatch(f.ctx, job, "b1", 1)
	require.NoError(t, err, "a batch whose URLs are recorded or refused finishes")
	assert.Equal(t, 1, done.Success)
	assert.Equal(t, 0, done.Failed)
	assert.Equal(t, []string{URL("a")}, f.resultURLs(job))
}

func testResults(t *testing.T, f *fixture) {
	job := f.newJob("j", 0, "a", "b", "c", "d")
	f.take(job, "b1", 4)
	f.claim(job, "b1", "r1", 7)
	var want []jobs.PageRecord
	for _, name := range []string{"c", "a", "d", "b"} {
		errMsg := ""
		if name == "d" {
			errMsg = "timeout after 15s"
		}
		p := Page(job, "b1", "r1", 7, URL(name), 0, errMsg, URL(name+"/x"))
		if errMsg != "" {
			p.Links = nil
		}
		r, err := f.s.Record(f.ctx, jobs.Record{Job: job, Batch: "b1", Runner: "r1", Epoch: 7, URL: URL(name), Page: p,
			Links: Entries(1, p.Links...)})
		require.NoError(t, err)
		assert.True(t, r.Wrote)
		want = append(want, *p)
	}
	got := f.results(job)
	assert.Equal(t, want, got, "Results: in the order recorded, fields intact")
	assert.Equal(t, jobs.Stats{Seen: 7, Queued: 3, Recorded: 4, Failed: 1}, f.stats(job))

	// fn's error stops the iteration and is returned.
	stop := errors.New("stop")
	calls := 0
	err := f.s.Results(f.ctx, job, func(jobs.PageRecord) error { calls++; return stop })
	assert.ErrorIs(t, err, stop)
	assert.Equal(t, 1, calls)
}

// ---- Requeue and FailBatch ----

// testUnfinished: a new holder gets exactly the URLs handed out and not
// finished, those pulled by Extend included, in hand-out order.
func testUnfinished(t *testing.T, f *fixture) {
	job := f.newJob("j", 0, "a", "b", "c", "d", "e")
	_, got := f.take(job, "b1", 2)
	require.Equal(t, urls("a", "b"), got)
	f.claim(job, "b1", "r1", 1)
	more, err := f.s.Extend(f.ctx, job, "b1", 1, 2)
	require.NoError(t, err)
	require.Len(t, more, 2)
	f.record(job, "b1", "r1", 1, URL("a"))
	f.record(job, "b1", "r1", 1, URL("c"))
	un, err := f.s.Unfinished(f.ctx, job, "b1")
	require.NoError(t, err)
	assert.Equal(t, Entries(0, URL("b"), URL("d")), un, "Unfinished after two of four finished")
	assert.Equal(t, 4, f.batch(job, "b1").Size, "Size counts what Extend pulled")
	un, err = f.s.Unfinished(f.ctx, job, "no-such-batch")
	require.NoError(t, err)
	assert.Empty(t, un)
}

func testRequeue(t *testing.T, f *fixture) {
	job := f.newJob("j", 0, "a", "b", "c", "d")
	_, got := f.take(job, "b1", 4)
	require.Len(t, got, 4)
	f.claim(job, "b1", "r1", 1)
	f.record(job, "b1", "r1", 1, URL("a"))
	_, err := f.s.Record(f.ctx, jobs.Record{Job: job, Batch: "b1", Runner: "r1", Epoch: 1, URL: URL("b")}) // robots
	require.NoError(t, err)
	assert.Equal(t, 0, f.stats(job).Queued)

	n, err := f.s.Requeue(f.ctx, job, "b1", 2)
	require.NoError(t, err)
	assert.Equal(t, 2, n, "the unfinished URLs c and d")
	b := f.batch(job, "b1")
	assert.Equal(t, jobs.BatchRequeued, b.State)
	assert.Equal(t, int64(2), b.Epoch, "Requeue raises the epoch")
	assert.Equal(t, jobs.Stats{Seen: 4, Queued: 2, Recorded: 1}, f.stats(job))

	// A retried Requeue does not put them back twice.
	n, err = f.s.Requeue(f.ctx, job, "b1", 2)
	if err == nil {
		assert.Equal(t, 0, n, "a retried Requeue re-queued again")
	}
	assert.Equal(t, jobs.Stats{Seen: 4, Queued: 2, Recorded: 1}, f.stats(job))

	// The old holder is fenced.
	_, err = f.s.Record(f.ctx, jobs.Record{Job: job, Batch: "b1", Runner: "r1", Epoch: 1, URL: URL("c"),
		Page: Page(job, "b1", "r1", 1, URL("c"), 0, "")})
	requireStale(t, err, "Record by the old holder after Requeue")
	_, err = f.s.FinishBatch(f.ctx, job, "b1", 1)
	requireStale(t, err, "FinishBatch by the old holder after Requeue")
	assert.False(t, f.isRecorded(job, URL("c")))

	// The unfinished URLs are handed out again, the finished ones not.
	_, got = f.take(job, "b2", 10)
	assert.ElementsMatch(t, urls("c", "d"), got)
	f.claim(job, "b2", "r2", 1)
	f.record(job, "b2", "r2", 1, URL("c"))
	f.record(job, "b2", "r2", 1, URL("d"))
	_, err = f.s.FinishBatch(f.ctx, job, "b2", 1)
	require.NoError(t, err)
	assert.ElementsMatch(t, urls("a", "c", "d"), f.resultURLs(job))
	assert.Equal(t, jobs.Stats{Seen: 4, Queued: 0, Recorded: 3}, f.stats(job))
	b, _ = f.take(job, "b3", 10)
	assert.Equal(t, 0, b.Size)
}

func testRequeueStale(t *testing.T, f *fixture) {
	job := f.newJob("j", 0, "a", "b")
	f.take(job, "b1", 2)
	f.claim(job, "b1", "r1", 3)
	_, err := f.s.Requeue(f.ctx, job, "b1", 2)
	requireStale(t, err, "Requeue at a lower epoch than the batch's")
	b := f.batch(job, "b1")
	assert.Equal(t, jobs.BatchRunning, b.State)
	assert.Equal(t, int64(3), b.Epoch)
	assert.Equal(t, 0, f.stats(job).Queued, "a refused Requeue put URLs back")
	f.record(job, "b1", "r1", 3, URL("a")) // the holder still writes
}

func testFailBatch(t *testing.T, f *fixture) {
	job := f.newJob("j", 0, "a", "b", "c")
	f.take(job, "b1", 1)
	f.take(job, "b2", 1)
	f.take(job, "b3", 1)
	f.claim(job, "b1", "r1", 1)
	f.claim(job, "b2", "r2", 4)
	f.claim(job, "b3", "r3", 2)

	require.NoError(t, f.s.FailBatch(f.ctx, job, "b1", 1, "spec: invalid job spec: seeds: at least one URL is required"))
	b := f.batch(job, "b1")
	assert.Equal(t, jobs.BatchFailed, b.State)
	assert.Equal(t, "spec: invalid job spec: seeds: at least one URL is required", b.Error)

	// The supervisor fails a batch whoever holds it.
	require.NoError(t, f.s.FailBatch(f.ctx, job, "b2", 0, "supervisor gave up"))
	b = f.batch(job, "b2")
	assert.Equal(t, jobs.BatchFailed, b.State)
	assert.Equal(t, "supervisor gave up", b.Error)

	// A stale holder cannot.
	err := f.s.FailBatch(f.ctx, job, "b3", 1, "stale")
	requireStale(t, err, "FailBatch at a stale epoch")
	assert.Equal(t, jobs.BatchRunning, f.batch(job, "b3").State)

	// A failed batch takes no more writes.
	_, err = f.s.Record(f.ctx, jobs.Record{Job: job, Batch: "b1", Runner: "r1", Epoch: 1, URL: URL("a"),
		Page: Page(job, "b1", "r1", 1, URL("a"), 0, "")})
	requireStale(t, err, "Record into a failed batch")
	assert.False(t, f.isRecorded(job, URL("a")))
}

// ---- Concurrency ----

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

// ---- Identity, several jobs ----

func testIdentity(t *testing.T, f *fixture) {
	id := f.s.Identity()
	assert.NotEmpty(t, id.ID, "Identity.ID")
	assert.NotEmpty(t, id.Engine, "Identity.Engine")
	assert.NotEmpty(t, id.Location, "Identity.Location")
	f.newJob("j", 0, "a")
	assert.Equal(t, id, f.s.Identity(), "the identity is stable")
	assert.Contains(t, id.String(), id.ID)
}

func testTwoJobs(t *testing.T, f *fixture) {
	a := f.newJob("a", 0, "shared", "only-a")
	time.Sleep(5 * time.Millisecond) // distinct creation times
	b := f.newJob("b", 0, "shared", "only-b")

	// The same batch id in both jobs names two batches.
	_, ga := f.take(a, "b1", 10)
	_, gb := f.take(b, "b1", 10)
	assert.ElementsMatch(t, urls("shared", "only-a"), ga)
	assert.ElementsMatch(t, urls("shared", "only-b"), gb)
	f.claim(a, "b1", "ra", 3)
	assert.Equal(t, int64(0), f.batch(b, "b1").Epoch, "a Claim in one job changed the other's batch")
	f.claim(b, "b1", "rb", 1)

	f.record(a, "b1", "ra", 3, URL("shared"), URL("from-a"))
	assert.True(t, f.isRecorded(a, URL("shared")))
	assert.False(t, f.isRecorded(b, URL("shared")), "a page of job a shows in job b")
	r := f.record(b, "b1", "rb", 1, URL("shared"), URL("from-a"))
	assert.True(t, r.Wrote, "job b's page of a URL recorded in job a")
	assert.Equal(t, 1, r.Added, "job b's link already queued in job a")

	_, ga = f.take(a, "b2", 10)
	_, gb = f.take(b, "b2", 10)
	assert.Equal(t, urls("from-a"), ga)
	assert.Equal(t, urls("from-a"), gb)
	assert.Equal(t, jobs.Stats{Seen: 3, Queued: 0, Recorded: 1}, f.stats(a))
	assert.Equal(t, jobs.Stats{Seen: 3, Queued: 0, Recorded: 1}, f.stats(b))
	for _, p := range f.results(b) {
		assert.Equal(t, b, p.Job)
	}

	n, err := f.s.Requeue(f.ctx, a, "b1", 4)
	require.NoError(t, err)
	assert.Equal(t, 1, n, "only-a")
	assert.Equal(t, jobs.BatchRunning, f.batch(b, "b1").State, "a Requeue in one job changed the other's batch")
	assert.Equal(t, 0, f.stats(b).Queued)

	list, err := f.s.Jobs(f.ctx)
	require.NoError(t, err)
	ia := slices.IndexFunc(list, func(j jobs.JobInfo) bool { return j.ID == a })
	ib := slices.IndexFunc(list, func(j jobs.JobInfo) bool { return j.ID == b })
	require.GreaterOrEqual(t, ia, 0, "Jobs does not list %s", a)
	require.GreaterOrEqual(t, ib, 0, "Jobs does not list %s", b)
	assert.Less(t, ib, ia, "Jobs: newest first")
	assert.Equal(t, jobs.Stats{Seen: 3, Queued: 1, Recorded: 1}, list[ia].Stats)
	assert.Equal(t, jobs.Stats{Seen: 3, Queued: 0, Recorded: 1}, list[ib].Stats)
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

// hashed is a successful page record with body hash h.
func hashed(job, batch string, epoch int64, url, h, errMsg string) *jobs.PageRecord {
	p := Page(job, batch, "r1", epoch, url, 0, errMsg)
	p.BodyHash = h
	return p
}

func testDuplicates(t *testing.T, f *fixture) {
	job := f.newJob("j", 0, "a", "b", "c", "d", "e", "f")
	f.take(job, "b1", 6)
	f.claim(job, "b1", "r1", 1)
	_, err := f.s.Record(f.ctx, jobs.Record{Job: job, Batch: "b1", Runner: "r1", Epoch: 1, URL: URL("a"),
		Page: hashed(job, "b1", 1, URL("a"), "h1", "")})
	require.NoError(t, err)
	rs := []jobs.Record{}
	for _, p := range []struct{ name, hash, err string }{
		{"b", "h1", ""}, {"c", "h2", ""}, {"d", "h2", ""}, {"e", "h1", "HTTP 404"}, {"f", "", ""},
	} {
		rs = append(rs, jobs.Record{Job: job, Batch: "b1", Runner: "r1", Epoch: 1, URL: URL(p.name),
			Page: hashed(job, "b1", 1, URL(p.name), p.hash, p.err)})
	}
	_, err = f.s.RecordAll(f.ctx, rs)
	require.NoError(t, err)
	assert.Empty(t, rs[0].Page.DuplicateOf, "the caller's record is not changed")
	got := map[string]string{}
	for _, p := range f.results(job) {
		got[p.URL] = p.DuplicateOf
	}
	assert.Equal(t, map[string]string{
		URL("a"): "", URL("b"): URL("a"), // a page recorded before
		URL("c"): "", URL("d"): URL("c"), // earlier in the same call
		URL("e"): "", // a failed page is never a duplicate
		URL("f"): "", // no hash
	}, got)
	// Another job's pages are not duplicates of this one's.
	other := f.newJob("k", 0, "a")
	f.take(other, "b1", 1)
	f.claim(other, "b1", "r1", 1)
	_, err = f.s.Record(f.ctx, jobs.Record{Job: other, Batch: "b1", Runner: "r1", Epoch: 1, URL: URL("a"),
		Page: hashed(other, "b1", 1, URL("a"), "h1", "")})
	require.NoError(t, err)
	assert.Empty(t, f.results(other)[0].DuplicateOf)
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

func testBodies(t *testing.T, f *fixture) {
	job := f.newJob("j", 0, "a", "b")
	f.take(job, "b1", 2)
	f.claim(job, "b1", "r1", 1)
	body := []byte("<html>" + strings.Repeat("x", 5000) + "</html>")
	p := Page(job, "b1", "r1", 1, URL("a"), 0, "")
	p.BodyRef = jobs.BodiesStore
	_, err := f.s.RecordAll(f.ctx, []jobs.Record{
		{Job: job, Batch: "b1", Runner: "r1", Epoch: 1, URL: URL("a"), Page: p, Body: jobs.CompressBody(body)},
		{Job: job, Batch: "b1", Runner: "r1", Epoch: 1, URL: URL("b"), Page: Page(job, "b1", "r1", 1, URL("b"), 0, "")},
	})
	require.NoError(t, err)
	stored, err := f.s.Body(f.ctx, job, URL("a"))
	require.NoError(t, err)
	assert.Less(t, len(stored), len(body)/10, "stored compressed")
	got, err := jobs.DecompressBody(stored, 1<<20)
	require.NoError(t, err)
	assert.Equal(t, body, got)
	_, err = jobs.DecompressBody(stored, 100)
	assert.ErrorContains(t, err, "larger than 100 bytes")
	_, err = f.s.Body(f.ctx, job, URL("b"))
	assert.ErrorIs(t, err, jobs.ErrNoBody)
	assert.Equal(t, jobs.BodiesStore, f.results(job)[0].BodyRef)
}

func testRefused(t *testing.T, f *fixture) {
	job := f.newJob("j", 0, "a", "robots1", "robots2")
	f.take(job, "b1", 3)
	f.claim(job, "b1", "r1", 1)
	n, err := f.s.Refused(f.ctx, job)
	require.NoError(t, err)
	assert.Equal(t, 0, n)
	_, err = f.s.Record(f.ctx, jobs.Record{Job: job, Batch: "b1", Runner: "r1", Epoch: 1, URL: URL("a"),
		Page: Page(job, "b1", "r1", 1, URL("a"), 0, ""), Links: Entries(jobs.SitemapDepth, URL("sitemap.xml"))})
	require.NoError(t, err)
	for _, u := range []string{"robots1", "robots2"} {
		_, err := f.s.Record(f.ctx, jobs.Record{Job: job, Batch: "b1", Runner: "r1", Epoch: 1, URL: URL(u)})
		require.NoError(t, err)
	}
	// A sitemap finishes without a page: it is not a refused page.
	_, got := f.take(job, "b2", 5)
	require.Equal(t, urls("sitemap.xml"), got)
	f.claim(job, "b2", "r1", 1)
	_, err = f.s.Record(f.ctx, jobs.Record{Job: job, Batch: "b2", Runner: "r1", Epoch: 1, URL: URL("sitemap.xml")})
	require.NoError(t, err)
	n, err = f.s.Refused(f.ctx, job)
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	_, err = f.s.Refused(f.ctx, "no-such-job")
	assert.ErrorIs(t, err, jobs.ErrNoJob)
}

// ---- Pause, resume, cancel, re-run (SetControl, Control, Release,
// RequeueFailed) ----

func (f *fixture) control(job string) string {
	f.t.Helper()
	st, err := f.s.Control(f.ctx, job)
	require.NoError(f.t, err, "Control %s", job)
	return st
}

func testControl(t *testing.T, f *fixture) {
	job := f.newJob("j", 0, "a")
	other := f.newJob("k", 0, "a")
	assert.Equal(t, jobs.ControlRunning, f.control(job), "a job never paused is running")
	assert.Equal(t, jobs.ControlRunning, f.control(JobID(t, "unknown")), "a job not stored (yet) is running")

	for _, state := range []string{jobs.ControlPaused, jobs.ControlPaused, jobs.ControlRunning, jobs.ControlCancelled, jobs.ControlRunning} {
		require.NoError(t, f.s.SetControl(f.ctx, job, state), "SetControl %s", state)
		assert.Equal(t, state, f.control(job))
		assert.Equal(t, jobs.ControlRunning, f.control(other), "another job's state changed")
	}
	err := f.s.SetControl(f.ctx, job, "stopped")
	require.Error(t, err, "an unknown control state")
	assert.Equal(t, jobs.ControlRunning, f.control(job), "a refused SetControl changed the state")

	// A job paused before its workflow stored it: the state waits for it.
	early := JobID(t, "early")
	require.NoError(t, f.s.SetControl(f.ctx, early, jobs.ControlPaused))
	_, err = f.s.CreateJob(f.ctx, Spec(early, 0, URL("a")), Entries(0, URL("a")))
	require.NoError(t, err)
	assert.Equal(t, jobs.ControlPaused, f.control(early))
}

func testExtendHalted(t *testing.T, f *fixture) {
	job := f.newJob("j", 0, "a", "b", "c", "d", "e", "f")
	f.take(job, "b1", 2)
	f.claim(job, "b1", "r1", 1)
	for _, state := range []string{jobs.ControlPaused, jobs.ControlCancelled} {
		require.NoError(t, f.s.SetControl(f.ctx, job, state))
		more, err := f.s.Extend(f.ctx, job, "b1", 1, 2)
		require.ErrorIs(t, err, jobs.ErrHalted, "Extend of a %s job", state)
		assert.Empty(t, more)
		assert.Equal(t, jobs.Stats{Seen: 6, Queued: 4}, f.stats(job), "a %s job handed URLs out", state)
		assert.Equal(t, 2, f.batch(job, "b1").Size)
	}
	// A stale holder learns it is fenced, not that the job is paused.
	_, err := f.s.Extend(f.ctx, job, "b1", 7, 2)
	requireStale(t, err, "Extend at a stale epoch of a cancelled job")

	require.NoError(t, f.s.SetControl(f.ctx, job, jobs.ControlRunning))
	more, err := f.s.Extend(f.ctx, job, "b1", 1, 2)
	require.NoError(t, err, "Extend once resumed")
	assert.Equal(t, Entries(0, URL("c"), URL("d")), more)
}

func testRelease(t *testing.T, f *fixture) {
	job := f.newJob("j", 0, "a", "b", "c", "d", "e", "f")
	_, got := f.take(job, "b1", 2)
	require.Equal(t, urls("a", "b"), got)
	f.claim(job, "b1", "r1", 1)
	more, err := f.s.Extend(f.ctx, job, "b1", 1, 2)
	require.NoError(t, err)
	require.Len(t, more, 2) // c, d
	f.record(job, "b1", "r1", 1, URL("a"), URL("x"))
	_, err = f.s.Record(f.ctx, jobs.Record{Job: job, Batch: "b1", Runner: "r1", Epoch: 1, URL: URL("c")}) // robots
	require.NoError(t, err)
	assert.Equal(t, jobs.Stats{Seen: 7, Queued: 3, Recorded: 1}, f.stats(job))

	require.NoError(t, f.s.SetControl(f.ctx, job, jobs.ControlPaused))
	n, err := f.s.Release(f.ctx, job, "b1", 1)
	require.NoError(t, err)
	assert.Equal(t, 2, n, "b and d were not finished")
	assert.Equal(t, jobs.Stats{Seen: 7, Queued: 5, Recorded: 1}, f.stats(job), "released URLs are queued again")
	b := f.batch(job, "b1")
	assert.Equal(t, jobs.BatchRunning, b.State, "the batch stays its holder's")
	assert.Equal(t, int64(1), b.Epoch, "Release does not fence")
	un, err := f.s.Unfinished(f.ctx, job, "b1")
	require.NoError(t, err)
	assert.Empty(t, un)

	// A retried Release finds nothing more to give back.
	n, err = f.s.Release(f.ctx, job, "b1", 1)
	require.NoError(t, err)
	assert.Zero(t, n)
	assert.Equal(t, 5, f.stats(job).Queued)

	// A page of a released URL that arrives late is not recorded by this
	// batch: the URL is queued again.
	_, err = f.s.Record(f.ctx, jobs.Record{Job: job, Batch: "b1", Runner: "r1", Epoch: 1, URL: URL("b"),
		Page: Page(job, "b1", "r1", 1, URL("b"), 0, "")})
	require.NoError(t, err)
	assert.False(t, f.isRecorded(job, URL("b")))

	done, err := f.s.FinishBatch(f.ctx, job, "b1", 1)
	require.NoError(t, err, "a batch whose unfinished URLs were released finishes")
	assert.Equal(t, jobs.BatchDone, done.State)

	// Resumed: the released URLs go out first (frontier order), then the
	// rest; each is recorded once.
	require.NoError(t, f.s.SetControl(f.ctx, job, jobs.ControlRunning))
	_, got = f.take(job, "b2", 10)
	assert.Equal(t, urls("b", "d", "e", "f", "x"), got)
	f.claim(job, "b2", "r2", 1)
	for _, u := range got {
		f.record(job, "b2", "r2", 1, u)
	}
	_, err = f.s.FinishBatch(f.ctx, job, "b2", 1)
	require.NoError(t, err)
	assert.ElementsMatch(t, urls("a", "b", "d", "e", "f", "x"), f.resultURLs(job))
	assert.Equal(t, jobs.Stats{Seen: 7, Queued: 0, Recorded: 6}, f.stats(job))
}

func testReleaseStale(t *testing.T, f *fixture) {
	job := f.newJob("j", 0, "a", "b", "c")
	f.take(job, "b1", 3)
	f.claim(job, "b1", "r1", 1)
	f.claim(job, "b1", "r2", 2) // a backup took the batch over
	_, err := f.s.Release(f.ctx, job, "b1", 1)
	requireStale(t, err, "Release by a fenced holder")
	un, err := f.s.Unfinished(f.ctx, job, "b1")
	require.NoError(t, err)
	assert.Len(t, un, 3, "a refused Release moved URLs")
	assert.Zero(t, f.stats(job).Queued)

	f.record(job, "b1", "r2", 2, URL("a"))
	_, err = f.s.FinishBatch(f.ctx, job, "b1", 2)
	require.Error(t, err, "b and c are not finished")
	n, err := f.s.Requeue(f.ctx, job, "b1", 3)
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	_, err = f.s.Release(f.ctx, job, "b1", 3)
	requireStale(t, err, "Release of a re-queued batch")
	assert.Equal(t, jobs.Stats{Seen: 3, Queued: 2, Recorded: 1}, f.stats(job), "counted once")
}

func testRequeueFailed(t *testing.T, f *fixture) {
	job := f.newJob("j", 0, "ok", "bad1", "bad2", "robots")
	f.take(job, "b1", 4)
	f.claim(job, "b1", "r1", 1)
	bad2 := Page(job, "b1", "r1", 1, URL("bad2"), 0, "HTTP 503")
	bad2.BodyRef = jobs.BodiesStore
	_, err := f.s.RecordAll(f.ctx, []jobs.Record{
		{Job: job, Batch: "b1", Runner: "r1", Epoch: 1, URL: URL("ok"), Page: Page(job, "b1", "r1", 1, URL("ok"), 0, "")},
		{Job: job, Batch: "b1", Runner: "r1", Epoch: 1, URL: URL("bad1"), Page: Page(job, "b1", "r1", 1, URL("bad1"), 0, "HTTP 404")},
		{Job: job, Batch: "b1", Runner: "r1", Epoch: 1, URL: URL("bad2"), Page: bad2, Body: jobs.CompressBody([]byte("busy"))},
		{Job: job, Batch: "b1", Runner: "r1", Epoch: 1, URL: URL("robots")},
	})
	require.NoError(t, err)
	_, err = f.s.FinishBatch(f.ctx, job, "b1", 1)
	require.NoError(t, err)
	assert.Equal(t, jobs.Stats{Seen: 4, Recorded: 3, Failed: 2}, f.stats(job))

	n, err := f.s.RequeueFailed(f.ctx, job)
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	assert.Equal(t, jobs.Stats{Seen: 4, Queued: 2, Recorded: 1, Failed: 0}, f.stats(job))
	assert.Equal(t, []string{URL("ok")}, f.resultURLs(job), "the failed pages left the results")
	_, err = f.s.Body(f.ctx, job, URL("bad2"))
	assert.ErrorIs(t, err, jobs.ErrNoBody, "a failed page's body left with it")
	refused, err := f.s.Refused(f.ctx, job)
	require.NoError(t, err)
	assert.Equal(t, 1, refused, "a URL refused by robots.txt is not re-run")

	n, err = f.s.RequeueFailed(f.ctx, job)
	require.NoError(t, err)
	assert.Zero(t, n, "a retried RequeueFailed queues nothing more")
	assert.Equal(t, 2, f.stats(job).Queued)

	// The re-run: bad1 succeeds, bad2 fails again; each URL is in the
	// results once.
	_, got := f.take(job, "b2", 10)
	assert.ElementsMatch(t, urls("bad1", "bad2"), got)
	f.claim(job, "b2", "r2", 1)
	f.record(job, "b2", "r2", 1, URL("bad1"))
	_, err = f.s.Record(f.ctx, jobs.Record{Job: job, Batch: "b2", Runner: "r2", Epoch: 1, URL: URL("bad2"),
		Page: Page(job, "b2", "r2", 1, URL("bad2"), 0, "HTTP 503")})
	require.NoError(t, err)
	_, err = f.s.FinishBatch(f.ctx, job, "b2", 1)
	require.NoError(t, err)
	assert.ElementsMatch(t, urls("ok", "bad1", "bad2"), f.resultURLs(job))
	assert.Equal(t, jobs.Stats{Seen: 4, Queued: 0, Recorded: 3, Failed: 1}, f.stats(job))
	for _, p := range f.results(job) {
		if p.URL == URL("bad1") {
			assert.Empty(t, p.Error, "the re-run's page replaced the failed one")
			assert.Equal(t, "b2", p.Batch)
		}
	}
	n, err = f.s.RequeueFailed(f.ctx, job)
	require.NoError(t, err)
	assert.Equal(t, 1, n, "bad2 again")

	_, err = f.s.RequeueFailed(f.ctx, JobID(t, "unknown"))
	assert.ErrorIs(t, err, jobs.ErrNoJob)
}

func testRequeueFailedMaxPages(t *testing.T, f *fixture) {
	job := f.newJob("j", 2, "a", "b", "c")
	_, got := f.take(job, "b1", 10)
	require.Equal(t, urls("a", "b"), got, "max_pages 2")
	f.claim(job, "b1", "r1", 1)
	f.record(job, "b1", "r1", 1, URL("a"))
	_, err := f.s.Record(f.ctx, jobs.Record{Job: job, Batch: "b1", Runner: "r1", Epoch: 1, URL: URL("b"),
		Page: Page(job, "b1", "r1", 1, URL("b"), 0, "timeout after 15s")})
	require.NoError(t, err)
	n, err := f.s.RequeueFailed(f.ctx, job)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	_, got = f.take(job, "b2", 10)
	assert.Equal(t, urls("b"), got, "the failed URL again, and still no more than max_pages URLs")
}
