package jobs

import (
	"bufio"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/roles"
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
	origins []string // scheme://host of its URLs, each once, in order
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
// ErrBadSubmission.
func ScanSeedFile(name string, stdin io.Reader) (*SeedFile, error) {
	sf := &SeedFile{name: name, path: name, hostSet: map[string]bool{}}
	var r io.Reader = stdin
	var spool *bufio.Writer
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
		spool = bufio.NewWriter(tmp)
	}
	fail := func(err error) (*SeedFile, error) {
		sf.Close()
		return nil, err
	}
	var bad []string
	nBad := 0
	originSet := map[string]bool{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		u, err := url.Parse(s)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
			err = (roles.Request{URL: s}).Validate() // what is wrong, in a Request's words
		}
		if err == nil {
			_, err = crawl.NormalizeURL(s)
		}
		if err == nil {
			err = CheckURLLength(s)
		}
		if err != nil {
			nBad++
			if len(bad) < maxBadSeeds {
				bad = append(bad, fmt.Sprintf("  %s:%d: %v", name, line, err))
			}
			continue
		}
		sf.count++
		if spool != nil {
			spool.WriteString(s + "\n")
		}
		if h := u.Hostname(); !sf.hostSet[h] && len(sf.hosts) <= MaxDefaultDomains {
			sf.hostSet[h] = true
			sf.hosts = append(sf.hosts, h)
		}
		if o := strings.ToLower(u.Scheme) + "://" + u.Host; !originSet[o] {
			originSet[o] = true
			sf.origins = append(sf.origins, o)
		}
	}
	if err := sc.Err(); err != nil {
		return fail(badSubmission("seeds file %s line %d: %v", name, line+1, err))
	}
	if spool != nil {
		if err := spool.Flush(); err != nil {
			return fail(err)
		}
	}
	if nBad > 0 {
		more := ""
		if nBad > len(bad) {
			more = fmt.Sprintf("\n  … and %d more", nBad-len(bad))
		}
		return fail(badSubmission("seeds file %s: %d bad lines (nothing submitted):\n%s%s", name, nBad, strings.Join(bad, "\n"), more))
	}
	if sf.count == 0 {
		return fail(badSubmission("seeds file %s: no URL in it", name))
	}
	return sf, nil
}
