package crawl

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batoncrawl/baton/activities/archive"
	"github.com/batoncrawl/baton/activities/archive/archivetest"
)

// readWARCs reads every finished WARC file of dir, checking each record's
// digests; no file may be left open.
func readWARCs(t *testing.T, dir string) []archivetest.Record {
	t.Helper()
	if open, _ := filepath.Glob(filepath.Join(dir, "*.open")); len(open) > 0 {
		t.Errorf("files still open after Close: %v", open)
	}
	return archivetest.Read(t, archivetest.Files(t, dir)...)
}

func gzipped(t *testing.T, s string) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	_, _ = zw.Write([]byte(s))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// A crawl with Options.Archive writes every response as received: a
// gzip page's bytes and Content-Encoding as the server sent them, while
// the page is still extracted from the decoded HTML; redirects, robots.txt
// and request records too.
func TestFetchWritesWARC(t *testing.T) {
	zipped := gzipped(t, "<html><head><title>Zipped</title></head><body><a href='/'>home</a></body></html>")
	var mu sync.Mutex
	askedGzip := map[string]bool{}
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		askedGzip[r.URL.Path] = strings.Contains(r.Header.Get("Accept-Encoding"), "gzip")
		mu.Unlock()
		switch r.URL.Path {
		case "/robots.txt":
			_, _ = io.WriteString(w, "User-agent: *\nAllow: /\n")
		case "/":
			w.Header().Set("Content-Type", "text/html")
			_, _ = io.WriteString(w, "<html><head><title>Home</title></head><body><a href='/gz'>z</a></body></html>")
		case "/gz":
			w.Header().Set("Content-Type", "text/html")
			w.Header().Set("Content-Encoding", "gzip")
			_, _ = w.Write(zipped)
		case "/old":
			http.Redirect(w, r, "/gz", http.StatusMovedPermanently)
		default:
			http.NotFound(w, r)
		}
	})
	dir := t.TempDir()
	cfg := archive.DefaultConfig()
	w, err := archive.NewWriter(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	opts := testOptions()
	opts.Archive = func(ctx context.Context, e archive.Exchange) {
		if _, err := w.WriteExchange(ctx, e); err != nil {
			t.Errorf("write %s: %v", e.URL, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e := NewEngine()
	titles := map[string]string{}
	for _, path := range []string{"/", "/gz", "/old"} {
		p := e.Fetch(ctx, get(srv.URL+path), Auth{}, 0, opts)
		if !p.OK() {
			t.Fatalf("fetch %s: %s", path, p.Error)
		}
		titles[path] = p.Title
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if titles["/gz"] != "Zipped" || titles["/old"] != "Zipped" || titles["/"] != "Home" {
		t.Errorf("pages extracted from the decoded bodies: got titles %v", titles)
	}
	if !askedGzip["/gz"] {
		t.Errorf("the fetch of /gz did not ask for gzip")
	}

	responses := map[string][]archivetest.Record{}
	requests := map[string]int{}
	for _, r := range readWARCs(t, dir) {
		switch r.Type {
		case "response":
			responses[r.URI] = append(responses[r.URI], r)
		case "request":
			requests[r.URI]++
		}
	}
	for _, path := range []string{"/robots.txt", "/", "/gz", "/old"} {
		if len(responses[srv.URL+path]) == 0 {
			t.Errorf("no response record of %s", path)
		}
		if requests[srv.URL+path] == 0 {
			t.Errorf("no request record of %s", path)
		}
	}
	gz := responses[srv.URL+"/gz"]
	if len(gz) != 2 { // fetched, and reached by the redirect of /old
		t.Fatalf("want 2 response records of /gz, got %d", len(gz))
	}
	for _, r := range gz {
		_, header, body := r.HTTP()
		if !strings.Contains(header, "Content-Encoding: gzip") {
			t.Errorf("response of /gz: Content-Encoding not kept: %q", header)
		}
		if body != string(zipped) {
			t.Errorf("response of /gz: body is not the gzip bytes sent (%d bytes, want %d)", len(body), len(zipped))
		}
	}
	if old := responses[srv.URL+"/old"]; len(old) > 0 {
		if status, _, _ := old[0].HTTP(); !strings.HasPrefix(status, "HTTP/1.1 301") {
			t.Errorf("response of /old: status %q, want the 301", status)
		}
	}
}

// Without Options.Archive the transport is the engine's own: no capture.
func TestArchivedOnlyWhenSet(t *testing.T) {
	base := func() http.RoundTripper { return http.DefaultTransport }
	if got := archived(base, testOptions())(); got != http.DefaultTransport {
		t.Errorf("no Archive: transport wrapped (%T)", got)
	}
	o := testOptions()
	o.Archive = func(context.Context, archive.Exchange) {}
	if got := archived(base, o)(); got == http.DefaultTransport {
		t.Errorf("Archive set: transport not wrapped")
	}
}
