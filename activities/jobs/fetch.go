package jobs

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/batoncrawl/baton/activities/archive"
	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/crawler"
	"github.com/batoncrawl/baton/roles"
)

// fetch fetches one URL (a page, or a sitemap at SitemapDepth) and
// returns what to record for it.
//
// One path for every crawler: a user crawler's pages (sitemaps apart) are
// handed to the handler of their label (fetchHandled), whose links and
// items are recorded with the page; the built-in crawler's links are the
// engine's.
func (r *BatchRunner) fetch(ctx context.Context, in BatchRun, jr *jobRun, auth crawl.Auth, e Entry, leases *hostLeases) (Record, error) {
	spec := jr.spec
	req := roles.Request{URL: e.URL, Method: "GET", Depth: max(e.Depth, 0)}
	opts := spec.Options
	opts.KeepBody = spec.Bodies != ""
	// The batch's share of the host's parallelism, and the host's next
	// start after a hand-over (the job's parallelism and delay hold across
	// its Runners).
	leases.limit(e.URL, &opts)
	base, err := r.baselineOf(ctx, jr, e)
	if err != nil {
		return Record{}, err
	}
	custom := jr.crawler != nil && e.Depth != SitemapDepth
	if notDue(spec, base, r.now()) {
		return carried(in, spec, e, base, opts.Follow && e.Depth < opts.MaxDepth, custom), nil
	}
	opts.RequestHook = conditional(base, opts.RequestHook)
	var note *warcNote
	if opts.Archive != nil {
		var orig archive.Original
		if base != nil {
			orig = base.Revisit.WARC
		}
		ctx, note = withWARCNote(ctx, e.URL, orig)
	}
	var page crawl.Page
	var h handled
	switch {
	case e.Depth == SitemapDepth:
		opts.KeepBody = false
		page = r.Pages.FetchSitemap(ctx, req, auth, opts)
	case custom:
		page, h = r.fetchHandled(ctx, in, jr, auth, e, opts, base)
		if h.stop != nil {
			return Record{}, h.stop
		}
	default:
		opts.Label = e.Label // picks the label's fields (Options.LabelSelectors)
		page = r.Pages.Fetch(ctx, req, auth, e.Depth, opts)
	}
	if ctx.Err() != nil {
		return Record{}, ctx.Err()
	}
	rec := Record{Job: in.Job, Batch: in.Batch, Runner: in.Runner, Epoch: in.Epoch, URL: e.URL}
	if page.Disallowed {
		// Refused by robots.txt: not fetched, so not a page of the results.
		r.Metrics.PageError(in.Job)
		r.Metrics.RobotsRefusal(in.Job)
		return rec, nil
	}
	unchanged := notModified(page, base)
	if unchanged {
		page = unchangedPage(page, base, opts.Follow && e.Depth < opts.MaxDepth)
	}
	r.Metrics.Page(in.Job, page.StatusCode, page.Error != "", page.Bytes, time.Duration(page.DurationMS)*time.Millisecond)
	r.Metrics.Retries(in.Job, page.Attempts)
	pr := PageRecord{Page: page, Job: in.Job, Batch: in.Batch, Runner: in.Runner, Epoch: in.Epoch}
	if pr.URL == "" {
		pr.URL = e.URL
	}
	pr.Body, pr.Header, pr.Label = nil, nil, e.Label
	if h.err != nil {
		pr.Error = handlerError(h.err)
	}
	pr.Items, pr.Skipped = len(h.items), h.skipped
	if len(page.Body) > 0 && spec.Bodies != "" {
		switch spec.Bodies {
		case BodiesStore:
			rec.Body, pr.BodyRef = CompressBody(page.Body), BodiesStore
		case BodiesDir:
			ref, err := writeBodyFile(jr.bodiesRoot, spec.BodiesPath, in.Job, e.URL, page.Body)
			if err != nil {
				// The page is recorded all the same; the record says why
				// its body is not kept.
				pr.BodyRef = "not stored: " + err.Error()
			} else {
				pr.BodyRef = ref
			}
		}
	}
	if len(page.Screenshot) > 0 && spec.Bodies == BodiesDir {
		pr.ScreenshotRef = writeScreenshot(jr.bodiesRoot, spec.BodiesPath, in.Job, e.URL, page.Screenshot)
	}
	rec.Revisit = revisitOf(page, base, contentHash(page, h, custom, unchanged), custom)
	if o, ok := note.original(page.FinalURL); ok {
		rec.Revisit.WARC = o
	}
	schedule(rec.Revisit, spec.Adaptive, base, r.now())
	pr.Change = rec.Revisit.Change
	rec.Page = &pr
	if custom && unchanged {
		carryOver(&rec, base, e, spec.Baseline)
		return rec, nil
	}
	if custom {
		rec.Links, rec.Items = h.links, h.items
		rec.Revisit.Links = h.links
		return rec, nil
	}
	rec.Links = make([]Entry, 0, len(page.Links)+len(page.Sitemaps))
	depth, label := e.Depth+1, opts.LabelOf
	if e.Depth == SitemapDepth {
		depth, label = 0, spec.seedLabel // the pages a sitemap lists are seeds
	}
	for _, l := range page.Links {
		rec.Links = append(rec.Links, Entry{URL: l, Depth: depth, Label: label(l)})
	}
	for _, l := range page.Sitemaps {
		rec.Links = append(rec.Links, Entry{URL: l, Depth: SitemapDepth})
	}
	return rec, nil
}

// contentHash is the hash of a page's extracted content, "" for a page
// that failed or was answered 304 (its baseline's stands).
func contentHash(page crawl.Page, h handled, custom, unchanged bool) string {
	switch {
	case unchanged || page.Error != "" || h.err != nil:
		return ""
	case custom:
		return handledHash(h)
	}
	return builtinHash(page)
}

// BodyFile is the path, relative to a bodies directory, of the file that
// keeps a job's page body: <job>/<sha256 of the URL>.zst.
func BodyFile(job, url string) string {
	sum := sha256.Sum256([]byte(url))
	return filepath.Join(job, hex.EncodeToString(sum[:])+".zst")
}

// writeBodyFile writes a body, compressed, to dir/BodyFile(job, url)
// (whole or not at all: a temporary file renamed) and returns BodyFile.
// Under a bodies root (root, dir within it, both with their symbolic
// links resolved) it writes through os.Root: a link made under the root
// since the job was checked cannot lead the write out of it.
func writeBodyFile(root, dir, job, url string, body []byte) (string, error) {
	rel := BodyFile(job, url)
	return rel, writeUnder(root, dir, rel, CompressBody(body))
}

// writeUnder writes data to dir/rel, whole or not at all, under the
// bodies root when there is one (writeBodyFile).
func writeUnder(root, dir, rel string, data []byte) error {
	if root != "" {
		return writeBodyFileIn(root, dir, rel, data)
	}
	path := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("bodies directory: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".body-*")
	if err != nil {
		return fmt.Errorf("bodies directory: %w", err)
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), path)
	}
	if werr != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write body %s: %w", path, werr)
	}
	return nil
}

// writeBodyFileIn is writeUnder under the bodies root.
func writeBodyFileIn(root, dir, rel string, data []byte) error {
	sub, err := filepath.Rel(root, dir)
	if err != nil {
		return fmt.Errorf("bodies directory %s: %w", dir, err)
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return fmt.Errorf("bodies root: %w", err)
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return fmt.Errorf("bodies root: %w", err)
	}
	defer r.Close()
	name := filepath.Join(sub, rel)
	if err := r.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return fmt.Errorf("bodies directory: %w", err)
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmpName := filepath.Join(filepath.Dir(name), ".body-"+hex.EncodeToString(rnd[:]))
	tmp, err := r.OpenFile(tmpName, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600) // as os.CreateTemp
	if err != nil {
		return fmt.Errorf("bodies directory: %w", err)
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = r.Rename(tmpName, name)
	}
	if werr != nil {
		_ = r.Remove(tmpName)
		return fmt.Errorf("write body %s: %w", filepath.Join(dir, rel), werr)
	}
	return nil
}

// handlerError is a handler's error as recorded with its page: prefixed
// "handler: ", once (a panic says "handler panicked" itself).
func handlerError(err error) string {
	var pe *crawler.PanicError
	if errors.As(err, &pe) {
		return pe.Error()
	}
	return "handler: " + err.Error()
}
