package archive_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/batoncrawl/baton/activities/archive"
	"github.com/nlnwa/gowarc/v3"
)

// stored is one record read back from a WARC file.
type stored struct {
	file    string
	offset  int64
	typ     string
	h       map[string]string // WARC header fields (first value)
	block   []byte
	status  string // HTTP status line of an HTTP block
	httpHdr string // HTTP header fields of an HTTP block
	payload []byte // body of an HTTP block
}

// readDir reads every finished WARC file of dir with gowarc's strict
// reader, checks each record's digests and returns the records in file
// order. Files still open (".open") fail the test.
func readDir(t *testing.T, dir string) []stored {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*"))
	if err != nil {
		t.Fatal(err)
	}
	var out []stored
	for _, name := range names {
		if strings.HasSuffix(name, ".open") {
			t.Errorf("%s: still open after Close", filepath.Base(name))
			continue
		}
		recs, err := readFile(name)
		if err != nil {
			t.Fatalf("%s: %v", filepath.Base(name), err)
		}
		out = append(out, recs...)
	}
	return out
}

func readFile(name string) ([]stored, error) {
	r, err := gowarc.NewWarcFileReader(name, 0, gowarc.WithStrictValidation())
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var out []stored
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, fmt.Errorf("record %d: %w", len(out)+1, err)
		}
		s, err := toStored(filepath.Base(name), rec)
		_ = rec.Close()
		if err != nil {
			return out, fmt.Errorf("record %d at %d: %w", len(out)+1, rec.Offset, err)
		}
		out = append(out, s)
	}
}

func toStored(file string, rec gowarc.Record) (stored, error) {
	wr := rec.WarcRecord
	if err := wr.Block().Cache(); err != nil {
		return stored{}, err
	}
	if v, err := wr.ValidateDigest(); err != nil || len(v) > 0 {
		return stored{}, fmt.Errorf("digest: %v %v", err, v)
	}
	s := stored{file: file, offset: rec.Offset, typ: wr.Type().String(), h: map[string]string{}}
	for _, f := range []string{gowarc.WarcRecordID, gowarc.WarcType, gowarc.WarcTargetURI, gowarc.WarcDate,
		gowarc.WarcIPAddress, gowarc.WarcConcurrentTo, gowarc.WarcPayloadDigest, gowarc.WarcBlockDigest,
		gowarc.WarcRefersTo, gowarc.WarcRefersToTargetURI, gowarc.WarcRefersToDate, gowarc.WarcProfile,
		gowarc.WarcTruncated, gowarc.WarcWarcinfoID, gowarc.WarcFilename, gowarc.ContentType} {
		s.h[f] = wr.WarcHeader().Get(f)
	}
	raw, err := wr.Block().RawBytes()
	if err != nil {
		return stored{}, err
	}
	if s.block, err = io.ReadAll(raw); err != nil {
		return stored{}, err
	}
	if strings.HasPrefix(s.h[gowarc.ContentType], "application/http") {
		head, body, _ := bytes.Cut(s.block, []byte("\r\n\r\n"))
		line, fields, _ := strings.Cut(string(head), "\r\n")
		s.status, s.httpHdr, s.payload = line, fields+"\r\n", body
	}
	return s, nil
}

// byType are the records of type typ.
func byType(recs []stored, typ string) []stored {
	var out []stored
	for _, r := range recs {
		if r.typ == typ {
			out = append(out, r)
		}
	}
	return out
}

func byID(t *testing.T, recs []stored, id string) stored {
	t.Helper()
	for _, r := range recs {
		if r.h[gowarc.WarcRecordID] == "<"+id+">" || r.h[gowarc.WarcRecordID] == id {
			return r
		}
	}
	t.Fatalf("no record %s", id)
	return stored{}
}

// sha256Digest is body's payload digest as a Writer with DigestSHA256
// writes it, computed here independently of the library.
func sha256Digest(body []byte) string {
	sum := sha256.Sum256(body)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// exchange is a 200 answer of url with body.
func exchange(url, body string, header ...string) archive.Exchange {
	host := strings.SplitN(strings.TrimPrefix(url, "http://"), "/", 2)[0]
	h := "Content-Type: text/html\r\n"
	for _, f := range header {
		h += f + "\r\n"
	}
	return archive.Exchange{
		Method:         "GET",
		URL:            url,
		RequestHeader:  []byte("Host: " + host + "\r\nUser-Agent: baton-test\r\n"),
		StatusLine:     "HTTP/1.1 200 OK",
		ResponseHeader: []byte(h),
		Body:           []byte(body),
		RemoteIP:       "127.0.0.1",
		FetchedAt:      time.Date(2026, 11, 28, 6, 30, 0, 123456789, time.UTC),
	}
}

func newWriter(t *testing.T, dir string, edit func(*archive.Config)) *archive.Writer {
	t.Helper()
	cfg := archive.DefaultConfig()
	cfg.Prefix = "test"
	if edit != nil {
		edit(&cfg)
	}
	w, err := archive.NewWriter(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func write(t *testing.T, w *archive.Writer, e archive.Exchange) archive.Record {
	t.Helper()
	r, err := w.WriteExchange(context.Background(), e)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func files(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}
