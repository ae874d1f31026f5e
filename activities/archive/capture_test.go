package archive_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/batoncrawl/baton/activities/archive"
	"github.com/nlnwa/gowarc/v3"
)

const page = "<html><title>Gzip</title><body>" + "compressible text " + "</body></html>"

// gzipSite answers gzip'd when the request accepts gzip, plain otherwise,
// and a large plain body on /big.
func gzipSite(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			_, _ = w.Write(bytes.Repeat([]byte("b"), 100_000))
			return
		}
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("ETag", `"g1"`)
		if !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			_, _ = io.WriteString(w, page)
			return
		}
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		_, _ = io.WriteString(zw, page)
		_ = zw.Close()
	}))
	t.Cleanup(srv.Close)
	return srv
}

// collector is a Sink keeping what it gets.
type collector struct {
	mu  sync.Mutex
	got []archive.Exchange
}

func (c *collector) sink(_ context.Context, e archive.Exchange) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = append(c.got, e)
}

func (c *collector) only(t *testing.T) archive.Exchange {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.got) != 1 {
		t.Fatalf("%d exchanges captured, want 1", len(c.got))
	}
	return c.got[0]
}

func get(t *testing.T, rt http.RoundTripper, url string) (*http.Response, string) {
	t.Helper()
	res, err := (&http.Client{Transport: rt}).Get(url)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	return res, string(b)
}

// A gzip'd answer is stored gzip'd in the WARC (Content-Encoding: gzip in
// the stored header, gzip bytes as payload) while the caller reads the
// decoded page, whether or not the transport under the capture would
// decode by itself.
func TestCaptureStoresGzipBodiesAsReceived(t *testing.T) {
	srv := gzipSite(t)
	for name, rt := range map[string]http.RoundTripper{
		"NewTransport":     archive.NewTransport(),
		"DefaultTransport": http.DefaultTransport,
	} {
		t.Run(name, func(t *testing.T) {
			var c collector
			res, got := get(t, archive.Capture(rt, c.sink, archive.CaptureOptions{}), srv.URL+"/p")
			if got != page || res.Header.Get("Content-Encoding") != "" || !res.Uncompressed {
				t.Errorf("caller read %q (Content-Encoding %q, Uncompressed %v), want the decoded page",
					got, res.Header.Get("Content-Encoding"), res.Uncompressed)
			}
			e := c.only(t)
			if e.RemoteIP != "127.0.0.1" || e.Truncated != "" || !strings.Contains(string(e.RequestHeader), "Accept-Encoding: gzip\r\n") {
				t.Errorf("exchange: ip %q truncated %q request %q", e.RemoteIP, e.Truncated, e.RequestHeader)
			}

			dir := t.TempDir()
			w := newWriter(t, dir, nil)
			rec := write(t, w, e)
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			s := byID(t, readDir(t, dir), rec.ID)
			if s.status != "HTTP/1.1 200 OK" || !strings.Contains(s.httpHdr, "Content-Encoding: gzip\r\n") {
				t.Errorf("stored head %q %q, want Content-Encoding: gzip", s.status, s.httpHdr)
			}
			if !bytes.HasPrefix(s.payload, []byte{0x1f, 0x8b}) {
				t.Fatalf("stored payload %q is not gzip", s.payload)
			}
			zr, err := gzip.NewReader(bytes.NewReader(s.payload))
			if err != nil {
				t.Fatal(err)
			}
			if plain, err := io.ReadAll(zr); err != nil || string(plain) != page {
				t.Errorf("stored payload decodes to %q, %v", plain, err)
			}
			if s.h[gowarc.WarcPayloadDigest] != sha256Digest(s.payload) {
				t.Errorf("payload digest %s is not that of the gzip bytes", s.h[gowarc.WarcPayloadDigest])
			}
		})
	}
}

// KeepEncoded hands the caller the gzip bytes; a request that sets its own
// Accept-Encoding gets what it asked for, undecoded, as from Go.
func TestCaptureKeepEncodedAndCallersOwnAcceptEncoding(t *testing.T) {
	srv := gzipSite(t)
	var c collector
	res, got := get(t, archive.Capture(archive.NewTransport(), c.sink, archive.CaptureOptions{KeepEncoded: true}), srv.URL+"/p")
	if res.Header.Get("Content-Encoding") != "gzip" || !strings.HasPrefix(got, "\x1f\x8b") {
		t.Errorf("KeepEncoded: caller got %q with Content-Encoding %q", got[:min(len(got), 10)], res.Header.Get("Content-Encoding"))
	}
	if e := c.only(t); string(e.Body) != got {
		t.Errorf("archived body differs from the body read")
	}

	var c2 collector
	req, _ := http.NewRequest("GET", srv.URL+"/p", nil)
	req.Header.Set("Accept-Encoding", "identity")
	res2, err := (&http.Client{Transport: archive.Capture(archive.NewTransport(), c2.sink, archive.CaptureOptions{})}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res2.Body)
	_ = res2.Body.Close()
	if e := c2.only(t); string(b) != page || string(e.Body) != page || strings.Contains(string(e.ResponseHeader), "Content-Encoding") {
		t.Errorf("identity request: read %q, archived %q", b, e.Body)
	}
}

// A body past MaxBodyBytes is archived truncated ("length") while the
// caller reads all of it; a body the caller closes unread is still
// archived whole.
func TestCaptureBoundsAndDrains(t *testing.T) {
	srv := gzipSite(t)
	var c collector
	_, got := get(t, archive.Capture(archive.NewTransport(), c.sink, archive.CaptureOptions{MaxBodyBytes: 1024}), srv.URL+"/big")
	e := c.only(t)
	if len(got) != 100_000 || len(e.Body) != 1024 || e.Truncated != "length" {
		t.Errorf("caller read %d bytes; archived %d, truncated %q; want 100000, 1024, length", len(got), len(e.Body), e.Truncated)
	}

	var c2 collector
	res, err := (&http.Client{Transport: archive.Capture(archive.NewTransport(), c2.sink, archive.CaptureOptions{})}).Get(srv.URL + "/big")
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if e := c2.only(t); len(e.Body) != 100_000 || e.Truncated != "" {
		t.Errorf("closed unread: archived %d bytes, truncated %q", len(e.Body), e.Truncated)
	}
}

// A POST's body (one the request can give again) is in the request record.
func TestCaptureRecordsARequestBody(t *testing.T) {
	srv := gzipSite(t)
	var c collector
	client := &http.Client{Transport: archive.Capture(archive.NewTransport(), c.sink, archive.CaptureOptions{})}
	res, err := client.Post(srv.URL+"/form", "application/x-www-form-urlencoded", strings.NewReader("q=shoes&page=2"))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	_ = res.Body.Close()
	e := c.only(t)
	if string(e.RequestBody) != "q=shoes&page=2" || !strings.Contains(string(e.RequestHeader), "Content-Length: 14\r\n") {
		t.Errorf("request header %q body %q", e.RequestHeader, e.RequestBody)
	}
	dir := t.TempDir()
	w := newWriter(t, dir, nil)
	rec := write(t, w, e)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	req := byID(t, readDir(t, dir), rec.RequestID)
	if !strings.HasPrefix(string(req.block), "POST /form HTTP/1.1\r\n") || string(req.payload) != "q=shoes&page=2" {
		t.Errorf("request record %q", req.block)
	}
}
