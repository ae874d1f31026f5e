package jobs

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/metadata"
	"github.com/batoncrawl/baton/roles"
)

// A rolling upgrade: two versions of a crawler in one group. A job is
// pinned to the version it started with: its batches go only to Runners
// carrying that version (and never to one without the crawler, or to an
// older worker that advertises nothing); the built-in crawler goes to all.
func TestCarriersPinTheJobsVersion(t *testing.T) {
	ctx := context.Background()
	c := metadata.NewCluster(metadata.NewMemory(), "/t", "g")
	shop := func(v string) roles.Crawlers {
		return roles.Crawlers{List: []roles.CrawlerInfo{{Name: roles.BuiltinCrawler}, {Name: "shop", Version: v}}}
	}
	require.NoError(t, c.SetCrawlers(ctx, "sc-crawler_1", shop("1.0.0")))
	require.NoError(t, c.SetCrawlers(ctx, "sc-crawler_2", shop("1.1.0")))
	require.NoError(t, c.SetCrawlers(ctx, "sc-crawler_3", roles.Crawlers{List: []roles.CrawlerInfo{{Name: roles.BuiltinCrawler}}}))
	// sc-crawler_4 advertises nothing (a worker from before crawlers).
	all := []string{"sc-crawler_1", "sc-crawler_2", "sc-crawler_3", "sc-crawler_4"}

	assert.Equal(t, []string{"sc-crawler_1"}, carriers(ctx, c, all, Spec{Crawler: "shop", CrawlerVersion: "1.0.0"}))
	assert.Equal(t, []string{"sc-crawler_2"}, carriers(ctx, c, all, Spec{Crawler: "shop", CrawlerVersion: "1.1.0"}))
	assert.Empty(t, carriers(ctx, c, all, Spec{Crawler: "shop", CrawlerVersion: "2.0.0"}), "the job waits for a Runner of its version")
	assert.Equal(t, all, carriers(ctx, c, all, Spec{}), "the built-in crawler: every Runner")
	assert.Equal(t, all, carriers(ctx, c, all, Spec{Crawler: roles.BuiltinCrawler}))
}
