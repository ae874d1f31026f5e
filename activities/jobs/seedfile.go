package jobs

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
)

// maxBadSeeds is how many bad lines of a seed file are reported.
const maxBadSeeds = 10

// SeedFile is a seed file checked whole (ScanSeedFile) and read again,
// line by line, when its seeds go to the store (Plan.Queue): a million
// seeds are never in memory at once. Not safe for concurrent use.
type SeedFile struct {
	name    string // as given (- for stdin)
	path    string // the file to read again (stdin is spooled to a temporary file)
	spool   bool   // path is a temporary file to remove
	count   int    // URLs in it (a URL on several lines counts each time)
	hosts   []string
	hostSet map[string]bool
	origins []string      // scheme://host of its URLs, each once, in order
	anyAt   bool          // some URL holds an @
	anyQ    bool          // some URL holds a ?
	spoolTo *bufio.Writer // while stdin is scanned: its copy
}

// Name is the file as given ("-" for stdin).
func (sf *SeedFile) Name() string { return sf.name }

// Count is how many URLs the file holds.
func (sf *SeedFile) Count() int { return sf.count }

// Hosts are the host names of its URLs, each once, in order (at most
// MaxDefaultDomains+1).
func (sf *SeedFile) Hosts() []string { return sf.hosts }

// Origins are the scheme://host of its URLs, each once, in order.
func (sf *SeedFile) Origins() []string { return sf.origins }

// mayHoldSecrets reports whether a URL of the file may hold a secret:
// an @ in one (a user:password), or a ? when parameters are secret.
func (sf *SeedFile) mayHoldSecrets(secretParams bool) bool {
	return sf.anyAt || secretParams && sf.anyQ
}

// Close removes the spooled copy of stdin, if any. A nil SeedFile is fine.
func (sf *SeedFile) Close() {
	if sf != nil && sf.spool {
		os.Remove(sf.path)
	}
}

// Each calls fn for every URL of the file, in order.
func (sf *SeedFile) Each(fn func(string) error) error {
	f, err := os.Open(sf.path)
	if err != nil {
		return fmt.Errorf("%w: seeds file: %w", ErrBadSubmission, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		if err := fn(s); err != nil {
			return err
		}
	}
	return sc.Err()
}

// ScanSeedFile checks a seed file (or stdin for "-"): one URL per line,
// blank lines and '#' comments skipped. Every bad line is reported with
// its line number (the first ten) and nothing is submitted: errors wrap
// ErrBadSubmission. The lines are checked in blocks by a goroutine per
// core (checkSeedLines) and taken in the file's order.
func ScanSeedFile(name string, stdin io.Reader) (*SeedFile, error) {
	sf := &SeedFile{name: name, path: name, hostSet: map[string]bool{}}
	var r io.Reader = stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, fmt.Errorf("%w: seeds file: %w", ErrBadSubmission, err)
		}
		defer f.Close()
		r = f
	} else {
		tmp, err := os.CreateTemp("", "baton-seeds-*")
		if err != nil {
			return nil, err
		}
		defer tmp.Close()
		sf.path, sf.spool = tmp.Name(), true
		sf.spoolTo = bufio.NewWriter(tmp)
	}
	fail := func(err error) (*SeedFile, error) {
		sf.Close()
		return nil, err
	}
	sc := newSeedScan(sf)
	lines, err := checkSeedLines(r, sc.take)
	if err != nil {
		return fail(badSubmission("seeds file %s line %d: %v", name, lines+1, err))
	}
	if sf.spoolTo != nil {
		if err := sf.spoolTo.Flush(); err != nil {
			return fail(err)
		}
		sf.spoolTo = nil
	}
	if sc.nBad > 0 {
		more := ""
		if sc.nBad > len(sc.bad) {
			more = fmt.Sprintf("\n  … and %d more", sc.nBad-len(sc.bad))
		}
		return fail(badSubmission("seeds file %s: %d bad lines (nothing submitted):\n%s%s", name, sc.nBad, strings.Join(sc.bad, "\n"), more))
	}
	if sf.count == 0 {
		return fail(badSubmission("seeds file %s: no URL in it", name))
	}
	return sf, nil
}

// seedScan gathers the checked lines of a seed file, in order, into it.
type seedScan struct {
	sf        *SeedFile
	bad       []string
	nBad      int
	originSet map[string]bool
}

func newSeedScan(sf *SeedFile) *seedScan {
	return &seedScan{sf: sf, originSet: map[string]bool{}}
}

// take adds one checked line (number n, from 1) of the file.
func (sc *seedScan) take(n int, l seedLine) {
	sf := sc.sf
	switch {
	case l.skip:
		return
	case l.err != nil:
		sc.nBad++
		if len(sc.bad) < maxBadSeeds {
			sc.bad = append(sc.bad, fmt.Sprintf("  %s:%d: %v", sf.name, n, l.err))
		}
		return
	}
	sf.count++
	sf.anyAt, sf.anyQ = sf.anyAt || l.at, sf.anyQ || l.query
	if sf.spoolTo != nil {
		sf.spoolTo.WriteString(l.url)
		sf.spoolTo.WriteByte('\n')
	}
	if h := l.host; !sf.hostSet[h] && len(sf.hosts) <= MaxDefaultDomains {
		sf.hostSet[h] = true
		sf.hosts = append(sf.hosts, h)
	}
	if o := l.origin; !sc.originSet[o] {
		sc.originSet[o] = true
		sf.origins = append(sf.origins, o)
	}
}
