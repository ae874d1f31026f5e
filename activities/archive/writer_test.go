package archive_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/batoncrawl/baton/activities/archive"
	"github.com/nlnwa/gowarc/v3"
)

func gz(t *testing.T, s string) string {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := io.WriteString(zw, s); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// An exchange becomes a request and a response record that name each
// other, with valid digests, the target, date and address, after the
// file's warcinfo record; a gzip'd body stays gzip'd.
func TestWriteExchangeRecords(t *testing.T) {
	for _, compress := range []bool{true, false} {
		t.Run(fmt.Sprintf("gzip=%v", compress), func(t *testing.T) {
			dir := t.TempDir()
			w := newWriter(t, dir, func(c *archive.Config) { c.Gzip = compress })
			body := gz(t, "<html><title>Shop</title>price 10</html>")
			e := exchange("http://shop.test/p/1", body, "Content-Encoding: gzip")
			rec := write(t, w, e)
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			recs := readDir(t, dir)
			if len(recs) != 3 || recs[0].typ != "warcinfo" {
				t.Fatalf("records %v, want warcinfo, response, request", types(recs))
			}
			info := recs[0]
			if !strings.Contains(string(info.block), "software: baton") || info.h[gowarc.WarcFilename] != recs[1].file {
				t.Errorf("warcinfo block %q, filename %q (file %s)", info.block, info.h[gowarc.WarcFilename], recs[1].file)
			}
			resp, req := byID(t, recs, rec.ID), byID(t, recs, rec.RequestID)
			if resp.typ != "response" || req.typ != "request" {
				t.Fatalf("types %s, %s", resp.typ, req.typ)
			}
			if resp.h[gowarc.WarcConcurrentTo] != "<"+rec.RequestID+">" || req.h[gowarc.WarcConcurrentTo] != "<"+rec.ID+">" {
				t.Errorf("Concurrent-To: response %q, request %q", resp.h[gowarc.WarcConcurrentTo], req.h[gowarc.WarcConcurrentTo])
			}
			for _, r := range []stored{resp, req} {
				if r.h[gowarc.WarcTargetURI] != e.URL || r.h[gowarc.WarcIPAddress] != "127.0.0.1" ||
					r.h[gowarc.WarcDate] != "2026-11-28T06:30:00.123456789Z" || r.h[gowarc.WarcWarcinfoID] != info.h[gowarc.WarcRecordID] {
					t.Errorf("%s record fields %v", r.typ, r.h)
				}
			}
			if got := resp.h[gowarc.WarcPayloadDigest]; got != sha256Digest([]byte(body)) || rec.PayloadDigest != got {
				t.Errorf("payload digest %q (returned %q), want %q", got, rec.PayloadDigest, sha256Digest([]byte(body)))
			}
			if resp.status != "HTTP/1.1 200 OK" || !strings.Contains(resp.httpHdr, "Content-Encoding: gzip\r\n") {
				t.Errorf("stored head %q %q", resp.status, resp.httpHdr)
			}
			if string(resp.payload) != body {
				t.Errorf("stored payload is not the gzip bytes received")
			}
			if !strings.HasPrefix(string(req.block), "GET /p/1 HTTP/1.1\r\nHost: shop.test\r\n") {
				t.Errorf("request block %q", req.block)
			}
			if rec.File != resp.file || !strings.HasPrefix(rec.File, "test-") || strings.HasSuffix(rec.File, ".gz") != compress {
				t.Errorf("record file %q, read from %q", rec.File, resp.file)
			}
		})
	}
}

func types(recs []stored) []string {
	var out []string
	for _, r := range recs {
		out = append(out, r.typ)
	}
	return out
}

// A revisit points at the original response record, never at another
// revisit: identical payloads and 304 answers alike.
func TestRevisitRefersToTheOriginalResponse(t *testing.T) {
	dir := t.TempDir()
	w := newWriter(t, dir, nil)
	idx := archive.NewIndex()
	ctx := context.Background()
	page := "<html>same content</html>"
	orig, err := w.WriteDeduplicated(ctx, exchange("http://a.test/", page, `ETag: "v1"`), idx)
	if err != nil || orig.Type != "response" {
		t.Fatalf("first fetch: %+v, %v", orig, err)
	}
	var revisits []archive.Record
	for i, e := range []archive.Exchange{
		exchange("http://a.test/", page, `ETag: "v1"`),
		exchange("http://a.test/copy", page),
		notModified("http://a.test/"),
		exchange("http://a.test/", page, `ETag: "v1"`),
	} {
		e.FetchedAt = e.FetchedAt.AddDate(0, 0, i+1)
		r, err := w.WriteDeduplicated(ctx, e, idx)
		if err != nil || r.Type != "revisit" {
			t.Fatalf("refetch %d: %+v, %v", i+1, r, err)
		}
		revisits = append(revisits, r)
		if err := idx.Add(r); err == nil {
			t.Fatalf("the index took revisit %s as an original", r.ID)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	recs := readDir(t, dir)
	if n := len(byType(recs, "revisit")); n != 4 {
		t.Fatalf("%d revisit records, want 4 (%v)", n, types(recs))
	}
	o := byID(t, recs, orig.ID)
	for i, r := range revisits {
		s := byID(t, recs, r.ID)
		wantProfile := gowarc.ProfileIdenticalPayloadDigestV1_1
		if i == 2 {
			wantProfile = gowarc.ProfileServerNotModifiedV1_1
		}
		if s.h[gowarc.WarcRefersTo] != o.h[gowarc.WarcRecordID] || s.h[gowarc.WarcRefersToTargetURI] != "http://a.test/" ||
			s.h[gowarc.WarcRefersToDate] != o.h[gowarc.WarcDate] || s.h[gowarc.WarcProfile] != wantProfile {
			t.Errorf("revisit %d refers to %q %q %q, profile %q; want the original %q %q %q, %q", i+1,
				s.h[gowarc.WarcRefersTo], s.h[gowarc.WarcRefersToTargetURI], s.h[gowarc.WarcRefersToDate], s.h[gowarc.WarcProfile],
				o.h[gowarc.WarcRecordID], "http://a.test/", o.h[gowarc.WarcDate], wantProfile)
		}
		if s.h[gowarc.WarcPayloadDigest] != o.h[gowarc.WarcPayloadDigest] || len(s.payload) != 0 || s.h[gowarc.WarcTruncated] != "length" {
			t.Errorf("revisit %d: payload digest %q, %d payload bytes, truncated %q", i+1,
				s.h[gowarc.WarcPayloadDigest], len(s.payload), s.h[gowarc.WarcTruncated])
		}
	}
}

func notModified(url string) archive.Exchange {
	e := exchange(url, "", `ETag: "v1"`)
	e.StatusLine = "HTTP/1.1 304 Not Modified"
	return e
}

// WriteRevisit refuses a revisit the original does not back.
func TestWriteRevisitRefusesWhatTheOriginalDoesNotBack(t *testing.T) {
	w := newWriter(t, t.TempDir(), nil)
	defer w.Close()
	ctx := context.Background()
	orig := write(t, w, exchange("http://a.test/", "v1"))
	o, err := orig.Original()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteRevisit(ctx, exchange("http://a.test/", "v2"), o); err == nil || !strings.Contains(err.Error(), "differs from the original") {
		t.Errorf("changed payload as a revisit: %v", err)
	}
	rev, err := w.WriteRevisit(ctx, exchange("http://a.test/", "v1"), o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rev.Original(); err == nil {
		t.Errorf("a revisit record offered itself as an original")
	}
	if _, err := w.WriteRevisit(ctx, notModified("http://a.test/"), archive.Original{TargetURI: "http://a.test/"}); err == nil ||
		!strings.Contains(err.Error(), "RecordID") {
		t.Errorf("revisit of an original without ID: %v", err)
	}
}

// A small MaxFileSize spreads records over several files, each opened by
// a warcinfo record, and no file stays ".open" after Close.
func TestRotationBySize(t *testing.T) {
	dir := t.TempDir()
	w := newWriter(t, dir, func(c *archive.Config) { c.MaxFileSize = 4 << 10; c.Gzip = false })
	const n = 30
	for i := range n {
		write(t, w, exchange(fmt.Sprintf("http://r.test/%d", i), strings.Repeat("x", 1000)))
	}
	if open := openFiles(t, dir); len(open) != 1 {
		t.Errorf("before Close: open files %v, want one", open)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	names := files(t, dir)
	if len(names) < 5 {
		t.Fatalf("%d files %v, want several", len(names), names)
	}
	recs := readDir(t, dir)
	if got := len(byType(recs, "response")); got != n {
		t.Errorf("%d responses, want %d", got, n)
	}
	for _, name := range names {
		first, err := readFile(filepath.Join(dir, name))
		if err != nil || len(first) == 0 || first[0].typ != "warcinfo" {
			t.Errorf("%s does not open with warcinfo: %v %v", name, types(first), err)
		}
		if st, _ := os.Stat(filepath.Join(dir, name)); st.Size() > 4<<10+3000 {
			t.Errorf("%s: %d bytes, past the limit by more than a record", name, st.Size())
		}
	}
}

func openFiles(t *testing.T, dir string) []string {
	var out []string
	for _, n := range files(t, dir) {
		if strings.HasSuffix(n, ".open") {
			out = append(out, n)
		}
	}
	return out
}

// Fetch goroutines writing at once produce valid files holding every
// exchange once, each response with its own request.
func TestConcurrentWriters(t *testing.T) {
	dir := t.TempDir()
	w := newWriter(t, dir, func(c *archive.Config) { c.MaxFileSize = 16 << 10; c.MaxOpenFiles = 3 })
	const workers, each = 8, 25
	idx := archive.NewIndex()
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for g := range workers {
		wg.Go(func() {
			for i := range each {
				body := fmt.Sprintf("page %d of worker %d %s", i, g, strings.Repeat("y", 300))
				if i%5 == 0 {
					body = "shared payload" // dedup across goroutines
				}
				e := exchange(fmt.Sprintf("http://c.test/%d/%d", g, i), body)
				if _, err := w.WriteDeduplicated(context.Background(), e, idx); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	recs := readDir(t, dir)
	uris := map[string]int{}
	for _, r := range recs {
		if r.typ == "response" || r.typ == "revisit" {
			uris[r.h[gowarc.WarcTargetURI]]++
			req := byID(t, recs, strings.Trim(r.h[gowarc.WarcConcurrentTo], "<>"))
			if req.typ != "request" || req.h[gowarc.WarcTargetURI] != r.h[gowarc.WarcTargetURI] {
				t.Errorf("%s: its request %s is %s of %s", r.h[gowarc.WarcTargetURI], req.h[gowarc.WarcRecordID], req.typ, req.h[gowarc.WarcTargetURI])
			}
		}
	}
	if len(uris) != workers*each {
		t.Errorf("%d URIs archived, want %d", len(uris), workers*each)
	}
	for u, n := range uris {
		if n != 1 {
			t.Errorf("%s archived %d times", u, n)
		}
	}
	if got := len(byType(recs, "revisit")); got < 1 {
		t.Errorf("no revisit of the shared payload")
	}
	for _, rv := range byType(recs, "revisit") {
		if o := byID(t, recs, strings.Trim(rv.h[gowarc.WarcRefersTo], "<>")); o.typ != "response" {
			t.Errorf("revisit %s refers to a %s", rv.h[gowarc.WarcRecordID], o.typ)
		}
	}
}

// The read-back check fails on a corrupted file: the tests above can fail.
func TestReadBackCatchesACorruptedPayload(t *testing.T) {
	dir := t.TempDir()
	w := newWriter(t, dir, func(c *archive.Config) { c.Gzip = false })
	write(t, w, exchange("http://a.test/", "the original bytes"))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(dir, files(t, dir)[0])
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, bytes.Replace(b, []byte("original"), []byte("ORIGINAL"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readFile(name); err == nil || !strings.Contains(err.Error(), "digest") {
		t.Errorf("corrupted payload read back without a digest error: %v", err)
	}
}
