package jobs

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/roles"
)

// ErrBadSubmission marks a job that cannot be submitted as given (no
// seeds, too many hosts, a bad seed file, conflicting choices): the
// submitter's input is at fault, nothing was submitted.
var ErrBadSubmission = errors.New("bad submission")

func badSubmission(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadSubmission, fmt.Sprintf(format, args...))
}

// invalidSpec is a Validate error as Build returns it: its message is the
// field's (the CLI maps it to a flag), and it is ErrBadSpec.
type invalidSpec struct{ err error }

func (e invalidSpec) Error() string   { return e.err.Error() }
func (e invalidSpec) Unwrap() []error { return []error{ErrBadSpec, e.err} }

// MaxDefaultDomains bounds the allowed domains a job gets from its seeds'
// hosts when none are given (they travel in the job's spec).
const MaxDefaultDomains = 1000

// RobotsSitemaps is the Sitemaps entry that asks for the sitemaps listed
// in the robots.txt of every seed's origin.
const RobotsSitemaps = "robots"

// Submission is a crawl job as a user asks for it — what `baton crawl`'s
// flags say, or a program's call — before it is checked and turned into a
// Spec. Build is the one place that does so, for the CLI and for programs
// alike.
type Submission struct {
	ID, Group string
	// Seeds are the seed URLs given inline; they travel in the spec.
	Seeds []string
	// File holds seeds too many for the spec (ScanSeedFile): they go
	// straight into the job store (Plan.Queue).
	File *SeedFile
	// Sitemaps are sitemap URLs, or RobotsSitemaps for the sitemaps of the
	// seeds' robots.txt.
	Sitemaps []string
	Options  crawl.Options
	MaxPages int
	// BatchSize is the URLs per batch (0: unbounded leases).
	BatchSize int
	// Cookie, Authorization: the job's credentials (sealed by Build, never
	// in the spec).
	Cookie, Authorization map[string]string
	Timers                roles.Timers
	// StoreBodies keeps page bodies in the store; BodiesDir writes them
	// under a directory of the Runner's machine (one or neither).
	StoreBodies bool
	BodiesDir   string
	// WARCDir archives every response in WARC files under a directory of
	// the Runner's machine (Spec.WARCPath).
	WARCDir string
	// Baseline is the job this one crawls again (Spec.Baseline): its
	// requests are conditional on the baseline's validators.
	Baseline string
	// Adaptive, Politeness: as in Spec.
	Adaptive   *Adaptive
	Politeness string
	// Crawler, CrawlerVersion, CrawlerOptions, SeedLabel: as in Spec.
	Crawler, CrawlerVersion string
	CrawlerOptions          map[string]string
	SeedLabel               string
	// SecretParams name the query parameters whose values in the seeds
	// (inline, in the seed file, sitemaps) are secrets, sealed with the
	// seeds' user:password (crawl.SplitURLSecrets).
	SecretParams []string
	// SecretSettings are the keys of CrawlerOptions the crawler declares
	// secret (crawler.OptionSpec.Secret): sealed, never in the spec.
	SecretSettings []string
}

// Plan is a checked Submission: the spec that travels (no secrets in it),
// the secrets to seal into the store, and the seeds that go straight to
// the store (Queue) before the job's workflow starts.
type Plan struct {
	Spec    Spec
	Secrets Secrets
	// File and StoredSitemaps are the seeds queued by Queue; none when
	// Spec.SeedsStored is 0.
	File           *SeedFile
	StoredSitemaps []string
}

// Build checks s and returns its plan: sitemaps of robots.txt resolved,
// the allowed domains defaulted to the seeds' hosts, the bodies choice,
// the spec validated, the secrets split out. Errors wrap ErrBadSubmission
// (the submission) or ErrBadSpec (a field of the spec).
func (s Submission) Build() (Plan, error) {
	if len(s.Seeds) == 0 && s.File == nil && len(s.Sitemaps) == 0 {
		return Plan{}, badSubmission("no seeds: give seed URLs, a seeds file or a sitemap")
	}
	var maps, stored []string
	robots := false
	for _, m := range s.Sitemaps {
		if m == RobotsSitemaps {
			robots = true
			continue
		}
		maps = appendUnique(maps, m)
	}
	if robots {
		for _, u := range s.Seeds {
			if o := origin(u); o != "" {
				maps = appendUnique(maps, o+"/robots.txt")
			}
		}
		if s.File != nil {
			for _, o := range s.File.origins {
				if m := o + "/robots.txt"; !slices.Contains(maps, m) {
					stored = append(stored, m)
				}
			}
		}
	}
	opts := s.Options
	if len(opts.AllowedDomains) == 0 {
		var hosts []string
		for _, list := range [][]string{s.Seeds, maps} {
			for _, u := range list {
				if p, err := url.Parse(u); err == nil && p.Hostname() != "" {
					hosts = appendUnique(hosts, p.Hostname())
				}
			}
		}
		if s.File != nil {
			for _, h := range s.File.hosts {
				hosts = appendUnique(hosts, h)
			}
		}
		if len(hosts) > MaxDefaultDomains {
			return Plan{}, badSubmission("the seeds are on %d hosts, more than the %d a job lists by default: give the domains to stay within",
				len(hosts), MaxDefaultDomains)
		}
		opts.AllowedDomains = hosts
	}
	spec := Spec{ID: s.ID, Group: s.Group, Seeds: s.Seeds, Options: opts, MaxPages: s.MaxPages,
		BatchSize: s.BatchSize, Cookie: s.Cookie, Authorization: s.Authorization, Timers: s.Timers,
		Sitemaps: maps, SeedsStored: len(stored), Crawler: s.Crawler, CrawlerVersion: s.CrawlerVersion,
		CrawlerOptions: s.CrawlerOptions, SeedLabel: s.SeedLabel}
	if s.File != nil {
		spec.SeedsStored += s.File.count
	}
	switch {
	case s.StoreBodies && s.BodiesDir != "":
		return Plan{}, badSubmission("bodies in the store and in a directory: choose one")
	case s.StoreBodies:
		spec.Bodies = BodiesStore
	case s.BodiesDir != "":
		spec.Bodies, spec.BodiesPath = BodiesDir, s.BodiesDir
	}
	spec.WARCPath, spec.Baseline, spec.Adaptive, spec.PolitenessScope = s.WARCDir, s.Baseline, s.Adaptive, s.Politeness
	if err := spec.Validate(); err != nil {
		return Plan{}, invalidSpec{err}
	}
	// Cookies, authorization, headers and the proxy's credentials go
	// sealed into the job store; the spec that travels names them only.
	spec, secrets := SplitSecrets(spec)
	var err error
	if spec, secrets, err = s.splitURLSecrets(spec, secrets); err != nil {
		return Plan{}, err
	}
	p := Plan{Spec: spec, Secrets: secrets}
	if spec.SeedsStored > 0 {
		p.File, p.StoredSitemaps = s.File, stored
	}
	return p, nil
}

// splitURLSecrets takes the user:password and the secret parameters out
// of the seeds and sitemaps (the seed file's are redacted as Queue writes
// them), and the secret settings out of the crawler's options, into the
// secrets.
func (s Submission) splitURLSecrets(spec Spec, sec Secrets) (Spec, Secrets, error) {
	var err error
	redact := func(what string, list []string) ([]string, error) {
		out := make([]string, len(list))
		for i, u := range list {
			if out[i], sec.URLs, err = crawl.SplitURLSecrets(u, s.SecretParams, sec.URLs); err != nil {
				return nil, badSubmission("%s %d: %v", what, i+1, err)
			}
		}
		return out, nil
	}
	if spec.Seeds, err = redact("seed", spec.Seeds); err != nil {
		return spec, sec, err
	}
	if spec.Sitemaps, err = redact("sitemap", spec.Sitemaps); err != nil {
		return spec, sec, err
	}
	if s.File != nil && s.File.mayHoldSecrets(len(s.SecretParams) > 0) { // else not read again
		line := 0
		if err := s.File.Each(func(u string) error {
			line++
			if !strings.Contains(u, "@") && (len(s.SecretParams) == 0 || !strings.Contains(u, "?")) {
				return nil // no user:password, no parameter to seal
			}
			_, sec.URLs, err = crawl.SplitURLSecrets(u, s.SecretParams, sec.URLs)
			if err != nil {
				return badSubmission("seeds file URL %d: %v", line, err)
			}
			return nil
		}); err != nil {
			return spec, sec, err
		}
	}
	for k, v := range spec.CrawlerOptions {
		if slices.Contains(s.SecretSettings, k) {
			if sec.CrawlerOptions == nil {
				sec.CrawlerOptions = map[string]string{}
				spec.CrawlerOptions = maps.Clone(spec.CrawlerOptions)
			}
			sec.CrawlerOptions[k] = v
			delete(spec.CrawlerOptions, k)
		}
	}
	spec.Secrets = sec.Names()
	return spec, sec, nil
}

// SeedEntries returns the frontier entries a job starts with: its seeds
// (depth 0), its sitemaps and the sitemaps in stored (SitemapDepth), each
// normalised by the job's own normaliser (so --keep-tracking-params holds
// for every seed, wherever it came from). A URL that does not normalise is
// an error naming it.
func (s Spec) SeedEntries(stored []string) ([]Entry, error) {
	s = s.compiled()
	var out []Entry
	for _, u := range s.Seeds {
		n, err := s.Options.NormalizeURL(u)
		if err != nil {
			return nil, fmt.Errorf("seed %q: %w", u, err)
		}
		out = append(out, Entry{URL: n, Label: s.seedLabel(n)})
	}
	for _, list := range [][]string{s.Sitemaps, stored} {
		for _, u := range list {
			n, err := s.Options.NormalizeURL(u)
			if err != nil {
				return nil, fmt.Errorf("sitemap %q: %w", u, err)
			}
			out = append(out, Entry{URL: n, Depth: SitemapDepth})
		}
	}
	return out, nil
}

// compiled is s with its options compiled (label rules matched without
// compiling them per seed), or s as it is when they do not compile (the
// seeds' labels are then "": Validate refuses such a spec first).
func (s Spec) compiled() Spec {
	if o, err := s.Options.Compile(); err == nil {
		s.Options = o
	}
	return s
}

// SeedWriter is what Plan.Queue needs of a store: creating the job with
// its first entries and adding seeds in chunks. Store implements it.
type SeedWriter interface {
	CreateJob(ctx context.Context, spec Spec, seeds []Entry) (Stats, error)
	AddSeeds(ctx context.Context, job string, seeds []Entry) (int, error)
}

// Queue creates the plan's job in the store with every seed (the inline
// ones, the sitemaps, and the seed file read again in chunks: memory stays
// flat however long the file), so that JobStart finds it created with the
// same spec. It returns how many URLs were queued (at most MaxPages).
func (p Plan) Queue(ctx context.Context, st SeedWriter) (int, error) {
	entries, err := p.Spec.SeedEntries(p.StoredSitemaps)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrBadSubmission, err)
	}
	created, err := st.CreateJob(ctx, p.Spec, entries)
	if err != nil {
		return 0, err
	}
	seen := created.Seen
	if p.File == nil {
		return seen, nil
	}
	n, err := p.queueFile(ctx, st)
	if err != nil {
		return 0, err
	}
	seen += n
	if p.Spec.MaxPages > 0 {
		seen = min(seen, p.Spec.MaxPages)
	}
	return seen, nil
}

// origin is scheme://host of an http(s) URL, or "".
func origin(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return ""
	}
	return strings.ToLower(u.Scheme) + "://" + u.Host
}

func appendUnique(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}
