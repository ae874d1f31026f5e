package testsuite_test

import (
	"bytes"
	"compress/gzip"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/archive/archivetest"
	"github.com/batoncrawl/baton/activities/crawl/demosite"
	"github.com/batoncrawl/baton/testsuite"
)

// A worker binary of crawler code whose crawler asks for an archive
// (crawler.Archive) writes its jobs' responses to WARC files with no flag
// on the job: the files rotate at the crawler's size, pass warcio.js's
// check, and read back to what the site served (a gzip page stays gzip
// with its Content-Encoding); a second run with the first as baseline
// archives its unchanged pages as revisits of the first run's response
// records and its changed pages in full.
func TestCrawlerCodeArchivesWARC(t *testing.T) {
	root := t.TempDir()
	c := testsuite.NewCluster(t, 1, 0, testsuite.FastTimers, testsuite.WithWorkerBinary("./testsuite/testdata/warccrawler"),
		testsuite.WithWorkerArgs("--bodies-root", root))
	site := demosite.New(demosite.Config{Recrawl: 40})
	gz := gzipped(t, `<html><title>gz</title><p class="price">$1.00</p></html>`)
	mux := http.NewServeMux()
	served := &servedLog{}
	mux.Handle("/", served.wrap(site))
	mux.HandleFunc("/gz.html", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"gz1"`)
		if r.Header.Get("If-None-Match") == `"gz1"` {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("Content-Encoding", "gzip")
		_, _ = w.Write(gz)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	served.base = srv.URL
	c.StartAll()
	c.WaitElected(electTimeout)
	args := []string{"--crawler", "archivist", srv.URL + demosite.RecrawlPrefix, srv.URL + "/gz.html",
		"--depth", "100", "--max-pages", "0", "--timers", "fast"}

	pages1, _ := site.RecrawlPages(1)
	p := startCrawl(c, "a1", args...)
	require.NoError(t, p.Wait(3*time.Minute), p.Logs())
	require.Equal(t, 0, p.ExitCode(), p.Logs())
	dir1 := filepath.Join(root, "archive", "a1")
	files1, _ := filepath.Glob(filepath.Join(dir1, "a1-*.warc.gz"))
	assert.Greater(t, len(files1), 1, "rotated at the crawler's 8 KiB")
	open, _ := filepath.Glob(filepath.Join(dir1, "*.open"))
	assert.Empty(t, open, "every file closed")
	first := warcCaptures(t, dir1)
	served1 := served.take()
	served1[srv.URL+"/gz.html"] = string(gz)
	for _, path := range pages1 {
		assert.Contains(t, served1, srv.URL+path, "served in full")
	}
	for url, body := range served1 {
		cp, ok := first[url]
		if assert.True(t, ok, "%s archived", url) {
			assert.Equal(t, "response", cp.typ, url)
			assert.Equal(t, body, cp.payload, "%s replays as served", url)
			assert.True(t, cp.request, "%s has its request record", url)
		}
	}
	assert.Equal(t, "gzip", first[srv.URL+"/gz.html"].encoding, "Content-Encoding kept")

	site.SetRevision(2)
	pages2, changed := site.RecrawlPages(2)
	p = startCrawl(c, "a2", append(args, "--baseline", "a1")...)
	require.NoError(t, p.Wait(3*time.Minute), p.Logs())
	require.Equal(t, 0, p.ExitCode(), p.Logs())
	second := warcCaptures(t, filepath.Join(root, "archive", "a2"))
	served2 := served.take()
	for _, path := range changed {
		assert.Contains(t, served2, srv.URL+path, "changed: served in full")
	}
	for _, path := range append(pages2, "/gz.html") {
		url := srv.URL + path
		cp := second[url]
		switch body, isChanged := served2[url]; {
		case isChanged:
			assert.Equal(t, "response", cp.typ, "%s changed", url)
			assert.Equal(t, body, cp.payload, "%s replays as served", url)
		default:
			assert.Equal(t, "revisit", cp.typ, "%s unchanged", url)
			assert.Equal(t, first[url].id, cp.refersTo, "%s: a revisit of the first run's response", url)
		}
	}

	files, _ := filepath.Glob(filepath.Join(root, "archive", "a*", "*.warc.gz"))
	archivetest.CheckValid(t, files...)
}

// capture is what a test reads of a URL's WARC response or revisit.
type capture struct {
	typ, id, refersTo, payload, encoding string
	request                              bool
}

// warcCaptures reads dir's WARC files (digests checked) and returns each
// URL's response or revisit record, noting the URLs with a request record.
func warcCaptures(t *testing.T, dir string) map[string]capture {
	t.Helper()
	out, requested := map[string]capture{}, map[string]bool{}
	for _, r := range archivetest.Read(t, archivetest.Files(t, dir)...) {
		switch r.Type {
		case "request":
			requested[r.URI] = true
		case "response", "revisit":
			_, _, body := r.HTTP()
			out[r.URI] = capture{typ: r.Type, id: r.ID, refersTo: r.RefersTo, payload: body, encoding: r.HTTPHeader("Content-Encoding")}
		}
	}
	for uri, cp := range out {
		cp.request = requested[uri]
		out[uri] = cp
	}
	return out
}

// servedLog keeps the body of each full (200) answer of a handler, by
// URL: what the site served.
type servedLog struct {
	base   string
	mu     sync.Mutex
	bodies map[string]string
}

func (l *servedLog) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
		if rec.Code == http.StatusOK {
			l.mu.Lock()
			if l.bodies == nil {
				l.bodies = map[string]string{}
			}
			l.bodies[l.base+r.URL.RequestURI()] = rec.Body.String()
			l.mu.Unlock()
		}
	})
}

// take returns the bodies served since the last take.
func (l *servedLog) take() map[string]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.bodies
	l.bodies = nil
	if out == nil {
		out = map[string]string{}
	}
	return out
}

// gzipped is s gzip-compressed.
func gzipped(t *testing.T, s string) []byte {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	_, err := zw.Write([]byte(s))
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return b.Bytes()
}
