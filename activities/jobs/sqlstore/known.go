package sqlstore

import (
	"hash/maphash"
	"sync"

	"github.com/batoncrawl/baton/activities/jobs"
)

// This file holds the store's memory of the URLs it knows are in a job's
// frontier, so that a group commit sends the database only the links it
// may not have seen: on a cross-linked site almost every link of a page
// (its navigation, its related pages) is known, and inserting it again is
// an index probe and a conflict per link for nothing.
//
// It is only ever a shortcut, never a judge: a URL is remembered after the
// transaction that inserted it (or found it there) committed, and frontier
// rows are never deleted, so a URL remembered is in the frontier; a URL
// forgotten (the set is bounded, and each process has its own) is sent
// again and the database's ON CONFLICT decides.

// knownPerJob is how many URLs are remembered per job and process; past
// it the set starts again empty (about 40 bytes a URL).
const knownPerJob = 1 << 18

// knownURLs is a bounded set of a job's URLs, by a 128-bit hash (two
// independent 64-bit maphash values: a false "known" would lose a page,
// and at 2^-128 per pair it never happens). Safe for concurrent use.
type knownURLs struct {
	mu   sync.Mutex
	seen map[[2]uint64]struct{}
}

var knownSeeds = [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}

func knownKey(u string) [2]uint64 {
	return [2]uint64{maphash.String(knownSeeds[0], u), maphash.String(knownSeeds[1], u)}
}

func (k *knownURLs) has(u string) bool {
	key := knownKey(u)
	k.mu.Lock()
	_, ok := k.seen[key]
	k.mu.Unlock()
	return ok
}

func (k *knownURLs) add(urls []string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, u := range urls {
		if len(k.seen) >= knownPerJob {
			clear(k.seen)
		}
		k.seen[knownKey(u)] = struct{}{}
	}
}

// remember notes entries read from job's frontier (a pull's, a batch's
// unfinished URLs) as known: the pages a batch fetches are linked from the
// pages it fetches next (a site's home and navigation), and each such link
// would otherwise be sent once by every process, and taken by a commit
// for a free slot it then does not fill (RecordTake: a link there before
// stays where it is).
func (s *frontierStore) remember(job string, entries []jobs.Entry) {
	if len(entries) == 0 {
		return
	}
	urls := make([]string, len(entries))
	for i, e := range entries {
		urls[i] = e.URL
	}
	s.knownFor(job).add(urls)
}

// knownFor returns the set of job's URLs known to be in its frontier.
func (s *frontierStore) knownFor(job string) *knownURLs {
	if v, ok := s.known.Load(job); ok {
		return v.(*knownURLs)
	}
	v, _ := s.known.LoadOrStore(job, &knownURLs{seen: map[[2]uint64]struct{}{}})
	return v.(*knownURLs)
}
