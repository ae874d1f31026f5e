package archive_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/batoncrawl/baton/activities/archive"
	"github.com/batoncrawl/baton/activities/revisit"
	"github.com/nlnwa/gowarc/v3"
)

// A refetch made conditional from the first fetch's validators gets a
// 304, which the site serves without the page, which revisit judges
// unchanged, and which the archive keeps as a server-not-modified revisit
// of the first response record.
func TestConditionalRefetchIsArchivedAsARevisitOfTheOriginal(t *testing.T) {
	var full atomic.Int32
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"v1"`)
		if r.Header.Get("If-None-Match") == `"v1"` {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		full.Add(1)
		_, _ = io.WriteString(w, "<html><title>Stock</title>12 left</html>")
	}))
	defer site.Close()

	dir := t.TempDir()
	w := newWriter(t, dir, nil)
	idx := archive.NewIndex()
	var mu sync.Mutex
	var written []archive.Record
	client := &http.Client{Transport: archive.Capture(archive.NewTransport(), func(ctx context.Context, e archive.Exchange) {
		rec, err := w.WriteDeduplicated(ctx, e, idx)
		if err != nil {
			t.Error(err)
			return
		}
		mu.Lock()
		written = append(written, rec)
		mu.Unlock()
	}, archive.CaptureOptions{})}

	fetch := func(b revisit.Baseline) *http.Response {
		req, _ := http.NewRequest("GET", site.URL+"/stock", nil)
		revisit.Condition(req.Header, b)
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		_ = res.Body.Close()
		return res
	}
	first := fetch(revisit.Baseline{})
	baseline := revisit.Baseline{ETag: first.Header.Get("ETag"), LastModified: first.Header.Get("Last-Modified")}
	second := fetch(baseline)
	if v := revisit.Classify(second.StatusCode, "", baseline); v != revisit.Unchanged {
		t.Errorf("second fetch: status %d judged %v", second.StatusCode, v)
	}
	if n := full.Load(); n != 1 {
		t.Errorf("the site served the full page %d times, want once", n)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if len(written) != 2 || written[0].Type != "response" || written[1].Type != "revisit" {
		t.Fatalf("written %+v, want a response then a revisit", written)
	}
	recs := readDir(t, dir)
	rev, orig := byID(t, recs, written[1].ID), byID(t, recs, written[0].ID)
	if rev.h[gowarc.WarcProfile] != gowarc.ProfileServerNotModifiedV1_1 || rev.h[gowarc.WarcRefersTo] != orig.h[gowarc.WarcRecordID] ||
		rev.status != "HTTP/1.1 304 Not Modified" {
		t.Errorf("revisit %v %q refers to %q, want server-not-modified of %q", rev.h[gowarc.WarcProfile], rev.status,
			rev.h[gowarc.WarcRefersTo], orig.h[gowarc.WarcRecordID])
	}
	req := byID(t, recs, written[1].RequestID)
	if !strings.Contains(string(req.block), "If-None-Match: \"v1\"\r\n") {
		t.Errorf("the conditional request record lacks If-None-Match: %q", req.block)
	}
}
