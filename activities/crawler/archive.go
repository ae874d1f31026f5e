package crawler

import (
	"fmt"
	"path/filepath"
)

// DefaultWARCFileBytes is the size past which a job's WARC file is
// rotated unless WARC.MaxFileBytes says otherwise (1 GB, Heritrix's).
const DefaultWARCFileBytes = 1 << 30

// WARC is how the jobs of a crawler are archived (Crawler.Archive): every
// response their pages get, as received, in WARC/1.1 files on the machine
// of the Runner that fetched it.
type WARC struct {
	// Dir is the directory of the archive on each Runner's machine; the
	// files of a job go in Dir/JOB (named JOB-TIMESTAMP-SERIAL-HOST-TOKEN
	// .warc.gz). A relative Dir is under the worker's --bodies-root.
	Dir string
	// MaxFileBytes is the size past which a file is closed and the next
	// one opened (DefaultWARCFileBytes if 0). A record is never split.
	MaxFileBytes int64
}

// Archive archives every job of the crawler in WARC files, as `baton
// crawl --warc` does for the built-in crawler: each response as received
// (the raw bytes, Content-Encoding kept, with its request record; robots.txt
// and redirects included), files rotated by size, and on a run with a
// baseline a revisit record of the baseline's response for a page
// answered 304 or sent unchanged. A job submitted with --warc DIR is
// archived in DIR instead (with w's file size). Pages of a Rendered label
// are archived as the job's are: the browser's requests are not.
func (c *Crawler) Archive(w WARC) { c.archive = &w }

// Archiving is the crawler's archive, and whether it has one (Archive).
func (c *Crawler) Archiving() (WARC, bool) {
	if c.archive == nil {
		return WARC{}, false
	}
	return *c.archive, true
}

// JobDir is the directory of job's files: Dir/job, a relative Dir under
// root.
func (w WARC) JobDir(root, job string) string {
	dir := w.Dir
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(root, dir)
	}
	return filepath.Join(dir, filepath.Base(job))
}

// FileBytes is the rotation size: MaxFileBytes, else DefaultWARCFileBytes.
func (w WARC) FileBytes() int64 {
	if w.MaxFileBytes > 0 {
		return w.MaxFileBytes
	}
	return DefaultWARCFileBytes
}

// validate checks the archive's fields.
func (w WARC) validate() error {
	switch {
	case w.Dir == "":
		return fmt.Errorf("Dir is empty: name the directory of the archive")
	case !filepath.IsAbs(w.Dir) && !filepath.IsLocal(w.Dir):
		return fmt.Errorf("Dir %q: a relative directory must stay under the bodies root (no ..)", w.Dir)
	case w.MaxFileBytes < 0:
		return fmt.Errorf("MaxFileBytes %d is negative", w.MaxFileBytes)
	}
	return nil
}
