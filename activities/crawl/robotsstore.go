package crawl

import (
	"context"
	"time"
)

// RobotsStore keeps the robots.txt files of a crawl job for every Engine
// that crawls it (the job store, shared by the job's Runners): an Engine
// that finds an origin's file there, fresh, reads its rules from it
// instead of fetching robots.txt, so a host's robots.txt is fetched once
// per job, not once per worker. Options.Robots sets it per fetch.
// Implementations are safe for concurrent use.
type RobotsStore interface {
	// Scope names what the files are kept for (the job): an Engine caches
	// the rules it read per scope and origin.
	Scope() string
	// LoadRobots returns the robots.txt of origin (scheme://host[:port])
	// kept and still fresh, its TTL what is left of its freshness; ok
	// false when there is none.
	LoadRobots(ctx context.Context, origin string) (f RobotsFile, ok bool, err error)
	// SaveRobots keeps the robots.txt of origin as an Engine fetched it
	// (TTL from now), replacing the one kept.
	SaveRobots(ctx context.Context, origin string, f RobotsFile) error
}

// RobotsFile is a robots.txt as fetched: the answer's status (0: none,
// robots.txt unreachable or unavailable, which allows all) and body, how
// long it stays fresh, and the Crawl-delay it sets for the User-Agent of
// the fetch that read it (at most a minute).
//
// A file with Fetching set is not a file but a claim: another process is
// fetching it (a new job's warm-up, BatchRunner.Warm) and will keep it
// within TTL; an Engine that loads a claim waits for the file instead of
// fetching robots.txt a second time (and fetches it itself once the
// claim has run out).
type RobotsFile struct {
	Status     int
	Body       []byte
	TTL        time.Duration
	CrawlDelay time.Duration
	Fetching   bool
}

// rules reads f at now (see parseRobots): a 2xx body is parsed, 4xx and
// none allow all, 5xx disallows all; the rules expire after f.TTL.
func (f RobotsFile) rules(now time.Time) *robotsRules {
	r := parseRobots(f.Status, f.Body, now)
	r.expires = now.Add(f.TTL)
	return r
}

// robotsKey is the key of the robots.txt cache of an Engine: per store
// scope (job) when a store keeps the files.
func robotsKey(key string, rs RobotsStore) string {
	if rs == nil {
		return key
	}
	return key + " for " + rs.Scope()
}

// robotsOf returns the rules of origin: read from rs when it keeps a fresh
// file, else fetched; and, for a file fetched, how to keep it in rs (with
// the Crawl-delay it sets for agent), nil otherwise. A store that cannot
// be read or written is passed over: the file is fetched, and fetched
// again by the next Engine.
func robotsOf(ctx context.Context, rs RobotsStore, origin, agent string, fetch func(context.Context) RobotsFile) (*robotsRules, func()) {
	if rs != nil {
		if f, ok := loadRobots(ctx, rs, origin); ok {
			return f.rules(time.Now()), nil
		}
	}
	f := fetch(ctx)
	r := f.rules(time.Now())
	if rs == nil {
		return r, nil
	}
	return r, func() {
		_, f.CrawlDelay = r.allowed("/", agent)
		_ = rs.SaveRobots(ctx, origin, f)
	}
}

// loadRobots reads the fresh robots.txt of origin from rs. While another
// process claims its fetch (RobotsFile.Fetching), it reads again at the
// pace of claimPoll, until the file is there, the claim ran out (false:
// the caller fetches it) or ctx ends.
func loadRobots(ctx context.Context, rs RobotsStore, origin string) (RobotsFile, bool) {
	start := time.Now()
	for {
		f, ok, err := rs.LoadRobots(ctx, origin)
		if err != nil || !ok || f.TTL <= 0 {
			return RobotsFile{}, false
		}
		if !f.Fetching {
			return f, true
		}
		t := time.NewTimer(min(claimPoll(time.Since(start)), f.TTL))
		select {
		case <-ctx.Done():
			t.Stop()
			return RobotsFile{}, false
		case <-t.C:
		}
	}
}

// claimPoll is how long loadRobots waits before it reads a claimed
// robots.txt again, having waited for it for waited: robotsClaimPoll
// while a fetch of a nearby site may still answer (robotsClaimSteady),
// then an eighth of how long it has waited, at most robotsClaimMaxPoll. The
// claim that makes a batch wait is a new job's warm-up on another
// worker, whose fetch of the seed's robots.txt began a few milliseconds
// before: the batch's first request waits for the file, so a read that
// comes late delays the whole crawl (it backed off from 2 ms by half
// each read, and found the file of a 20 ms fetch about 5 ms after it was
// kept).
func claimPoll(waited time.Duration) time.Duration {
	if waited < robotsClaimSteady {
		return robotsClaimPoll
	}
	return min(max(waited/8, robotsClaimPoll), robotsClaimMaxPoll)
}

// robotsClaimPoll, robotsClaimSteady and robotsClaimMaxPoll pace
// loadRobots's reads while another process fetches a robots.txt (a fetch
// of a nearby site takes tens of milliseconds, a slow one seconds): every
// read is one of the store, a few hundred a second from one batch while
// it waits on a nearby site, and a few a second on a slow one.
const (
	robotsClaimPoll    = 2 * time.Millisecond
	robotsClaimSteady  = 200 * time.Millisecond
	robotsClaimMaxPoll = 100 * time.Millisecond
)

// RobotsTimeout bounds the fetch of a robots.txt by a crawl with options
// o (its request timeout, DefaultTimeout when unset, at most 30 s): a
// claim on its fetch (RobotsFile.Fetching) need not last longer.
func RobotsTimeout(o Options) time.Duration {
	if o.Timeout <= 0 {
		return DefaultTimeout
	}
	return min(o.Timeout, 30*time.Second)
}
