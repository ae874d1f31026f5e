package jobs

import (
	"context"
	"errors"
	"net/http"
	"time"
)

// This file is the bulk recording of a recrawl's pages answered 304
// (docs/recrawl.md): the built-in crawler's pages whose server answered
// 304 to the baseline's validators are recorded in groups of their own,
// by one store call per group that copies the baseline's content into the
// run's rows inside the store, instead of the group commits' page by page
// records. A page the store leaves goes to the next group commit.

// NotModifiedResult is what a bulk recording of pages answered 304 did:
// the records it left to the group commits (by index in the call's
// records) and the links it added to the frontier.
type NotModifiedResult struct {
	Left  []int
	Added int
}

// NotModifiedRecorder is a store that records pages answered 304 in bulk
// (sqlstore does). Each record is the page as the per-page path would
// record it (unchangedPage: the 304's status, timing and bytes, the
// baseline's content); the store writes the 304's fields, revisit columns
// and links from the record, and the baseline's content fields
// (BaselineContentKeys) from the baseline's row, so the record's content
// is never encoded. Each record is written exactly as a group commit
// would write it (its links queued, its URL finished in the batch at its
// epoch, its body hash claimed or its duplicate named), in one
// transaction; a record it cannot write so (the baseline's row missing or
// not copyable) is left, by index, to the caller's group commit. A URL
// finished before is not recorded again.
type NotModifiedRecorder interface {
	RecordNotModified(ctx context.Context, baseline string, rs []Record) (NotModifiedResult, error)
}

// BaselineContentKeys are the keys of a page record that a page answered
// 304 takes from its baseline (unchangedPage); the others are the 304's.
var BaselineContentKeys = []string{"content_type", "title", "fields", "canonical", "jsonld", "charset", "body_hash", "links", "sitemaps"}

// WithoutBaselineContent is p without the fields unchangedPage takes from
// the baseline (BaselineContentKeys): what a page answered 304 adds to
// its baseline's record.
func (p PageRecord) WithoutBaselineContent() PageRecord {
	p.ContentType, p.Title, p.Fields, p.Canonical, p.JSONLD, p.Charset, p.BodyHash = "", "", nil, "", nil, "", ""
	p.Links, p.Sitemaps = nil, nil
	return p
}

// maxNotModified bounds the records of one bulk recording of 304s, and
// notModifiedGroup is the group a bulk recording waits for while its
// batch has URLs of its own queued (at most notModifiedLinger).
const (
	maxNotModified    = 500
	notModifiedGroup  = 200
	notModifiedLinger = 200 * time.Millisecond
)

// bulkNotModified reports whether a batch of the job records its pages
// answered 304 in bulk: a job with a baseline, crawled by the built-in
// crawler, on a store that can.
func (r *BatchRunner) bulkNotModified(jr *jobRun) (NotModifiedRecorder, bool) {
	nm, ok := r.Store.(NotModifiedRecorder)
	return nm, ok && jr.spec.Baseline != "" && jr.crawler == nil && !r.NoBulkNotModified
}

// NotModifiedRecord reports whether rec is a page answered 304 that a
// bulk recording takes: unchanged, without a body, items, refused links
// or anything a group commit would count apart.
func NotModifiedRecord(rec Record) bool {
	p := rec.Page
	if p == nil || rec.Revisit == nil || rec.Revisit.Change != ChangeUnchanged || p.StatusCode != http.StatusNotModified ||
		p.Error != "" || p.Carried || p.Rendered || p.RenderReason != "" || p.RenderCrashes != 0 || p.RenderTimedOut ||
		p.Sitemap || p.BodyRef != "" || p.ScreenshotRef != "" || p.DuplicateOf != "" || len(p.LinksRefused) > 0 ||
		p.Items != 0 || p.Skipped != "" || rec.Body != nil || len(rec.Items) > 0 || rec.CarryItemsFrom != "" {
		return false
	}
	for _, l := range rec.Links {
		if CheckURLLength(l.URL) != nil {
			return false
		}
	}
	return true
}

// notModifiedDone is a bulk recording's answer to the batch's loop.
type notModifiedDone struct {
	rs  []Record
	res NotModifiedResult
	err error
}

// onFetchedNotModified takes a fetched page answered 304 into the next
// bulk recording; false: the page is the group commits'.
func (b *batchRun) onFetchedNotModified(rec Record) bool {
	if b.nm == nil || !NotModifiedRecord(rec) {
		return false
	}
	if len(b.nmPending) == 0 {
		b.nmSince = time.Now()
	}
	b.nmPending = append(b.nmPending, rec)
	return true
}

// startNotModified records the pages answered 304 waiting in one bulk
// call, or holds them for a fuller group, as startCommit does.
func (b *batchRun) startNotModified() {
	if b.nm == nil || b.stopping() || b.nmRecording > 0 || len(b.nmPending) == 0 {
		return
	}
	ahead := len(b.queue) >= b.conc || b.plenty && !b.draining && b.size < b.limit
	if b.halted == "" && ahead && len(b.nmPending) < notModifiedGroup && time.Since(b.nmSince) < notModifiedLinger {
		if b.nmLingerC == nil {
			b.nmLingerC = time.After(notModifiedLinger - time.Since(b.nmSince))
		}
		return
	}
	n := min(len(b.nmPending), maxNotModified)
	rs := b.nmPending[:n:n]
	b.nmPending = b.nmPending[n:]
	if len(b.nmPending) > 0 {
		b.nmSince = time.Now()
	}
	b.nmRecording = len(rs)
	baseline := b.jr.spec.Baseline
	go func() {
		res, err := b.nm.RecordNotModified(b.ctx, baseline, rs)
		b.nmDone <- notModifiedDone{rs: rs, res: res, err: err}
	}()
}

// onNotModified counts the pages a bulk recording wrote and hands those
// it left to the group commits.
func (b *batchRun) onNotModified(d notModifiedDone) {
	b.nmRecording = 0
	if d.err != nil {
		if b.ctx.Err() == nil || errors.Is(d.err, ErrStale) {
			b.stop(d.err)
		}
		return
	}
	for _, i := range d.res.Left {
		if len(b.pending) == 0 {
			b.pendingSince = time.Now()
		}
		b.pending = append(b.pending, d.rs[i])
	}
	b.ran += len(d.rs) - len(d.res.Left)
	if d.res.Added > 0 && !b.draining {
		b.exhausted = false
		b.linksGen++
	}
}
