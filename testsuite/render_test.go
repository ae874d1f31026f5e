package testsuite_test

import (
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
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
