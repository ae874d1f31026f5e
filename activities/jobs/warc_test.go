package jobs_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/archive/archivetest"
	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/jobs"
)

// warcResponses reads the WARC files of dir, checking every record's
// digests, and returns the blocks of the response records by target URI.
func warcResponses(t *testing.T, dir string) map[string][]string {
	t.Helper()
	open, _ := filepath.Glob(filepath.Join(dir, "*.open"))
	assert.Empty(t, open, "every file closed when the batch ended")
	out := map[string][]string{}
	for _, r := range archivetest.Read(t, archivetest.Files(t, dir)...) {
		if r.Type == "response" {
			out[r.URI] = append(out[r.URI], r.Block)
		}
	}
	return out
}

// A job with a WARC directory archives every response its batches fetch,
// as received: a gzip page keeps its encoding and bytes; the pages are
// still extracted from the decoded HTML.
func TestCrawlWritesWARC(t *testing.T) {
	var zipped bytes.Buffer
	zw := gzip.NewWriter(&zipped)
	_, _ = io.WriteString(zw, "<html><head><title>Zipped</title></head><body><a href='/plain'>p</a></body></html>")
	require.NoError(t, zw.Close())
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		switch r.URL.Path {
		case "/robots.txt":
			w.Header().Set("Content-Type", "text/plain")
			_, _ = io.WriteString(w, "User-agent: *\nAllow: /\n")
		case "/":
			_, _ = io.WriteString(w, "<html><head><title>Home</title></head><body><a href='/gz'>z</a></body></html>")
		case "/gz":
			w.Header().Set("Content-Encoding", "gzip")
			_, _ = w.Write(zipped.Bytes())
		case "/plain":
			_, _ = io.WriteString(w, "<html><head><title>Plain</title></head></html>")
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	dir := filepath.Join(t.TempDir(), "warc")
	st := openStore(t)
	opts := crawl.DefaultOptions()
	opts.Follow, opts.MaxDepth = true, 3
	opts.AllowedDomains = []string{strings.TrimPrefix(srv.URL, "http://")}
	spec := jobs.Spec{ID: "warc-job", Group: testGroup, Seeds: []string{srv.URL + "/"}, Options: opts, BatchSize: 10, WARCPath: dir}
	crawlJob(t, st, spec)

	titles := map[string]string{}
	require.NoError(t, st.Results(testCtx(t), spec.ID, func(p jobs.PageRecord) error {
		titles[strings.TrimPrefix(p.URL, srv.URL)] = p.Title
		return nil
	}))
	assert.Equal(t, map[string]string{"/": "Home", "/gz": "Zipped", "/plain": "Plain"}, titles)

	got := warcResponses(t, dir)
	for _, path := range []string{"/robots.txt", "/", "/gz", "/plain"} {
		assert.Len(t, got[srv.URL+path], 1, "one response record of %s", path)
	}
	if gz := got[srv.URL+"/gz"]; len(gz) == 1 {
		head, body, _ := strings.Cut(gz[0], "\r\n\r\n")
		assert.Contains(t, head, "Content-Encoding: gzip")
		assert.Equal(t, zipped.String(), body, "the body as sent, still gzip")
	}
	files, _ := filepath.Glob(filepath.Join(dir, "warc-job-*.warc.gz"))
	assert.NotEmpty(t, files, "files named after the job")

	// warcio.js, the parser replayweb.page uses, reads every record and
	// finds every block and payload digest right.
	t.Run("warcio", func(t *testing.T) {
		archivetest.CheckValid(t, files...)
	})
}
