package archive

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/nlnwa/gowarc/v3"
)

// gowarcMu serialises what builds gowarc records, here and in gowarc's
// file writers (the warcinfo record of a new file): every record builder
// sets a package variable of github.com/google/uuid (EnableRandPool), which
// is not safe for concurrent use, and record IDs read it.
var gowarcMu sync.Mutex

// ErrClosed is returned by writes to a closed Writer.
var ErrClosed = errors.New("archive: writer is closed")

// Writer writes exchanges to rotating WARC/1.1 files in one directory. It
// is safe for concurrent use. Files being written end in ".open"; Close
// finishes them (renamed without the suffix).
type Writer struct {
	cfg     Config
	dir     string
	files   *gowarc.WarcFileWriter
	recOpts []gowarc.WarcRecordOption
	closed  atomic.Bool
}

// NewWriter opens a writer of WARC files in dir (which must exist).
func NewWriter(dir string, cfg Config) (*Writer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if st, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("archive directory: %w", err)
	} else if !st.IsDir() {
		return nil, fmt.Errorf("archive directory %s is not a directory", dir)
	}
	namer, err := newFileNamer(dir, cfg.Prefix)
	if err != nil {
		return nil, err
	}
	enc := gowarc.Base16
	if cfg.DigestAlgorithm == DigestSHA1 {
		enc = gowarc.Base32
	}
	recOpts := []gowarc.WarcRecordOption{
		gowarc.WithVersion(gowarc.V1_1),
		gowarc.WithDefaultDigestAlgorithm(cfg.DigestAlgorithm),
		gowarc.WithDefaultDigestEncoding(enc),
		gowarc.WithAddMissingDigest(true),
		gowarc.WithSpecViolationPolicy(gowarc.ErrFail),
		gowarc.WithSyntaxErrorPolicy(gowarc.ErrFail),
	}
	w := &Writer{cfg: cfg, dir: dir, recOpts: recOpts}
	w.files = gowarc.NewWarcFileWriter(
		gowarc.WithFileNameGenerator(namer),
		gowarc.WithMaxFileSize(cfg.MaxFileSize),
		gowarc.WithCompression(cfg.Gzip),
		gowarc.WithMaxConcurrentWriters(cfg.MaxOpenFiles),
		gowarc.WithAddWarcConcurrentToHeader(true),
		gowarc.WithRecordOptions(recOpts...),
		gowarc.WithWarcInfoFunc(w.warcinfo),
	)
	return w, nil
}

// warcinfo fills the record that opens each file.
func (w *Writer) warcinfo(rb gowarc.WarcRecordBuilder) error {
	fields := "software: " + w.cfg.Software + "\r\n" +
		"format: WARC File Format 1.1\r\n" +
		"conformsTo: http://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/\r\n"
	if w.cfg.Operator != "" {
		fields += "operator: " + oneLine(w.cfg.Operator) + "\r\n"
	}
	_, err := rb.WriteString(fields)
	return err
}

func oneLine(s string) string { return strings.NewReplacer("\r", " ", "\n", " ").Replace(s) }

// WriteExchange writes a request record and a response record holding e's
// response as received; each names the other in WARC-Concurrent-To.
func (w *Writer) WriteExchange(ctx context.Context, e Exchange) (Record, error) {
	if err := w.ready(ctx, e); err != nil {
		return Record{}, err
	}
	resp, err := w.build(gowarc.Response, e, e.responseBlock(), "application/http;msgtype=response")
	if err != nil {
		return Record{}, err
	}
	return w.writePair(e, resp, "response")
}

// WriteRevisit writes a request record and a revisit record of e that
// refers to orig, the response record first written for this content. A
// 304 answer is written with the server-not-modified profile; any other
// with identical-payload-digest, and then e's body must have orig's
// payload digest. The revisit's block is e's status line and header only.
func (w *Writer) WriteRevisit(ctx context.Context, e Exchange, orig Original) (Record, error) {
	if err := w.ready(ctx, e); err != nil {
		return Record{}, err
	}
	if err := orig.validate(); err != nil {
		return Record{}, fmt.Errorf("revisit of %s: %w", e.URL, err)
	}
	resp, err := w.build(gowarc.Response, e, e.responseBlock(), "application/http;msgtype=response")
	if err != nil {
		return Record{}, err
	}
	rev, err := w.toRevisit(e, resp, orig)
	_ = resp.Close()
	if err != nil {
		return Record{}, err
	}
	return w.writePair(e, rev, "revisit")
}

func (w *Writer) toRevisit(e Exchange, resp gowarc.WarcRecord, orig Original) (gowarc.WarcRecord, error) {
	profile := gowarc.ProfileIdenticalPayloadDigestV1_1
	got := resp.WarcHeader().Get(gowarc.WarcPayloadDigest)
	if e.status() == 304 {
		profile = gowarc.ProfileServerNotModifiedV1_1
	} else if !sameDigest(got, orig.PayloadDigest) {
		return nil, fmt.Errorf("revisit of %s: payload digest %s differs from the original %s's %s: write a response record",
			e.URL, got, orig.RecordID, orig.PayloadDigest)
	}
	rev, err := resp.ToRevisitRecord(&gowarc.RevisitRef{
		Profile:        profile,
		TargetRecordId: orig.RecordID,
		TargetUri:      orig.TargetURI,
		TargetDate:     orig.Date.UTC().Format(time.RFC3339Nano),
	})
	if err != nil {
		return nil, fmt.Errorf("revisit of %s: %w", e.URL, err)
	}
	// A fresh record ID: the response record it was made from is not written.
	gowarcMu.Lock()
	id := uuid.New().URN()
	gowarcMu.Unlock()
	rev.WarcHeader().SetId(gowarc.WarcRecordID, id)
	if profile == gowarc.ProfileServerNotModifiedV1_1 {
		rev.WarcHeader().Delete(gowarc.WarcPayloadDigest)
		if orig.PayloadDigest != "" {
			rev.WarcHeader().Set(gowarc.WarcPayloadDigest, orig.PayloadDigest)
		}
	}
	return rev, nil
}

func (w *Writer) ready(ctx context.Context, e Exchange) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("archive write of %s: %w", e.URL, err)
	}
	if w.closed.Load() {
		return ErrClosed
	}
	return e.validate()
}

// build makes a record of type t with e's target, date and address.
func (w *Writer) build(t gowarc.RecordType, e Exchange, block []byte, contentType string) (gowarc.WarcRecord, error) {
	gowarcMu.Lock()
	defer gowarcMu.Unlock()
	rb := gowarc.NewRecordBuilder(t, w.recOpts...)
	rb.AddWarcHeader(gowarc.WarcTargetURI, e.URL)
	rb.AddWarcHeaderTime(gowarc.WarcDate, e.FetchedAt)
	rb.AddWarcHeader(gowarc.ContentType, contentType)
	if e.RemoteIP != "" {
		rb.AddWarcHeader(gowarc.WarcIPAddress, e.RemoteIP)
	}
	if t == gowarc.Response && e.Truncated != "" {
		rb.AddWarcHeader(gowarc.WarcTruncated, e.Truncated)
	}
	if _, err := rb.Write(block); err != nil {
		_ = rb.Close()
		return nil, fmt.Errorf("archive %s record of %s: %w", t, e.URL, err)
	}
	rec, _, err := rb.Build()
	if err != nil {
		return nil, fmt.Errorf("archive %s record of %s: %w", t, e.URL, err)
	}
	return rec, nil
}

// writePair writes main (response or revisit) and e's request record in
// one call, so they refer to each other and follow each other in one file
// (unless the file reaches its size limit between them: then the request
// record opens the next file).
func (w *Writer) writePair(e Exchange, main gowarc.WarcRecord, typ string) (Record, error) {
	req, err := w.build(gowarc.Request, e, e.requestBlock(), "application/http;msgtype=request")
	if err != nil {
		_ = main.Close()
		return Record{}, err
	}
	out := Record{
		ID:            main.WarcHeader().GetId(gowarc.WarcRecordID),
		Type:          typ,
		TargetURI:     e.URL,
		PayloadDigest: main.WarcHeader().Get(gowarc.WarcPayloadDigest),
		RequestID:     req.WarcHeader().GetId(gowarc.WarcRecordID),
	}
	out.Date, _ = main.Date()
	gowarcMu.Lock()
	res := w.files.Write(main, req)
	gowarcMu.Unlock()
	if len(res) != 2 {
		return Record{}, ErrClosed
	}
	if err := errors.Join(res[0].Err, res[1].Err); err != nil {
		return Record{}, fmt.Errorf("archive write of %s: %w", e.URL, err)
	}
	out.File, out.Offset = res[0].FileName, res[0].FileOffset
	return out, nil
}

// Close writes what is queued and finishes every open file.
func (w *Writer) Close() error {
	w.closed.Store(true)
	return w.files.Close()
}

// WriteDeduplicated writes e as a revisit of the original response record
// idx knows for e's payload digest, or else as a response record that it
// adds to idx. A 304 answer is a revisit of idx's original of e's URL.
func (w *Writer) WriteDeduplicated(ctx context.Context, e Exchange, idx *Index) (Record, error) {
	if e.status() == 304 {
		orig, ok := idx.LookupURI(e.URL)
		if !ok {
			return w.WriteExchange(ctx, e)
		}
		return w.WriteRevisit(ctx, e, orig)
	}
	if err := w.ready(ctx, e); err != nil {
		return Record{}, err
	}
	resp, err := w.build(gowarc.Response, e, e.responseBlock(), "application/http;msgtype=response")
	if err != nil {
		return Record{}, err
	}
	if orig, ok := idx.Lookup(resp.WarcHeader().Get(gowarc.WarcPayloadDigest)); ok && e.Truncated == "" {
		rev, err := w.toRevisit(e, resp, orig)
		_ = resp.Close()
		if err != nil {
			return Record{}, err
		}
		return w.writePair(e, rev, "revisit")
	}
	rec, err := w.writePair(e, resp, "response")
	if err != nil {
		return Record{}, err
	}
	if e.Truncated == "" {
		err = idx.Add(rec)
	}
	return rec, err
}
