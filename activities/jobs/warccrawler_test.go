package jobs_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/crawler"
	"github.com/batoncrawl/baton/activities/jobs"
)

// A user crawler that declares an archive (crawler.Archive) has every job
// archived in Dir/JOB with no warc_path on the job; a job with a
// warc_path is archived there instead.
func TestCrawlerArchiveDeclared(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		switch r.URL.Path {
		case "/":
			_, _ = io.WriteString(w, "<html><title>Home</title><a href='/a'>a</a></html>")
		case "/a":
			_, _ = io.WriteString(w, "<html><title>A</title></html>")
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	c := crawler.New("keeper", "1")
	c.HandleFunc("", func(ctx context.Context, p *crawler.Page) error {
		_, err := p.EnqueueLinks("a", "", nil)
		return err
	})
	c.Archive(crawler.WARC{Dir: filepath.Join(dir, "declared"), MaxFileBytes: 1 << 20})
	crawlers := map[string]*crawler.Crawler{"keeper": c}
	spec := func(id, warc string) jobs.Spec {
		opts := crawl.DefaultOptions()
		opts.AllowedDomains = []string{strings.TrimPrefix(srv.URL, "http://")}
		return jobs.Spec{ID: id, Group: testGroup, Seeds: []string{srv.URL + "/"}, Options: opts, BatchSize: 10,
			Crawler: "keeper", CrawlerVersion: "1", WARCPath: warc}
	}

	st := openStore(t)
	crawlJobWith(t, st, spec("kept", ""), crawlers)
	got := warcResponses(t, filepath.Join(dir, "declared", "kept"))
	for _, path := range []string{"/robots.txt", "/", "/a"} {
		assert.Len(t, got[srv.URL+path], 1, "one response record of %s", path)
	}

	flag := filepath.Join(dir, "flag")
	crawlJobWith(t, st, spec("flagged", flag), crawlers)
	assert.Len(t, warcResponses(t, flag)[srv.URL+"/a"], 1, "archived under the job's --warc")
	assert.NoDirExists(t, filepath.Join(dir, "declared", "flagged"))
}
