// Package jobstore keeps crawl jobs on disk under a data directory: per job
// a frontier (the URLs still to fetch, deduplicated against every URL ever
// queued), the batches handed to Runners, and the results, one JSON line
// per page with no page twice. Every operation takes an exclusive flock on
// the job's lock file, so several worker processes (on one machine, or on a
// shared POSIX file system) can use the same job safely. Workflow state
// never holds URLs: only batch IDs and counters.
//
// Layout of <dir>/<job>/:
//
//	meta.json        the job's spec as submitted
//	seen.txt         every normalised URL ever queued (one per line)
//	frontier.jsonl   queued entries, in order; cursor is the read offset
//	cursor           byte offset of the next entry to hand out
//	batches/<id>.json the entries of one batch
//	results.jsonl    one line per recorded page
package jobstore

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"syscall"
)

// ErrNoJob is returned for a job that does not exist.
var ErrNoJob = errors.New("no such job")

// Entry is one URL in a frontier.
type Entry struct {
	URL   string `json:"url"`
	Depth int    `json:"depth"`
}

// Stats counts a job's pages.
type Stats struct {
	Seen     int `json:"seen"`     // URLs ever queued
	Queued   int `json:"queued"`   // waiting in the frontier
	Recorded int `json:"recorded"` // pages written to results
	Failed   int `json:"failed"`   // recorded pages with an error
}

// Store is a directory of jobs. It is safe for concurrent use by goroutines
// and processes.
type Store struct {
	Dir string
	mu  sync.Mutex
	// caches keyed by job; rebuilt from the files when they grew elsewhere
	cache map[string]*jobCache
}

type jobCache struct {
	seen        map[string]bool
	seenOff     int64
	recorded    map[string]bool
	failed      int
	resultsOff  int64
	frontierLen int
	frontOff    int64
}

// Open returns the store under dir, creating it.
func Open(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("job store %s: %w", dir, err)
	}
	return &Store{Dir: dir, cache: map[string]*jobCache{}}, nil
}

var validID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// ValidID reports whether id can name a job (it is a directory name).
func ValidID(id string) error {
	if !validID.MatchString(id) {
		return fmt.Errorf("job id %q: use 1-128 letters, digits, '.', '_' or '-'", id)
	}
	return nil
}

func (s *Store) jobDir(id string) string { return filepath.Join(s.Dir, id) }

// ResultsPath is the JSONL file of a job's results.
func (s *Store) ResultsPath(id string) string { return filepath.Join(s.jobDir(id), "results.jsonl") }

// with runs fn holding the job's file lock and the store mutex.
func (s *Store) with(id string, create bool, fn func(dir string, c *jobCache) error) error {
	if err := ValidID(id); err != nil {
		return err
	}
	dir := s.jobDir(id)
	if create {
		if err := os.MkdirAll(filepath.Join(dir, "batches"), 0o755); err != nil {
			return fmt.Errorf("job %s: %w", id, err)
		}
	} else if _, err := os.Stat(filepath.Join(dir, "meta.json")); err != nil {
		return fmt.Errorf("job %s: %w", id, ErrNoJob)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	lf, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("job %s: lock: %w", id, err)
	}
	defer lf.Close()
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("job %s: lock: %w", id, err)
	}
	defer syscall.Flock(int(lf.Fd()), syscall.LOCK_UN)
	c := s.cache[id]
	if c == nil {
		c = &jobCache{seen: map[string]bool{}, recorded: map[string]bool{}}
		s.cache[id] = c
	}
	if err := s.refresh(dir, c); err != nil {
		return fmt.Errorf("job %s: %w", id, err)
	}
	return fn(dir, c)
}

// refresh reads what other processes appended since the cache was built.
func (s *Store) refresh(dir string, c *jobCache) error {
	off, err := readLines(filepath.Join(dir, "seen.txt"), c.seenOff, func(line []byte) {
		c.seen[string(line)] = true
	})
	if err != nil {
		return err
	}
	c.seenOff = off
	off, err = readLines(filepath.Join(dir, "results.jsonl"), c.resultsOff, func(line []byte) {
		var p struct {
			URL   string `json:"url"`
			Error string `json:"error"`
		}
		if json.Unmarshal(line, &p) == nil && !c.recorded[p.URL] {
			c.recorded[p.URL] = true
			if p.Error != "" {
				c.failed++
			}
		}
	})
	if err != nil {
		return err
	}
	c.resultsOff = off
	off, err = readLines(filepath.Join(dir, "frontier.jsonl"), c.frontOff, func([]byte) { c.frontierLen++ })
	c.frontOff = off
	return err
}

// readLines calls fn for every complete line from offset and returns the
// offset after the last complete line. A torn last line (a crash during a
// write) is cut off, so the next append starts on a fresh line.
func readLines(path string, from int64, fn func([]byte)) (int64, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return from, err
	}
	defer f.Close()
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return from, err
	}
	r := bufio.NewReaderSize(f, 64<<10)
	off := from
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 && line[len(line)-1] == '\n' {
			off += int64(len(line))
			if l := bytes.TrimSpace(line); len(l) > 0 {
				fn(l)
			}
			continue
		}
		if errors.Is(err, io.EOF) {
			if len(line) > 0 {
				if terr := f.Truncate(off); terr != nil {
					return off, terr
				}
			}
			return off, nil
		}
		if err != nil {
			return off, err
		}
	}
}

func appendFile(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Create makes a job with its spec (any JSON value) and queues its seeds;
// calling it again for the same job changes nothing.
func (s *Store) Create(id string, spec any, seeds []Entry, maxPages int) (Stats, error) {
	var st Stats
	err := s.with(id, true, func(dir string, c *jobCache) error {
		meta := filepath.Join(dir, "meta.json")
		if _, err := os.Stat(meta); err == nil {
			st = stats(dir, c)
			return nil
		}
		if _, err := s.enqueue(dir, c, seeds, maxPages, false); err != nil {
			return err
		}
		b, err := json.MarshalIndent(spec, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(meta+".tmp", b, 0o644); err != nil {
			return err
		}
		if err := os.Rename(meta+".tmp", meta); err != nil {
			return err
		}
		st = stats(dir, c)
		return nil
	})
	return st, err
}

// Meta reads a job's spec into v.
func (s *Store) Meta(id string, v any) error {
	if err := ValidID(id); err != nil {
		return err
	}
	b, err := os.ReadFile(filepath.Join(s.jobDir(id), "meta.json"))
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("job %s: %w", id, ErrNoJob)
	}
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// Enqueue adds the entries whose URL was never queued before, up to
// maxPages URLs in all (0: no limit), and returns how many it added.
// Entries must carry normalised URLs.
func (s *Store) Enqueue(id string, entries []Entry, maxPages int) (int, error) {
	var n int
	err := s.with(id, false, func(dir string, c *jobCache) error {
		var err error
		n, err = s.enqueue(dir, c, entries, maxPages, false)
		return err
	})
	return n, err
}

// Requeue puts entries back in the frontier even though they were seen (the
// unfinished part of a batch whose Runner died with nobody to take over).
func (s *Store) Requeue(id string, entries []Entry) (int, error) {
	var n int
	err := s.with(id, false, func(dir string, c *jobCache) error {
		var err error
		n, err = s.enqueue(dir, c, entries, 0, true)
		return err
	})
	return n, err
}

func (s *Store) enqueue(dir string, c *jobCache, entries []Entry, maxPages int, again bool) (int, error) {
	var seenBuf, frontBuf bytes.Buffer
	added := 0
	for _, e := range entries {
		if !again {
			if c.seen[e.URL] || maxPages > 0 && len(c.seen) >= maxPages {
				continue
			}
			c.seen[e.URL] = true
			seenBuf.WriteString(e.URL + "\n")
		}
		b, _ := json.Marshal(e)
		frontBuf.Write(append(b, '\n'))
		added++
	}
	if added == 0 {
		return 0, nil
	}
	// The frontier first: a URL in seen.txt but not in the frontier would be
	// lost, one in the frontier twice is only fetched once (results dedup).
	if err := appendFile(filepath.Join(dir, "frontier.jsonl"), frontBuf.Bytes()); err != nil {
		return 0, err
	}
	c.frontOff += int64(frontBuf.Len())
	c.frontierLen += added
	if seenBuf.Len() > 0 {
		if err := appendFile(filepath.Join(dir, "seen.txt"), seenBuf.Bytes()); err != nil {
			return 0, err
		}
		c.seenOff += int64(seenBuf.Len())
	}
	return added, nil
}

func readCursor(dir string) (int64, int, error) {
	b, err := os.ReadFile(filepath.Join(dir, "cursor"))
	if errors.Is(err, os.ErrNotExist) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, err
	}
	var off int64
	var n int
	if _, err := fmt.Sscanf(string(b), "%d %d", &off, &n); err != nil {
		return 0, 0, fmt.Errorf("cursor file corrupted: %q", b)
	}
	return off, n, nil
}

func writeCursor(dir string, off int64, n int) error {
	p := filepath.Join(dir, "cursor")
	if err := os.WriteFile(p+".tmp", []byte(strconv.FormatInt(off, 10)+" "+strconv.Itoa(n)), 0o644); err != nil {
		return err
	}
	return os.Rename(p+".tmp", p)
}

// TakeBatch removes up to n entries from the frontier, saves them as batch
// id and returns them. Taking the same batch id again returns the saved
// entries (an activity retried after a crash).
func (s *Store) TakeBatch(id, batch string, n int) ([]Entry, error) {
	var out []Entry
	err := s.with(id, false, func(dir string, c *jobCache) error {
		bp := filepath.Join(dir, "batches", batch+".json")
		if b, err := os.ReadFile(bp); err == nil {
			return json.Unmarshal(b, &out)
		}
		off, taken, err := readCursor(dir)
		if err != nil {
			return err
		}
		f, err := os.Open(filepath.Join(dir, "frontier.jsonl"))
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		defer f.Close()
		if _, err := f.Seek(off, io.SeekStart); err != nil {
			return err
		}
		r := bufio.NewReader(f)
		for len(out) < n {
			line, err := r.ReadBytes('\n')
			if len(line) == 0 || line[len(line)-1] != '\n' {
				break
			}
			off += int64(len(line))
			taken++
			var e Entry
			if json.Unmarshal(line, &e) == nil && e.URL != "" {
				out = append(out, e)
			}
			if err != nil {
				break
			}
		}
		if len(out) == 0 {
			return nil
		}
		b, _ := json.Marshal(out)
		if err := os.WriteFile(bp+".tmp", b, 0o644); err != nil {
			return err
		}
		if err := os.Rename(bp+".tmp", bp); err != nil {
			return err
		}
		return writeCursor(dir, off, taken)
	})
	return out, err
}

// Batch returns the entries of a batch taken before.
func (s *Store) Batch(id, batch string) ([]Entry, error) {
	var out []Entry
	b, err := os.ReadFile(filepath.Join(s.jobDir(id), "batches", batch+".json"))
	if err != nil {
		return nil, fmt.Errorf("job %s batch %s: %w", id, batch, err)
	}
	return out, json.Unmarshal(b, &out)
}

// Record appends page (any JSON object with "url" and "error" fields) to
// the results unless a page with the same URL was recorded before; it
// reports whether it wrote. This is what makes every page appear once,
// whatever retries and hand-overs happened.
func (s *Store) Record(id, url string, page any) (bool, error) {
	wrote, _, err := s.RecordWithLinks(id, url, page, nil, 0)
	return wrote, err
}

// RecordWithLinks is Record and Enqueue under one lock: it records page
// (unless url was recorded before) and queues its links.
func (s *Store) RecordWithLinks(id, url string, page any, links []Entry, maxPages int) (wrote bool, added int, err error) {
	err = s.with(id, false, func(dir string, c *jobCache) error {
		var err error
		if added, err = s.enqueue(dir, c, links, maxPages, false); err != nil {
			return err
		}
		if c.recorded[url] {
			return nil
		}
		b, err := json.Marshal(page)
		if err != nil {
			return err
		}
		if err := appendFile(filepath.Join(dir, "results.jsonl"), append(b, '\n')); err != nil {
			return err
		}
		c.resultsOff += int64(len(b) + 1)
		c.recorded[url] = true
		var p struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(b, &p) == nil && p.Error != "" {
			c.failed++
		}
		wrote = true
		return nil
	})
	return wrote, added, err
}

// Recorded reports whether a page for url is in the results.
func (s *Store) Recorded(id, url string) (bool, error) {
	var ok bool
	err := s.with(id, false, func(_ string, c *jobCache) error {
		ok = c.recorded[url]
		return nil
	})
	return ok, err
}

// Stats returns a job's counters.
func (s *Store) Stats(id string) (Stats, error) {
	var st Stats
	err := s.with(id, false, func(dir string, c *jobCache) error {
		st = stats(dir, c)
		return nil
	})
	return st, err
}

func stats(dir string, c *jobCache) Stats {
	_, taken, _ := readCursor(dir)
	return Stats{Seen: len(c.seen), Queued: c.frontierLen - taken, Recorded: len(c.recorded), Failed: c.failed}
}

// Jobs lists the job IDs in the store.
func (s *Store) Jobs() ([]string, error) {
	des, err := os.ReadDir(s.Dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, d := range des {
		if d.IsDir() && ValidID(d.Name()) == nil {
			if _, err := os.Stat(filepath.Join(s.Dir, d.Name(), "meta.json")); err == nil {
				out = append(out, d.Name())
			}
		}
	}
	return out, nil
}
