package jobs

import (
	"context"
	"strings"
	"sync"

	"github.com/batoncrawl/baton/activities/archive"
)

// This file writes the revisit records of a recrawl's archive: a page
// fetched with a baseline whose archive holds it (RevisitRecord.WARC) is
// archived as a revisit of the baseline's response record when the server
// answers 304 (server-not-modified) or sends the same payload
// (identical-payload-digest). A revisit always points at a response
// record: a run that wrote a revisit keeps the baseline's original as its
// own, so the next run refers to it too.

// warcNote is what the archive of one page's fetch needs and tells: the
// page's URL and its baseline's original (zero: none), and the originals
// the fetch's exchanges made (by URL), or that the page was a revisit.
type warcNote struct {
	url  string
	base archive.Original

	mu        sync.Mutex
	originals map[string]archive.Original
	revisited bool
}

type warcNoteKey struct{}

// withWARCNote returns ctx carrying a note for the archive of the fetch of
// url with the baseline's original base.
func withWARCNote(ctx context.Context, url string, base archive.Original) (context.Context, *warcNote) {
	n := &warcNote{url: url, base: base, originals: map[string]archive.Original{}}
	return context.WithValue(ctx, warcNoteKey{}, n), n
}

// warcNoteOf is the note of ctx, or nil.
func warcNoteOf(ctx context.Context) *warcNote {
	n, _ := ctx.Value(warcNoteKey{}).(*warcNote)
	return n
}

// write archives e: as a revisit of the baseline's original when e is the
// page's exchange and a 304 or the original's payload, else as a response.
func (n *warcNote) write(ctx context.Context, w *archive.Writer, e archive.Exchange) (archive.Record, error) {
	if n == nil || e.URL != n.url || n.base.RecordID == "" {
		return w.WriteExchange(ctx, e)
	}
	if status(e.StatusLine) == "304" {
		return w.WriteRevisit(ctx, e, n.base)
	}
	idx := archive.NewIndex()
	if err := idx.Add(archive.Record{Type: "response", ID: n.base.RecordID, TargetURI: n.base.TargetURI, Date: n.base.Date,
		PayloadDigest: n.base.PayloadDigest}); err != nil {
		return w.WriteExchange(ctx, e) // an original without a digest: no revisit by payload
	}
	return w.WriteDeduplicated(ctx, e, idx)
}

// wrote keeps what writing e made: a revisit of the page, or the original
// of a complete 2xx response.
func (n *warcNote) wrote(e archive.Exchange, rec archive.Record) {
	if n == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if rec.Type == "revisit" {
		n.revisited = e.URL == n.url || n.revisited
		return
	}
	if e.Truncated != "" || !strings.HasPrefix(status(e.StatusLine), "2") {
		return
	}
	if o, err := rec.Original(); err == nil {
		n.originals[e.URL] = o
	}
}

// original is the response record holding the page fetched (at finalURL
// or its own URL): the baseline's when it was archived as a revisit.
func (n *warcNote) original(finalURL string) (archive.Original, bool) {
	if n == nil {
		return archive.Original{}, false
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.revisited {
		return n.base, true
	}
	if o, ok := n.originals[finalURL]; ok {
		return o, true
	}
	o, ok := n.originals[n.url]
	return o, ok
}

// status is the code of a status line ("304"), "" if it has none.
func status(statusLine string) string {
	f := strings.Fields(statusLine)
	if len(f) < 2 || len(f[1]) != 3 {
		return ""
	}
	return f[1]
}
