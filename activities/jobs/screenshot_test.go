package jobs_test

import (
	"bytes"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/crawl/demosite"
	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/activities/render"
)

// --render-screenshots keeps a PNG of each rendered page next to its body
// in the bodies directory, named in the page's record (real Chromium).
func TestRenderScreenshotsNextToBodies(t *testing.T) {
	site := demosite.NewJS(demosite.JSConfig{Items: 3, JSEvery: 1})
	srv := httptest.NewServer(site)
	t.Cleanup(srv.Close)
	cfg := render.DefaultConfig()
	cfg.Tabs, cfg.TempDir = 2, t.TempDir()
	pool, err := render.New(cfg)
	require.NoError(t, err, "install it: make deps")
	t.Cleanup(pool.Close)
	e := crawl.NewEngine()
	e.SetRenderer(pool)

	dir := t.TempDir()
	st := openStore(t)
	opts := crawl.DefaultOptions()
	opts.Follow, opts.MaxDepth, opts.IgnoreRobots = true, 1, true
	opts.AllowedDomains = []string{strings.TrimPrefix(srv.URL, "http://")}
	opts.Render, opts.RenderWait, opts.RenderScreenshots = crawl.RenderAlways, "load", true
	spec := jobs.Spec{ID: "shots", Group: testGroup, Seeds: []string{srv.URL + "/js/"}, Options: opts, BatchSize: 10,
		Bodies: jobs.BodiesDir, BodiesPath: dir}
	crawlJobOn(t, st, spec, e, nil)
	n := 0
	require.NoError(t, st.Results(testCtx(t), spec.ID, func(p jobs.PageRecord) error {
		n++
		assert.True(t, p.Rendered, p.URL)
		require.Equal(t, jobs.ScreenshotFile(spec.ID, p.URL), p.ScreenshotRef, p.URL)
		png, err := os.ReadFile(filepath.Join(dir, p.ScreenshotRef))
		require.NoError(t, err)
		assert.True(t, bytes.HasPrefix(png, []byte("\x89PNG\r\n")), "%s: not a PNG", p.URL)
		return nil
	}))
	assert.Equal(t, 4, n, "the index and its three items")

	spec.ID, spec.Bodies, spec.BodiesPath = "shots-store", jobs.BodiesStore, ""
	err = spec.Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--bodies-dir", "screenshots without a bodies directory")
}
