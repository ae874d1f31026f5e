package jobs

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/roles"
)

// This file holds what keeps a job's politeness across its Runners: the
// host leases a batch holds in the store (RunnerStore.Pull), what a
// Runner makes of them for its fetches, and the job's robots.txt files
// kept in the store for every Runner.

// HostLease is a batch's hold on one host of its job (RunnerStore.Pull).
// A host's lease goes with the batch (to a new holder after a hand-over)
// and lasts while the batch has unfinished URLs of the host; the batch
// takes only URLs of hosts it holds.
type HostLease struct {
	// Host is the host as the per-domain limits key it (crawl.HostKey).
	Host string `json:"host"`
	// Share is the most requests of the batch in flight to the host at
	// once: the job's whole parallelism when Exclusive, else a part of it
	// (the shares of a host's batches add up to at most its parallelism).
	Share int `json:"share"`
	// Exclusive: the batch alone holds the host, because a delay applies
	// to it (the job's delay, or its robots.txt Crawl-delay) or its
	// robots.txt is not known yet; the Runner's limiter then keeps the
	// job's parallelism and delay for it exactly.
	Exclusive bool `json:"exclusive"`
	// Wait is how long, from the answer, the batch's first request to the
	// host waits: the host's last request by another batch (or the
	// hand-over of this one), plus the host's delay.
	Wait time.Duration `json:"wait"`
}

// Pulled is what RunnerStore.Pull answers.
type Pulled struct {
	Entries []Entry     // the URLs handed out, in frontier order
	Hosts   []HostLease // every host lease the batch holds after the pull
	// TTL is how long the leases last unless renewed (LeaseTTL of the
	// job's timers): a Runner renews them well within it.
	TTL time.Duration
}

// HostOf is the host of a frontier URL a lease holds (crawl.HostKey); ""
// for a URL that has none (it is handed out without a lease).
func HostOf(url string) string { return crawl.HostKey(url) }

// LeaseTTL is how long a host lease lasts without being renewed, for a
// job of timers (zero: the defaults): the fail-over bound, twice the
// detection bound plus 2 s, after which the job re-queues the batch of a
// dead Runner that nobody took over (dropping its leases; a hand-over
// takes them over with the batch). The TTL is the backstop for a lease
// nobody drops: a host is never held longer than this after its holder's
// last renewal.
func LeaseTTL(t roles.Timers) time.Duration {
	if t.IsZero() {
		t = roles.DefaultTimers()
	}
	return 2*t.DetectionBound() + 2*time.Second
}

// hostLeases is what a batch's Runner knows of the batch's host leases,
// from its last pull or renewal.
type hostLeases struct {
	mu     sync.Mutex
	byHost map[string]hostHold
	ttl    time.Duration
}

type hostHold struct {
	share     int
	notBefore time.Time
}

// set replaces the leases with those of p, answered at.
func (h *hostLeases) set(p Pulled, at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	old := h.byHost
	h.byHost = make(map[string]hostHold, len(p.Hosts))
	for _, l := range p.Hosts {
		hold := hostHold{share: l.Share, notBefore: at.Add(l.Wait)}
		if o, ok := old[l.Host]; ok && o.notBefore.After(hold.notBefore) {
			hold.notBefore = o.notBefore
		}
		h.byHost[l.Host] = hold
	}
	if p.TTL > 0 {
		h.ttl = p.TTL
	}
}

// limit sets the parallelism and the first start of a fetch of url from
// its host's lease (none: opts as they are).
func (h *hostLeases) limit(url string, opts *crawl.Options) {
	host := HostOf(url)
	if host == "" {
		return
	}
	h.mu.Lock()
	hold, ok := h.byHost[host]
	h.mu.Unlock()
	if !ok {
		return
	}
	if hold.share > 0 && hold.share < opts.Parallelism {
		opts.Parallelism = hold.share
	}
	opts.NotBefore = hold.notBefore
}

// lost returns a host of es that the batch holds no lease of ("" when it
// holds them all): its lease expired and another batch took the host.
func (h *hostLeases) lost(es []Entry) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, e := range es {
		host := HostOf(e.URL)
		if _, ok := h.byHost[host]; !ok && host != "" {
			return host
		}
	}
	return ""
}

// renewEvery is how often a Runner renews its leases when it has not
// pulled meanwhile.
func (h *hostLeases) renewEvery() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ttl <= 0 {
		return LeaseTTL(roles.Timers{}) / 4
	}
	return h.ttl / 4
}

// jobRobots is a job's robots.txt files in the store, as the fetch engine
// reads them (crawl.RobotsStore): the first Runner that fetches a host's
// robots.txt keeps it there, the others read it. A file is kept only once
// stored is closed (nil: at once): the warm-up of a new job's first batch
// (BatchRunner.Warm) fetches its seed's robots.txt while the job itself
// is being stored. A warm-up's (warm) claims of the files' fetches are
// its own: it reads a claim as no file; and while the job is being
// stored by the step it warms for, it reads nothing: a new job has no
// file yet (a first step retried after it kept one fetches robots.txt
// once more).
type jobRobots struct {
	store  RunnerStore
	job    string
	stored <-chan struct{}
	warm   bool
}

var _ crawl.RobotsStore = jobRobots{}

func (j jobRobots) Scope() string { return j.job }

func (j jobRobots) LoadRobots(ctx context.Context, origin string) (crawl.RobotsFile, bool, error) {
	if j.warm && j.stored != nil {
		select {
		case <-j.stored:
		default:
			return crawl.RobotsFile{}, false, nil // being stored: no file yet
		}
	}
	f, ok, err := j.store.Robots(ctx, j.job, origin)
	if j.warm && f.Fetching {
		return crawl.RobotsFile{}, false, err
	}
	return f, ok, err
}

func (j jobRobots) SaveRobots(ctx context.Context, origin string, f crawl.RobotsFile) error {
	if j.stored != nil {
		select {
		case <-j.stored:
		case <-ctx.Done():
			return fmt.Errorf("job %s: robots.txt of %s not kept: the job was not stored: %w", j.job, origin, ctx.Err())
		}
	}
	return j.store.PutRobots(ctx, j.job, origin, f)
}

// PerJobPoliteness reports whether the job keeps a budget of its own per
// host (Spec.PolitenessScope), not the group's.
func (s Spec) PerJobPoliteness() bool { return s.PolitenessScope == PolitenessJob }

// Politeness is what a job's host leases keep for each of its hosts,
// whichever Runners crawl it: the most requests in flight at once (its
// parallelism, the default when unset), the least gap between two
// starts (its delay; a robots.txt Crawl-delay larger than it replaces it
// for its host when robots are obeyed), and whether robots.txt is obeyed.
func (s Spec) Politeness() (parallelism int, delay time.Duration, robots bool) {
	parallelism = s.Options.Parallelism
	if parallelism <= 0 {
		parallelism = crawl.DefaultParallelism
	}
	return parallelism, s.Options.Delay, !s.Options.IgnoreRobots
}
