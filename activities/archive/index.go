package archive

import (
	"fmt"
	"strings"
	"sync"
)

// Index maps payload digests and URIs to the response records first
// written for them: the originals that revisit records refer to. It
// holds originals only (Add refuses a revisit), so a revisit written from
// it never points at another revisit. Safe for concurrent use.
type Index struct {
	mu       sync.RWMutex
	byDigest map[string]Original
	byURI    map[string]Original
}

// NewIndex returns an empty index.
func NewIndex() *Index {
	return &Index{byDigest: map[string]Original{}, byURI: map[string]Original{}}
}

// Add records r as the original of its payload digest (unless one is
// known already: the first stays) and as its URI's latest original. A
// revisit record is refused with ErrNotOriginal.
func (x *Index) Add(r Record) error {
	o, err := r.Original()
	if err != nil {
		return err
	}
	if o.PayloadDigest == "" {
		return fmt.Errorf("archive index: record %s of %s has no payload digest", r.ID, r.TargetURI)
	}
	k := digestKey(o.PayloadDigest)
	x.mu.Lock()
	defer x.mu.Unlock()
	if _, ok := x.byDigest[k]; !ok {
		x.byDigest[k] = o
	}
	x.byURI[o.TargetURI] = o
	return nil
}

// Lookup returns the original response record of a payload digest.
func (x *Index) Lookup(payloadDigest string) (Original, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	o, ok := x.byDigest[digestKey(payloadDigest)]
	return o, ok
}

// LookupURI returns the latest original response record of a URI (what
// a 304 answer to a conditional request refers to).
func (x *Index) LookupURI(uri string) (Original, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	o, ok := x.byURI[uri]
	return o, ok
}

// Len is the number of payload digests known.
func (x *Index) Len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.byDigest)
}

// digestKey is a digest with its algorithm's name in lower case and its
// value in upper case (base32 and base16 values are case-insensitive).
func digestKey(d string) string {
	alg, val, ok := strings.Cut(d, ":")
	if !ok {
		return strings.ToUpper(d)
	}
	return strings.ToLower(alg) + ":" + strings.ToUpper(val)
}

func sameDigest(a, b string) bool { return a != "" && digestKey(a) == digestKey(b) }
