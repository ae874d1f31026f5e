package jobs

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/revisit"
)

// This file is a run's side of a recrawl (docs/recrawl.md): a job with a
// baseline (Spec.Baseline) reads the baseline's record of each URL it
// fetches, sends its validators, and records the page new, changed or
// unchanged; a 304 takes the baseline's fields, links and items.

// baselineOf reads the baseline's record of url, by key (together with
// the other fetches' reads of the job when the store reads in batches:
// baselineReads); nil when the job has no baseline or the baseline has no
// page of url (a sitemap is no page).
func (r *BatchRunner) baselineOf(ctx context.Context, jr *jobRun, e Entry) (*BaselinePage, error) {
	spec := jr.spec
	if spec.Baseline == "" || e.Depth == SitemapDepth {
		return nil, nil
	}
	if jr.baselines != nil {
		b, err := jr.baselines.page(ctx, e.URL)
		if err != nil {
			return nil, fmt.Errorf("job %s: baseline: %w", spec.ID, err)
		}
		return b, nil
	}
	b, ok, err := r.Store.BaselinePage(ctx, spec.Baseline, e.URL)
	if err != nil {
		return nil, fmt.Errorf("job %s: baseline: %w", spec.ID, err)
	}
	if !ok {
		return nil, nil
	}
	return &b, nil
}

// validators are what a conditional request sends back of b.
func (b *BaselinePage) validators() revisit.Baseline {
	if b == nil {
		return revisit.Baseline{}
	}
	return revisit.Baseline{ETag: b.Revisit.ETag, LastModified: b.Revisit.LastModified, ContentHash: b.Revisit.ContentHash}
}

// conditional returns the request hook of a fetch with baseline b: it
// sets If-None-Match and If-Modified-Since from b's validators (both, the
// ETag first: revisit.Condition), then runs next (a user crawler's
// BeforeRequest, which may change them). Without validators, next.
func conditional(b *BaselinePage, next func(*http.Request) error) func(*http.Request) error {
	v := b.validators()
	if !v.HasValidator() {
		return next
	}
	return func(req *http.Request) error {
		revisit.Condition(req.Header, v)
		if next != nil {
			return next(req)
		}
		return nil
	}
}

// notModified reports whether page is a 304 to the validators of b: the
// baseline's record stands for it.
func notModified(page crawl.Page, b *BaselinePage) bool {
	return b != nil && page.Error == "" && revisit.Classify(page.StatusCode, "", b.validators()) == revisit.Unchanged
}

// builtinHash is the hash of what the built-in crawler extracted of a page:
// its title and its fields (by name), what `baton diff` compares; a page
// of a job that selects no field adds its body's hash (there is nothing
// else to tell its content by). Its links are not content: a page whose
// links alone changed is unchanged (its links are followed all the same).
func builtinHash(p crawl.Page) string {
	parts := []string{p.Title}
	names := make([]string, 0, len(p.Fields))
	for n := range p.Fields {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		parts = append(parts, n+"\x1e"+strings.Join(p.Fields[n], "\x1e"))
	}
	if len(p.Fields) == 0 {
		parts = append(parts, p.BodyHash)
	}
	return revisit.Hash(parts...)
}

// handledHash is the hash of what a user crawler's handler made of a
// page: its items (label and value) and its links.
func handledHash(h handled) string {
	parts := make([]string, 0, len(h.items)+2)
	for _, it := range h.items {
		parts = append(parts, it.Label+"\x1e"+string(it.Value))
	}
	links := make([]string, len(h.links))
	for i, l := range h.links {
		links[i] = l.Label + " " + l.URL
	}
	parts = append(parts, strings.Join(links, "\x1e"), h.skipped)
	return revisit.Hash(parts...)
}

// baselineHash is the content hash of a baseline page: its revisit row's,
// or, for a page of the built-in crawler recorded without one, worked out
// from its record.
func baselineHash(b *BaselinePage, custom bool) string {
	if b.Revisit.ContentHash != "" || custom {
		return b.Revisit.ContentHash
	}
	return builtinHash(b.Page.Page)
}

// unchangedPage makes page (a 304) the baseline's page as fetched now: the
// baseline's title, fields, type, hashes and (when the job follows links
// from this depth) links; the status, timing and bytes are the 304's.
func unchangedPage(page crawl.Page, b *BaselinePage, follow bool) crawl.Page {
	old := b.Page.Page
	page.ContentType, page.Title, page.Fields = old.ContentType, old.Title, old.Fields
	page.Canonical, page.JSONLD, page.Charset, page.BodyHash = old.Canonical, old.JSONLD, old.Charset, old.BodyHash
	page.Links, page.Sitemaps = nil, nil
	if follow {
		page.Links, page.Sitemaps = old.Links, old.Sitemaps
	}
	if page.ETag == "" {
		page.ETag = b.Revisit.ETag
	}
	if page.LastModified == "" {
		page.LastModified = b.Revisit.LastModified
	}
	return page
}

// revisitOf is the revisit row of a page fetched with baseline b (nil:
// none) and the change it records.
func revisitOf(page crawl.Page, b *BaselinePage, hash string, custom bool) *RevisitRecord {
	rv := &RevisitRecord{ETag: page.ETag, LastModified: page.LastModified, ContentHash: hash, Change: ChangeNew}
	switch {
	case b == nil:
	case notModified(page, b):
		rv.Change, rv.ContentHash, rv.SavedBytes = ChangeUnchanged, baselineHash(b, custom), max(b.Page.Bytes-page.Bytes, 0)
		rv.WARC = b.Revisit.WARC
	case page.Error == "" && revisit.Classify(page.StatusCode, hash, revisit.Baseline{ContentHash: baselineHash(b, custom)}) == revisit.Unchanged:
		rv.Change = ChangeUnchanged
	default:
		rv.Change = ChangeChanged
	}
	return rv
}

// carryOver makes rec, a user crawler's page answered 304 (its handler
// did not run), the baseline's: its links queued again at the next depth,
// its items carried over from the baseline job (they keep their IDs).
func carryOver(rec *Record, b *BaselinePage, e Entry, baseline string) {
	rec.Links = make([]Entry, len(b.Revisit.Links))
	for i, l := range b.Revisit.Links {
		l.Depth = e.Depth + 1
		rec.Links[i] = l
	}
	rec.Revisit.Links = b.Revisit.Links
	rec.CarryItemsFrom = baseline
	rec.Page.Items, rec.Page.Skipped = b.Page.Items, b.Page.Skipped
}

// notDue reports whether a job with adaptive intervals carries the
// baseline's page b over without a request: it is not due before its next
// fetch time.
func notDue(spec Spec, b *BaselinePage, now time.Time) bool {
	return spec.Adaptive != nil && b != nil && b.Page.Error == "" && !b.Revisit.NextFetch.IsZero() && now.Before(b.Revisit.NextFetch)
}

// schedule sets rv's adaptive interval and next fetch time for a page
// fetched at now with baseline b (nil: none).
func schedule(rv *RevisitRecord, a *Adaptive, b *BaselinePage, now time.Time) {
	if a == nil {
		return
	}
	rv.Interval = a.Floor
	if b != nil {
		prev := b.Revisit.Interval
		if prev <= 0 {
			prev = a.Floor
		}
		rv.Interval = revisit.NextInterval(prev, rv.Change == ChangeChanged, a.Floor, a.Cap)
	}
	rv.NextFetch = now.Add(rv.Interval)
}

// carried is the record of a page not due (notDue): the baseline's page,
// unchanged, without a request; its links are queued (a user crawler's
// items carried over), its validators, interval and next fetch time kept.
func carried(in BatchRun, spec Spec, e Entry, b *BaselinePage, follow, custom bool) Record {
	pr := b.Page
	pr.Job, pr.Batch, pr.Runner, pr.Epoch, pr.Label = in.Job, in.Batch, in.Runner, in.Epoch, e.Label
	pr.Depth, pr.Bytes, pr.DurationMS, pr.Attempts = max(e.Depth, 0), 0, 0, 0
	pr.DuplicateOf, pr.BodyRef, pr.LinksRefused = "", "", nil
	pr.Change, pr.Carried = ChangeUnchanged, true
	rv := b.Revisit
	rv.Change, rv.SavedBytes, rv.Links = ChangeUnchanged, b.Page.Bytes, nil
	rec := Record{Job: in.Job, Batch: in.Batch, Runner: in.Runner, Epoch: in.Epoch, URL: e.URL, Page: &pr, Revisit: &rv}
	if custom {
		carryOver(&rec, b, e, spec.Baseline)
		return rec
	}
	if !follow {
		pr.Links = nil
	}
	for _, l := range pr.Links {
		rec.Links = append(rec.Links, Entry{URL: l, Depth: e.Depth + 1, Label: spec.Options.LabelOf(l)})
	}
	return rec
}
