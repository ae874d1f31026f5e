package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/batoncrawl/baton/activities/archive"
	"github.com/batoncrawl/baton/activities/crawler"
)

// This file writes a job's WARC archive (Spec.WARCPath, crawl --warc): every
// response its batches fetch on this worker, as received, into WARC files
// under the job's directory on the worker's machine.

// warcDir checks a job's warc_path as bodiesDir checks a bodies_path: it
// must stay under the operator's bodies root.
func (l Limits) warcDir(p string, onDisk bool) (string, error) {
	dir, _, err := l.bodiesDir(p, onDisk)
	var le *LimitError
	if errors.As(err, &le) {
		c := *le
		c.Field = "warc_path"
		return "", &c
	}
	return dir, err
}

// withWARC returns jr as one batch runs it: when the job archives (its
// warc_path, or its crawler's crawler.Archive), its options send every
// exchange to a WARC writer of the batch's own (files named after the job,
// rotated by size), and done closes the writer when the batch ends (its
// files renamed without .open). A job that does not archive gets jr
// itself.
func withWARC(jr *jobRun, l Limits, log *slog.Logger) (run *jobRun, done func(), err error) {
	dir, cfg := warcOf(jr, l)
	if dir == "" {
		return jr, func() {}, nil
	}
	if log == nil {
		log = slog.Default()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, fmt.Errorf("job %s: WARC directory: %w", jr.spec.ID, err)
	}
	w, err := archive.NewWriter(dir, cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("job %s: WARC writer: %w", jr.spec.ID, err)
	}
	c := *jr
	c.spec.Options.Archive = func(ctx context.Context, e archive.Exchange) {
		n := warcNoteOf(ctx)
		rec, err := n.write(ctx, w, e)
		if err != nil {
			log.Warn("WARC record not written", "job", jr.spec.ID, "url", e.URL, "err", err)
			return
		}
		n.wrote(e, rec)
	}
	return &c, func() {
		if err := w.Close(); err != nil {
			log.Warn("WARC files not closed", "job", jr.spec.ID, "dir", dir, "err", err)
		}
	}, nil
}

// warcOf is where a job's archive goes ("" for a job that does not
// archive) and its writer's config: the job's warc_path (checked by
// Limits.Apply), else the directory its crawler's Archive names (the
// crawler is the operator's code: an absolute directory anywhere, a
// relative one under the bodies root); the crawler's file size either
// way.
func warcOf(jr *jobRun, l Limits) (string, archive.Config) {
	cfg := archive.DefaultConfig()
	if len(jr.spec.ID) <= 100 {
		cfg.Prefix = jr.spec.ID
	}
	var w crawler.WARC
	var declared bool
	if jr.crawler != nil {
		w, declared = jr.crawler.Archiving()
	}
	if declared {
		cfg.MaxFileSize = w.FileBytes()
	}
	switch {
	case jr.spec.WARCPath != "":
		return jr.spec.WARCPath, cfg
	case declared:
		return w.JobDir(l.BodiesRoot, jr.spec.ID), cfg
	}
	return "", cfg
}
