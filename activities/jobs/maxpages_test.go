package jobs_test

import (
	"bytes"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/crawl/demosite"
	"github.com/batoncrawl/baton/activities/jobs"
)

// A job that stops at its max_pages says so in its stats; one that ends
// below it does not.
func TestReportSaysWhenMaxPagesStoppedTheJob(t *testing.T) {
	site := demosite.New(demosite.Config{Pages: 12, Seed: 1})
	srv := httptest.NewServer(site)
	t.Cleanup(srv.Close)
	for _, c := range []struct {
		maxPages int
		reached  bool
	}{{3, true}, {500, false}} {
		st := openStore(t)
		opts := crawl.DefaultOptions()
		opts.Follow, opts.MaxDepth = true, 3
		opts.AllowedDomains = []string{strings.TrimPrefix(srv.URL, "http://")}
		spec := jobs.Spec{ID: "capped", Group: testGroup, Seeds: []string{srv.URL + "/"}, Options: opts, BatchSize: 10, MaxPages: c.maxPages}
		crawlJob(t, st, spec)
		rep, err := jobs.BuildReport(testCtx(t), st, spec.ID)
		require.NoError(t, err)
		assert.Equal(t, c.reached, rep.MaxPagesReached, "max_pages %d", c.maxPages)
		assert.Equal(t, c.maxPages, rep.MaxPages)
		var out bytes.Buffer
		require.NoError(t, rep.Write(&out))
		if c.reached {
			assert.Equal(t, 3, rep.Pages)
			assert.Contains(t, out.String(), "max pages    3 reached: links beyond it were not crawled")
		} else {
			assert.Greater(t, rep.Pages, 3)
			assert.NotContains(t, out.String(), "max pages")
		}
	}
}
