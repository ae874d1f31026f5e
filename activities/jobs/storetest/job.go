package storetest

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/jobs"
)

// The job's row: CreateJob, Spec, AddSeeds, secrets, the store's
// identity, several jobs side by side.

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

// testAddSeedsSharedValues: a chunk of seeds whose rows share their
// depth, label and data (as a seed file's do), and their host (for a
// statement's rows of the store, a thousand), or all but one row, keeps
// each row's own values.
func testAddSeedsSharedValues(t *testing.T, f *fixture) {
	job := f.newJob("j", 0)
	paths := seq("s", 2500)
	in := make([]jobs.Entry, len(paths))
	for i, p := range paths {
		u := URL(p)
		if i >= 1000 && i < 2000 && i%2 == 1 {
			u = "https://other.example/" + p
		}
		in[i] = labelled(1, u, "S", `{"k":1}`)
	}
	in[2200] = labelled(0, URL(paths[2200]), "T", "")
	n, err := f.s.AddSeeds(f.ctx, job, in)
	require.NoError(t, err)
	assert.Equal(t, len(in), n)
	f.take(job, "b1", 3000)
	requireEntries(t, in, batchEntries(f.entries(job, "b1")), "Entries")
}

// testAddSeedsInBulk: a chunk of seeds larger than one statement of the
// store (several full statements and a partial one), with URLs repeated
// in the chunk and URLs queued before, queues each URL once, counts only
// the new ones and keeps each seed's label.
func testAddSeedsInBulk(t *testing.T, f *fixture) {
	job := f.newJob("j", 0, "p0007")
	paths := seq("p", 2500)
	in := Entries(0, urls(paths...)...)
	for i := range in {
		in[i].Label = "L" + paths[i]
	}
	in = append(in, in[10], in[2499]) // repeated in the chunk
	n, err := f.s.AddSeeds(f.ctx, job, in)
	require.NoError(t, err)
	assert.Equal(t, 2499, n, "p0007 was queued by CreateJob; the repeats count once")
	n, err = f.s.AddSeeds(f.ctx, job, Entries(0, URL("p0500"), URL("new")))
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Equal(t, jobs.Stats{Seen: 2501, Queued: 2501}, f.stats(job))
	b, got := f.take(job, "b1", 3000)
	assert.Equal(t, 2501, b.Size)
	assert.ElementsMatch(t, append(urls(paths...), URL("new")), got)
	for _, e := range f.entries(job, "b1") {
		if e.URL != URL("p0007") && e.URL != URL("new") {
			assert.Equal(t, "L"+strings.TrimPrefix(e.URL, URL("")), e.Label, "the label of %s", e.URL)
		}
	}
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

	// A rotation swaps them, once, from the key they are of.
	require.ErrorIs(t, f.s.ReplaceSecrets(f.ctx, job, "key0", "key2", []byte("re-wrapped")), jobs.ErrNoSecrets)
	require.NoError(t, f.s.ReplaceSecrets(f.ctx, job, "key1", "key2", []byte("re-wrapped")))
	require.ErrorIs(t, f.s.ReplaceSecrets(f.ctx, job, "key1", "key2", []byte("re-wrapped")), jobs.ErrNoSecrets)
	id, got, err = f.s.Secrets(f.ctx, job)
	require.NoError(t, err)
	assert.Equal(t, "key2", id)
	assert.Equal(t, []byte("re-wrapped"), got)
}

// testDeleteJob: a job's rows go, in every table, its sealed secrets
// included; another job's stay.
func testDeleteJob(t *testing.T, f *fixture) {
	job, other := f.newJob("j", 0, "a", "b"), f.newJob("k", 0, "a")
	require.NoError(t, f.s.PutSecrets(f.ctx, job, "key1", []byte("sealed")))
	require.NoError(t, f.s.PutSecrets(f.ctx, other, "key1", []byte("sealed")))
	n, err := f.s.DeleteJob(f.ctx, job)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, n, int64(4), "the job, its two URLs, its secrets")
	_, _, err = f.s.Secrets(f.ctx, job)
	require.ErrorIs(t, err, jobs.ErrNoSecrets)
	_, err = f.s.Spec(f.ctx, job)
	require.ErrorIs(t, err, jobs.ErrNoJob)
	_, err = f.s.DeleteJob(f.ctx, job)
	require.ErrorIs(t, err, jobs.ErrNoJob)
	_, _, err = f.s.Secrets(f.ctx, other)
	require.NoError(t, err, "another job's secrets stay")
	assert.Equal(t, jobs.Stats{Seen: 1, Queued: 1}, f.stats(other))
}

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
