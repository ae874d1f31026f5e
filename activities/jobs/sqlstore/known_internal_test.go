package sqlstore

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/jobs"
)

// TestKnownURLsBounded: the set answers exactly for what it holds, and
// starts again empty past knownPerJob (a forgotten URL is only sent again).
func TestKnownURLsBounded(t *testing.T) {
	k := &knownURLs{seen: map[[2]uint64]struct{}{}}
	k.add([]string{"http://a.test/1", "http://a.test/2"})
	assert.True(t, k.has("http://a.test/1"))
	assert.False(t, k.has("http://a.test/3"))
	urls := make([]string, knownPerJob)
	for i := range urls {
		urls[i] = fmt.Sprintf("http://b.test/%d", i)
	}
	k.add(urls)
	assert.LessOrEqual(t, len(k.seen), knownPerJob)
	assert.True(t, k.has(urls[len(urls)-1]), "the newest is kept")
}

// TestRecordAllRemembersOnlyCommittedLinks: a group commit remembers the
// links it put into the frontier; a second store (another process) with
// its own memory records the same links as the database knows them, each
// queued once, and remembers the ones it found there.
func TestRecordAllRemembersOnlyCommittedLinks(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s1, err := OpenSQLite(ctx, dir)
	require.NoError(t, err)
	defer s1.Close()
	s2, err := OpenSQLite(ctx, dir)
	require.NoError(t, err)
	defer s2.Close()
	spec := jobs.Spec{ID: "known", Group: "g", Seeds: []string{"http://a.test/"}}
	_, err = s1.CreateJob(ctx, spec, []jobs.Entry{{URL: "http://a.test/"}, {URL: "http://a.test/x"}})
	require.NoError(t, err)
	b, err := s1.TakeBatch(ctx, "known", "known-b0", 2)
	require.NoError(t, err)
	require.Equal(t, 2, b.Size)
	_, err = s1.Claim(ctx, "known", "known-b0", "r1", 1)
	require.NoError(t, err)
	rec := func(s *Store, u string, links ...string) jobs.Recorded {
		page := &jobs.PageRecord{Job: "known", Batch: "known-b0", Runner: "r1", Epoch: 1}
		page.URL, page.StatusCode = u, 200
		r := jobs.Record{Job: "known", Batch: "known-b0", Runner: "r1", Epoch: 1, URL: u, Page: page}
		for _, l := range links {
			r.Links = append(r.Links, jobs.Entry{URL: l, Depth: 1})
		}
		out, err := s.RecordAll(ctx, []jobs.Record{r})
		require.NoError(t, err)
		return out[0]
	}
	assert.Equal(t, 2, rec(s1, "http://a.test/", "http://a.test/l1", "http://a.test/l2").Added)
	assert.True(t, s1.knownFor("known").has("http://a.test/l1"))
	assert.False(t, s2.knownFor("known").has("http://a.test/l1"), "each process remembers its own")
	assert.Equal(t, 1, rec(s2, "http://a.test/x", "http://a.test/l1", "http://a.test/l3").Added, "l1 queued once, by the database's word")
	assert.True(t, s2.knownFor("known").has("http://a.test/l1"), "a link found in the frontier is remembered too")
	st, err := s1.Stats(ctx, "known")
	require.NoError(t, err)
	assert.Equal(t, 5, st.Seen)
}

// TestBatchURLsAreKnown: the URLs a batch was handed (its unfinished ones
// as it opens, a pull's) are known to its process: a page linking back to
// them (a site's home) does not send them again, and a commit taking its
// own links for its free slots takes new ones, not the home page it
// already fetched (taken first in URL order, it filled no slot: the
// database kept it where it was).
func TestBatchURLsAreKnown(t *testing.T) {
	ctx := context.Background()
	s, err := OpenSQLite(ctx, t.TempDir())
	require.NoError(t, err)
	defer s.Close()
	const job, batch, home = "own", "own-b0", "http://a.test/"
	spec := jobs.Spec{ID: job, Group: "g", Seeds: []string{home}}
	_, err = s.CreateJob(ctx, spec, []jobs.Entry{{URL: home}})
	require.NoError(t, err)
	_, err = s.TakeBatch(ctx, job, batch, 1)
	require.NoError(t, err)
	_, err = s.Claim(ctx, job, batch, "r1", 1)
	require.NoError(t, err)
	todo, err := s.Unfinished(ctx, job, batch) // as the batch opens
	require.NoError(t, err)
	require.Len(t, todo, 1)
	assert.True(t, s.knownFor(job).has(home))
	page := &jobs.PageRecord{Job: job, Batch: batch, Runner: "r1", Epoch: 1}
	page.URL, page.StatusCode = home, 200
	r := jobs.Record{Job: job, Batch: batch, Runner: "r1", Epoch: 1, URL: home, Page: page,
		Links: []jobs.Entry{{URL: home, Depth: 1}, {URL: home + "a", Depth: 1}, {URL: home + "b", Depth: 1}, {URL: home + "c", Depth: 1}}}
	_, taken, err := s.RecordTake(ctx, []jobs.Record{r}, 2)
	require.NoError(t, err)
	assert.Equal(t, []jobs.Entry{{URL: home + "a", Depth: 1}, {URL: home + "b", Depth: 1}}, taken, "two free slots, two new links")
	p, err := s.Pull(ctx, job, batch, 1, 5, 5)
	require.NoError(t, err)
	require.Len(t, p.Entries, 1)
	assert.True(t, s.knownFor(job).has(home+"c"), "a pulled URL is known")
}
