package testsuite_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/crawl/demosite"
	"github.com/batoncrawl/baton/activities/render"
	"github.com/batoncrawl/baton/testsuite"
)

// End to end through the CLI: a crawl of a site whose content and links
// are written by script, rendered on the Runners (--render always), with
// a Runner killed by SIGKILL mid-crawl: every item is recorded once, with
// the fields the script wrote, as rendered. Chromium must be installed
// (make deps).
func TestRenderedCrawlSurvivesRunnerKill(t *testing.T) {
	c := testsuite.NewCluster(t, 2, 1, testsuite.FastTimers)
	site := demosite.NewJS(demosite.JSConfig{Items: 40, JSEvery: 1})
	srv := httptest.NewServer(site)
	t.Cleanup(srv.Close)
	c.StartAll()
	c.WaitElected(electTimeout)

	p := startCrawl(c, "js", srv.URL+"/js/", "--follow", "--depth", "3", "--max-pages", "0",
		"--select", "title=h1.title", "--select", "price=span.price", "--render", "always",
		"--batch-size", "4", "--timers", "fast")
	js := c.OpenStore()
	testsuite.Eventually(t, 3*time.Minute, "8 pages recorded", func() (bool, error) {
		return len(readResults(t, js, "js")) >= 8, nil
	})
	killed := c.Process(2).Pid()
	pattern := filepath.Join(os.TempDir(), fmt.Sprintf("%s%d-*", render.DirPrefix, killed))
	var left []string
	testsuite.Eventually(t, time.Minute, "runner 2 rendering (its browsers' user-data-dirs)", func() (bool, error) {
		var err error
		left, err = filepath.Glob(pattern)
		return len(left) > 0 && render.Processes(left...) > 0, err
	})
	c.Kill(2)
	require.NoError(t, p.Wait(5*time.Minute), p.Logs())
	require.Equal(t, 0, p.ExitCode(), p.Logs())

	count := map[string]int{}
	for _, r := range readResults(t, js, "js") {
		count[r.URL]++
		assert.True(t, r.Rendered, "%s not rendered", r.URL)
		assert.Equal(t, "always", r.RenderReason, r.URL)
		assert.Empty(t, r.Error, r.URL)
	}
	for _, path := range site.Items() {
		u, err := crawl.NormalizeURL(srv.URL + path)
		require.NoError(t, err)
		assert.Equal(t, 1, count[u], "%s recorded %d times", path, count[u])
	}
	for u, n := range count {
		assert.Equal(t, 1, n, "%s recorded %d times", u, n)
	}
	recs := readResults(t, js, "js")
	priced := 0
	for _, r := range recs {
		for k := range site.Items() {
			if len(r.Fields["price"]) == 1 && r.Fields["price"][0] == demosite.ItemPrice(k) && len(r.Fields["title"]) == 1 && r.Fields["title"][0] == demosite.ItemTitle(k) {
				priced++
			}
		}
	}
	assert.Equal(t, len(site.Items()), priced, "every item with the title and price its script wrote")

	// Another worker's pool, or the killed one restarted, sweeps the
	// killed worker's browsers: no process of theirs runs, no dir is left.
	c.Start(2)
	testsuite.Eventually(t, time.Minute, "the killed worker's browsers swept", func() (bool, error) {
		now, err := filepath.Glob(pattern)
		return len(now) == 0 && render.Processes(left...) == 0, err
	})
}

// A user crawler's own worker binary whose labels ask for rendering
// (crawler.Rendered): the index's links written by script are found, and
// each item page's handler gets the DOM after its button was clicked and
// the reviews it loads were waited for, with a script's value. Every item
// is pushed once, and the pages are recorded as rendered for their label.
func TestOwnCrawlerRenderedLabels(t *testing.T) {
	site := demosite.NewJS(demosite.JSConfig{Items: 10, JSEvery: 1})
	srv := httptest.NewServer(site)
	t.Cleanup(srv.Close)
	c := testsuite.NewCluster(t, 1, 0, testsuite.FastTimers, testsuite.WithWorkerBinary("./testsuite/testdata/jscrawler"))
	c.Start(1)
	c.WaitElected(electTimeout)

	p := startCrawl(c, "jsown", "--crawler", "jsshop", srv.URL+"/js/", "--timers", "fast")
	require.NoError(t, p.Wait(3*time.Minute), p.Logs())
	require.Equal(t, 0, p.ExitCode(), p.Logs())
	assert.Contains(t, p.Logs(), "rendered     11 (label 11)", "the stats say how many pages were rendered and why")

	js := c.OpenStore()
	recs := readResults(t, js, "jsown")
	require.Len(t, recs, 1+len(site.Items()), "the index and every item")
	for _, r := range recs {
		assert.Empty(t, r.Error, r.URL)
		assert.True(t, r.Rendered, "%s rendered", r.URL)
		assert.Equal(t, crawl.ReasonLabel, r.RenderReason, r.URL)
	}
	items, err := js.Items(context.Background(), "jsown", 0, 100)
	require.NoError(t, err)
	seen := map[string]int{}
	for _, it := range items {
		var v struct {
			URL, Title, Price string
			Reviews           []string
			Counted           int
			Rendered          bool
		}
		require.NoError(t, json.Unmarshal(it.Value, &v))
		k := -1
		_, _ = fmt.Sscanf(strings.TrimPrefix(v.URL, srv.URL), "/js/more/%d.html", &k)
		require.GreaterOrEqual(t, k, 0, v.URL)
		seen[v.URL]++
		assert.Equal(t, demosite.ItemTitle(k), v.Title, v.URL)
		assert.Equal(t, demosite.ItemPrice(k), v.Price, v.URL)
		assert.Equal(t, demosite.ReviewsPerItem, v.Counted, v.URL)
		assert.True(t, v.Rendered, v.URL)
		if assert.Len(t, v.Reviews, demosite.ReviewsPerItem, v.URL) {
			assert.Equal(t, demosite.ItemReview(k, 0), v.Reviews[0])
		}
	}
	assert.Len(t, seen, len(site.Items()), "an item per item page")
	for u, n := range seen {
		assert.Equal(t, 1, n, "%s pushed %d times", u, n)
	}
}
