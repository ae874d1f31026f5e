package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/batoncrawl/baton/activities/archive"
)

// This file holds what a run keeps of each page for the next run of the
// same crawl (its validators, the hash of its extracted content, when to
// fetch it again, where the archive holds it), and how a run compares
// its pages with its baseline's (Spec.Baseline): docs/recrawl.md.

// Change of a page against its run's baseline.
const (
	ChangeNew       = "new"       // the baseline has no page of the URL (or the run has no baseline)
	ChangeChanged   = "changed"   // fetched again, and its extracted content differs
	ChangeUnchanged = "unchanged" // a 304 to the baseline's validators, or the same extracted content
	ChangeGone      = "gone"      // a page of the baseline the run did not record again
)

// RevisitRecord is what a run keeps of one page for the runs after it
// (one row per job and URL, written with the page by RecordAll).
type RevisitRecord struct {
	// ETag and LastModified are the validators of the response, as
	// received (the baseline's, for a page answered 304).
	ETag         string `json:"etag,omitempty"`
	LastModified string `json:"last_modified,omitempty"`
	// ContentHash is revisit.Hash of the page's extracted content.
	ContentHash string `json:"content_hash,omitempty"`
	// Change is the page's change against the baseline (Change*).
	Change string `json:"change"`
	// SavedBytes are the bytes not downloaded: the baseline page's size,
	// for a page answered 304 or carried over without a request.
	SavedBytes int64 `json:"saved_bytes,omitempty"`
	// Links are a user crawler's links of the page, kept so that a 304
	// enqueues them again (the built-in crawler's are in the page record).
	Links []Entry `json:"links,omitempty"`
	// Interval and NextFetch are the page's adaptive refetch interval and
	// when it is due again (--adaptive); zero: not adaptive.
	Interval  time.Duration `json:"interval,omitempty"`
	NextFetch time.Time     `json:"next_fetch,omitempty"`
	// WARC is the response record that holds the page's content in the
	// job's archive (--warc): the record written by the run that
	// downloaded it, carried forward by the runs that got a 304, so that
	// a revisit record never points at another revisit. Zero: none.
	WARC archive.Original `json:"warc,omitempty"`
}

// BaselinePage is a baseline's record of one URL, as a run reads it when
// it fetches that URL (RunnerStore.BaselinePage).
type BaselinePage struct {
	Page PageRecord
	// Revisit is the baseline's revisit row of the URL; a page recorded
	// by a Baton that kept none has the zero value.
	Revisit RevisitRecord
}

// ChangeStats counts a run's pages by change against its baseline.
type ChangeStats struct {
	New       int `json:"new"`
	Changed   int `json:"changed"`
	Unchanged int `json:"unchanged"`
	// Gone counts the baseline's pages the run has not recorded (so far,
	// while it runs).
	Gone int `json:"gone"`
	// SavedBytes are the bytes not downloaded thanks to the baseline.
	SavedBytes int64 `json:"saved_bytes"`
}

// RevisitReader reads a baseline's record of a URL by key, without
// loading the baseline.
type RevisitReader interface {
	// BaselinePage returns job's page of url with its revisit row; ok
	// false when job has no page of url.
	BaselinePage(ctx context.Context, job, url string) (p BaselinePage, ok bool, err error)
}

// Line says c in one line: "3 new, 1 changed, 96 unchanged, 2 gone
// against BASELINE; 1843200 bytes not downloaded".
func (c ChangeStats) Line(baseline string) string {
	return fmt.Sprintf("%d new, %d changed, %d unchanged, %d gone against %s; %d bytes not downloaded",
		c.New, c.Changed, c.Unchanged, c.Gone, baseline, c.SavedBytes)
}

// Adaptive bounds the adaptive refetch interval of a job's pages
// (Spec.Adaptive): a page's first interval is Floor; it halves towards
// Floor when the page changed and grows by half when not, up to Cap.
type Adaptive struct {
	Floor time.Duration `json:"floor"`
	Cap   time.Duration `json:"cap"`
}
