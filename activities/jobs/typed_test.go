package jobs_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/jobs"
)

// The URLs the user typed reach the fetcher's options through the
// BatchRunner's store (TypedSpecs), normalised as the frontier holds them;
// the stored spec does not carry them.
func TestTypedSpecs(t *testing.T) {
	ctx := testCtx(t)
	st := openStore(t)
	opts := crawl.DefaultOptions()
	opts.DenyPrivate = true
	spec := jobs.Spec{ID: "typed", Group: "g", Options: opts,
		Seeds:    []string{"HTTP://Shop.Test:80/a?utm_source=x&b=2&a=1", "http://10.0.0.5/"},
		Sitemaps: []string{"http://shop.test/sitemap.xml", "http://shop.test/robots.txt"}}
	_, err := (&jobs.Activities{Store: st}).JobStart(ctx, spec)
	require.NoError(t, err)

	stored, err := st.Spec(ctx, "typed")
	require.NoError(t, err)
	require.Nil(t, stored.Options.TypedURLs, "not part of the stored spec")

	got, err := jobs.TypedSpecs(st).Spec(ctx, "typed")
	require.NoError(t, err)
	want := []string{"http://shop.test/a?a=1&b=2", "http://10.0.0.5/", "http://shop.test/sitemap.xml", "http://shop.test/robots.txt"}
	require.Equal(t, want, got.Options.TypedURLs)
	got.Options.TypedURLs = nil
	require.Equal(t, stored, got, "nothing else changes")

	_, err = jobs.TypedSpecs(st).Spec(ctx, "nope")
	require.ErrorIs(t, err, jobs.ErrNoJob)
}

// A job that keeps tracking parameters types its sitemaps with them, as
// its frontier queues them: the typed URLs are the queued ones.
func TestTypedURLsAreTheQueuedOnes(t *testing.T) {
	opts := crawl.DefaultOptions()
	opts.KeepTrackingParams = true
	spec := jobs.Spec{ID: "typed", Group: "g", Options: opts,
		Seeds:    []string{"http://shop.test/?utm_source=x"},
		Sitemaps: []string{"http://shop.test/sitemap.xml?utm_campaign=feed"}}
	entries, err := spec.SeedEntries(nil)
	require.NoError(t, err)
	var queued []string
	for _, e := range entries {
		queued = append(queued, e.URL)
	}
	require.Equal(t, queued, spec.TypedURLs())
	require.Contains(t, spec.TypedURLs(), "http://shop.test/sitemap.xml?utm_campaign=feed")
}
