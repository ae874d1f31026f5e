package testsuite_test

import (
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/archive/archivetest"
	"github.com/batoncrawl/baton/activities/crawl/demosite"
	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/testsuite"
)

// A crawl run again end to end, with real workers: the second run has the
// first as its baseline, the demo site's recrawl section moved to its next
// revision, and a Runner is SIGKILLed while it runs. The site sends no
// full response for an unchanged page (every request for one is
// conditional and answered 304, a re-fetch after the kill too); the pages
// reached only through unchanged pages are crawled all the same; `baton
// diff` names exactly the changed pages and the field that changed, and
// the pages gone; the run's status says its changes; its WARC files hold
// revisit records pointing at the first run's response records and pass
// warcio.js's check.
func TestRecrawlEndToEnd(t *testing.T) {
	root := t.TempDir()
	c := testsuite.NewCluster(t, 2, 1, testsuite.FastTimers, testsuite.WithWorkerArgs("--bodies-root", root))
	site := demosite.New(demosite.Config{Recrawl: 150, Latency: 25 * time.Millisecond})
	srv := httptest.NewServer(site)
	t.Cleanup(srv.Close)
	c.StartAll()
	c.WaitElected(electTimeout)
	js := c.OpenStore()
	args := []string{srv.URL + demosite.RecrawlPrefix, "--follow", "--depth", "100", "--max-pages", "0",
		"--select", "price=.price", "--batch-size", "8", "--timers", "fast"}

	p := startCrawl(c, "r1", append(args, "--warc", "r1")...)
	require.NoError(t, p.Wait(3*time.Minute), p.Logs())
	require.Equal(t, 0, p.ExitCode(), p.Logs())
	pages1, _ := site.RecrawlPages(1)
	assert.ElementsMatch(t, urlsOf(srv.URL, pages1), resultURLs(t, js, "r1"))

	site.SetRevision(2)
	site.ResetHits()
	p = startCrawl(c, "r2", append(args, "--warc", "r2", "--baseline", "r1")...)
	testsuite.Eventually(t, taskTimeout, "40 pages of the second run recorded", func() (bool, error) {
		return len(readResults(t, js, "r2")) >= 40, nil
	})
	c.Kill(2)
	require.NoError(t, p.Wait(3*time.Minute), p.Logs())
	require.Equal(t, 0, p.ExitCode(), p.Logs())
	pages2, changed := site.RecrawlPages(2)
	assert.ElementsMatch(t, urlsOf(srv.URL, pages2), resultURLs(t, js, "r2"), "every page, those only linked from unchanged pages too")
	assert.Contains(t, p.Logs(), "against r1", "the --wait report says the changes")

	// At the site: no full response for an unchanged page.
	answers := site.Answers()
	for _, path := range pages2 {
		a := answers[path]
		switch {
		case slices.Contains(changed, path) || path == demosite.RecrawlPrefix:
			assert.Positive(t, a.Full, "%s changed: sent in full", path)
		default:
			assert.Zero(t, a.Full, "%s unchanged, sent in full", path)
			assert.Positive(t, a.NotModified, "%s unchanged: answered 304", path)
		}
	}

	// baton diff names exactly the changed pages and their field.
	out, code := baton(c, "diff", "r1", "r2", "--output", "json")
	require.Equal(t, 0, code, out)
	var d struct {
		Pages []struct {
			URL    string   `json:"url"`
			Change string   `json:"change"`
			Title  bool     `json:"title_changed"`
			Fields []string `json:"fields_changed"`
		} `json:"pages"`
		Counts map[string]int `json:"counts"`
	}
	require.NoError(t, json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &d), out)
	var gotChanged, gotGone []string
	for _, pg := range d.Pages {
		switch pg.Change {
		case jobs.ChangeChanged:
			gotChanged = append(gotChanged, pg.URL)
			assert.Equal(t, []string{"price"}, pg.Fields, pg.URL)
			assert.False(t, pg.Title, pg.URL)
		case jobs.ChangeGone:
			gotGone = append(gotGone, pg.URL)
		default:
			t.Errorf("%s %s", pg.URL, pg.Change)
		}
	}
	assert.ElementsMatch(t, urlsOf(srv.URL, changed), gotChanged)
	assert.Len(t, gotGone, demosite.RecrawlGone)
	unchanged := len(pages2) - len(changed)

	// The run's own counts, in baton status.
	ch, err := js.Changes(t.Context(), "r2", "r1")
	require.NoError(t, err)
	assert.Equal(t, jobs.ChangeStats{Changed: len(changed), Unchanged: unchanged, Gone: demosite.RecrawlGone, SavedBytes: ch.SavedBytes}, ch)
	assert.Positive(t, ch.SavedBytes)
	out, code = baton(c, "status", "r2")
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, ch.Line("r1"))

	// The archive: revisits of the first run's response records.
	originals := map[string]string{} // response record ID → URI, first run
	for _, r := range archivetest.Read(t, archivetest.Files(t, filepath.Join(root, "r1"))...) {
		if r.Type == "response" {
			originals[r.ID] = r.URI
		}
	}
	revisited := map[string]bool{}
	for _, r := range archivetest.Read(t, archivetest.Files(t, filepath.Join(root, "r2"))...) {
		if r.Type != "revisit" {
			continue
		}
		revisited[r.URI] = true
		uri, ok := originals[r.RefersTo]
		require.True(t, ok, "the revisit of %s refers to %s, no response record of the first run", r.URI, r.RefersTo)
		assert.Equal(t, r.URI, uri)
	}
	// Each unchanged page a live Runner recorded has its revisit record
	// in a closed file (the killed Runner's files stay .open).
	for _, pg := range readResults(t, js, "r2") {
		if pg.Change == jobs.ChangeUnchanged && pg.StatusCode == 304 && pg.Runner != testsuite.Name(2) {
			assert.True(t, revisited[pg.URL], "no revisit record of %s", pg.URL)
		}
	}
	files, _ := filepath.Glob(filepath.Join(root, "r*", "*.warc.gz"))
	archivetest.CheckValid(t, files...)
}

func urlsOf(base string, paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = base + p
	}
	return out
}

func resultURLs(t *testing.T, js jobs.Store, job string) []string {
	var out []string
	for _, p := range readResults(t, js, job) {
		out = append(out, p.URL)
	}
	return out
}
