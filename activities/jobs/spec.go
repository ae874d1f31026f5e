// Package jobs is Baton's crawl-job capability: a job's spec, its page
// records, the activities that run a job over the cluster (JobStart,
// JobAssign, JobAwait), the BatchRunner that crawls one batch inside a
// Runner's RunTask, and the Store interface of the data plane they need
// (frontier, batches, results, counters, export). Engines live in
// jobs/sqlstore (SQLite embedded, PostgreSQL distributed); every engine
// must pass jobs/storetest.
//
// Control plane and data plane stay apart: ZooKeeper holds which Runner
// holds which batch at which epoch (a Task znode that is only a reference),
// the store holds the URLs, their progress and the results. Nothing per URL
// is kept in a worker's memory or in workflow state.
package jobs

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/crawler"
	"github.com/batoncrawl/baton/roles"
)

// Spec is a crawl job as submitted by the starter. It is stored with the
// job (the store's jobs table) and read once per worker.
type Spec struct {
	ID            string            `json:"id"`
	Group         string            `json:"group"`
	Seeds         []string          `json:"seeds"`
	Options       crawl.Options     `json:"options"`
	MaxPages      int               `json:"max_pages"`  // 0: no limit
	BatchSize     int               `json:"batch_size"` // most URLs per batch; 0: a Runner's batch lasts while the frontier has work
	Cookie        map[string]string `json:"cookie,omitempty"`
	Authorization map[string]string `json:"authorization,omitempty"`
	// Timers are the cluster's timer profile for this job (how long a dead
	// Runner's batch waits before it is re-queued). Zero: the group's, as
	// the workers running the job are configured.
	Timers roles.Timers `json:"timers"`
	// SeedsStored counts seeds (and sitemaps) the submitter wrote into
	// the job's frontier in the store itself (a seed file: large lists
	// stay out of workflow payloads); Seeds may then be empty.
	SeedsStored int `json:"seeds_stored,omitempty"`
	// Sitemaps are sitemap, sitemap index or robots.txt URLs whose listed
	// pages are crawled as seeds (see crawl.Engine.FetchSitemap).
	Sitemaps []string `json:"sitemaps,omitempty"`
	// Bodies stores the response bodies, compressed, for reprocessing:
	// BodiesStore in the job store, BodiesDir as files under BodiesPath
	// (on each Runner's machine: a shared mount gathers them); "" none.
	Bodies     string `json:"bodies,omitempty"`
	BodiesPath string `json:"bodies_path,omitempty"`
	// WARCPath, when set, is the directory (on each Runner's machine, under
	// the operator's bodies root) where every response of the job is
	// archived as received, in WARC files (crawl --warc).
	WARCPath string `json:"warc_path,omitempty"`
	// Crawler names the crawler that runs the job's pages: a user
	// crawler a worker binary registered (package crawler), or "" for the
	// built-in one (the --select/--follow options). CrawlerVersion is the
	// version the job started with: only Runners carrying that version take
	// its batches (pinned; see the README's rolling upgrades).
	// CrawlerOptions are the job's --set key=value options, decoded into
	// the crawler's typed options by each Runner.
	Crawler        string            `json:"crawler,omitempty"`
	CrawlerVersion string            `json:"crawler_version,omitempty"`
	CrawlerOptions map[string]string `json:"crawler_options,omitempty"`
	// SeedLabel is the label of the job's seeds (--label NAME): the
	// handler of a user crawler they go to. With the built-in crawler the
	// seeds' label is SeedLabel when set, else the one Options.Labels give.
	SeedLabel string `json:"seed_label,omitempty"`
	// Secrets names the job's secrets (Secrets.Names: "cookie session",
	// "header X-Trace", …), sealed in the store, never their values;
	// Cookie, Authorization, Options.Headers and the proxy's credentials
	// are empty in a spec that travels (SplitSecrets).
	Secrets []string `json:"secrets,omitempty"`
	// Baseline is the job this one is a new run of (a schedule's last
	// completed run): the job whose records a conditional refetch reads.
	Baseline string `json:"baseline,omitempty"`
	// URLSecrets are the job's opened URL secrets (Secrets.Apply), in a
	// Runner's memory only: put back into requests for their origin.
	URLSecrets *crawl.URLSecrets `json:"-"`
	// Adaptive, when set, gives each page a refetch interval that adapts
	// to how often it changed (revisit.NextInterval): a run with a
	// baseline fetches only the baseline's pages that are due, and new
	// ones; a page not due is carried over from the baseline without a
	// request.
	Adaptive *Adaptive `json:"adaptive,omitempty"`
	// PolitenessScope is whose budget a host's parallelism, delay and
	// Crawl-delay are: PolitenessGroup (or empty), every running job of
	// the group crawling the host together; PolitenessJob, the job's own,
	// whatever the group's other jobs do (crawl --politeness).
	PolitenessScope string `json:"politeness,omitempty"`
}

// Whose budget Spec.PolitenessScope keeps.
const (
	PolitenessGroup = "group"
	PolitenessJob   = "job"
)

// Where Spec.Bodies keeps the response bodies.
const (
	BodiesStore = "store"
	BodiesDir   = "dir"
)

// SitemapDepth is the depth of a frontier entry that is a sitemap (or a
// robots.txt read for its Sitemap: lines), not a page: the pages it lists
// are queued at depth 0, the sitemaps it lists at SitemapDepth.
const SitemapDepth = -1

// ErrTypeBadJob marks a job spec that cannot run (a non-retryable
// activity error type).
const ErrTypeBadJob = "BatonBadJob"

var validID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// ValidID reports whether id can name a job.
func ValidID(id string) error {
	if !validID.MatchString(id) {
		return fmt.Errorf("job id %q: use 1-128 letters, digits, '.', '_' or '-'", id)
	}
	return nil
}

// Validate names the first bad field; seeds are checked as URLs.
func (s Spec) Validate() error {
	if err := ValidID(s.ID); err != nil {
		return fmt.Errorf("id: %w", err)
	}
	if s.Group == "" {
		return errors.New("group: empty")
	}
	if s.Baseline != "" {
		if err := ValidID(s.Baseline); err != nil {
			return fmt.Errorf("baseline: %w", err)
		}
	}
	if a := s.Adaptive; a != nil && (a.Floor <= 0 || a.Cap < a.Floor) {
		return fmt.Errorf("adaptive: floor %v and cap %v: want 0 < floor <= cap", a.Floor, a.Cap)
	}
	if len(s.Seeds) == 0 && len(s.Sitemaps) == 0 && s.SeedsStored <= 0 {
		return errors.New("seeds: at least one URL (a seed, a seed file's or a sitemap) is required")
	}
	for i, u := range s.Seeds {
		if err := (roles.Request{URL: u}).Validate(); err != nil {
			return fmt.Errorf("seeds[%d]: %w", i, err)
		}
		if err := CheckURLLength(u); err != nil {
			return fmt.Errorf("seeds[%d]: %w", i, err)
		}
	}
	for i, u := range s.Sitemaps {
		if err := (roles.Request{URL: u}).Validate(); err != nil {
			return fmt.Errorf("sitemaps[%d]: %w", i, err)
		}
		if err := CheckURLLength(u); err != nil {
			return fmt.Errorf("sitemaps[%d]: %w", i, err)
		}
	}
	if s.PolitenessScope != "" && s.PolitenessScope != PolitenessGroup && s.PolitenessScope != PolitenessJob {
		return fmt.Errorf("politeness: %q: want %q or %q", s.PolitenessScope, PolitenessGroup, PolitenessJob)
	}
	if s.SeedsStored < 0 {
		return fmt.Errorf("seeds_stored: %d is negative", s.SeedsStored)
	}
	switch s.Bodies {
	case "", BodiesStore:
	case BodiesDir:
		if s.BodiesPath == "" {
			return errors.New("bodies_path: empty (the directory the bodies are written to)")
		}
	default:
		return fmt.Errorf("bodies: %q: want %q or %q (or empty: none)", s.Bodies, BodiesStore, BodiesDir)
	}
	if s.Options.RenderScreenshots && s.Bodies != BodiesDir {
		return errors.New("options.render_screenshots: screenshots are kept next to the bodies in a directory: give --bodies-dir")
	}

	if s.Crawler != "" && s.Crawler != crawler.BuiltinName {
		if err := crawler.ValidName(s.Crawler); err != nil {
			return fmt.Errorf("crawler: %w", err)
		}
	}
	if s.Crawler == "" && len(s.CrawlerOptions) > 0 {
		return errors.New("crawler_options: the built-in crawler takes its options from flags, not --set")
	}
	if len(s.SeedLabel) > crawler.MaxLabelBytes {
		return fmt.Errorf("seed_label: %d bytes, at most %d", len(s.SeedLabel), crawler.MaxLabelBytes)
	}
	if s.Crawler != "" && s.Crawler != crawler.BuiltinName {
		switch {
		case len(s.Options.Labels) > 0:
			return fmt.Errorf("options: labels: label rules are the built-in crawler's: crawler %s labels its links in code", s.Crawler)
		case len(s.Options.LabelSelectors) > 0:
			return fmt.Errorf("options: label_selectors: the built-in crawler's: crawler %s extracts its items in code", s.Crawler)
		case len(s.Options.LinksJSON) > 0:
			return fmt.Errorf("options: links_json: the built-in crawler's: crawler %s chooses its links in code", s.Crawler)
		}
	}
	if s.MaxPages < 0 {
		return fmt.Errorf("max_pages: %d is negative", s.MaxPages)
	}
	if s.BatchSize < 0 {
		return fmt.Errorf("batch_size: %d is negative (0: a Runner's lease lasts while the frontier has work)", s.BatchSize)
	}
	if err := s.Options.Validate(); err != nil {
		return fmt.Errorf("options: %w", err)
	}
	if field, msg := roles.CheckAuth(s.Cookie, s.Authorization); field != "" {
		return fmt.Errorf("%s: %s", field, msg)
	}
	// Unset timers are the group's (the workers' profile); set ones must be
	// valid: zero intervals would make JobAwait spin.
	if !s.Timers.IsZero() {
		if err := s.Timers.Validate(); err != nil {
			return fmt.Errorf("timers: %w", err)
		}
	}
	return nil
}

// seedLabel is the label of a seed (or of a page a sitemap lists): the
// job's SeedLabel, else (the built-in crawler) its label rules'. Options
// are best compiled (Compile): the rules are not compiled per URL.
func (s Spec) seedLabel(u string) string {
	if s.SeedLabel != "" || (s.Crawler != "" && s.Crawler != crawler.BuiltinName) {
		return s.SeedLabel
	}
	return s.Options.LabelOf(u)
}

// ErrBadSpec: a stored spec does not decode or validate.
var ErrBadSpec = errors.New("invalid job spec")

// DecodeSpec parses a stored spec and validates it, naming the bad field.
func DecodeSpec(data []byte) (Spec, error) {
	var s Spec
	if err := json.Unmarshal(data, &s); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return s, fmt.Errorf("%w: malformed JSON at byte %d: %v", ErrBadSpec, se.Offset, err)
		}
		return s, fmt.Errorf("%w: %v", ErrBadSpec, err)
	}
	if err := s.Validate(); err != nil {
		return s, fmt.Errorf("%w: %v", ErrBadSpec, err)
	}
	return s, nil
}

// MaxURLBytes is the longest URL a job's frontier takes: a longer seed is
// refused at submission, a longer link is not queued and its page's record
// says so (LinksRefused). (2,048 is the sitemaps protocol's limit and what
// browsers and servers commonly accept; the frontier's key must stay
// within PostgreSQL's B-tree row limit of about 2.7 KB.)
const MaxURLBytes = 2048

// CheckURLLength refuses a URL longer than MaxURLBytes.
func CheckURLLength(u string) error {
	if len(u) > MaxURLBytes {
		return fmt.Errorf("URL %.80q… is %d bytes, the most a job takes is %d", u, len(u), MaxURLBytes)
	}
	return nil
}

// RefusedLink is a link a page found that the job's frontier did not take.
type RefusedLink struct {
	URL    string `json:"url"` // its first 256 bytes
	Reason string `json:"reason"`
}

// Entry is one URL of a frontier: a page at Depth (0 for a seed), or a
// sitemap at SitemapDepth.
type Entry struct {
	URL   string `json:"url"`
	Depth int    `json:"depth"`
	// Label routes the URL to a handler of the job's crawler (a user
	// crawler's label, --label for seeds); "" is the default handler.
	// With the built-in crawler it is the label its label rules give
	// (crawl.Options.Labels), which picks the page's label fields.
	Label string `json:"label,omitempty"`
	// Data is the user data a handler enqueued the URL with (JSON, at
	// most crawler.MaxDataBytes), given back to the handler of its page.
	Data json.RawMessage `json:"data,omitempty"`
}

// BatchEntry is one URL of a batch and whether it is finished (recorded,
// or refused by robots.txt).
type BatchEntry struct {
	Entry
	Done bool `json:"done"`
}

// Stats counts a job's URLs and pages. They come from the store (counter
// rows per writer, summed), so they are exact whoever wrote them.
type Stats struct {
	Seen     int `json:"seen"`     // URLs accepted into the crawl (at most max_pages)
	Queued   int `json:"queued"`   // accepted URLs waiting in the frontier
	Recorded int `json:"recorded"` // pages in the results
	Failed   int `json:"failed"`   // recorded pages with an error
	Items    int `json:"items"`    // items recorded by a user crawler's pages
	// Render counts the recorded pages rendered in headless Chromium, by
	// reason (none when the job rendered no page).
	Render RenderStats `json:"render,omitzero"`
}

// RenderStats count a job's recorded pages that were rendered, by the
// reason they were (crawl.Page.RenderReason), and the crashes and
// time-outs of their renders.
type RenderStats struct {
	Rendered        int `json:"rendered"`          // pages rendered, whatever the reason
	Always          int `json:"always"`            // --render always
	AutoEmptyFields int `json:"auto_empty_fields"` // --render auto: a selected field was empty
	AutoNoLinks     int `json:"auto_no_links"`     // --render auto: the page had no link to follow
	AutoSample      int `json:"auto_sample"`       // --render auto: a re-check of a host rendering added nothing to
	Label           int `json:"label"`             // a user crawler's label asks for it (crawler.Rendered)
	Crashes         int `json:"crashes"`           // tabs that crashed rendering a page (rendered again once)
	TimedOut        int `json:"timed_out"`         // pages that did not settle within --render-timeout
}

// Summary is the counts in a line: "11 (label 11), 1 tab crash".
func (r RenderStats) Summary() string {
	var parts []string
	for _, p := range []struct {
		n    int
		name string
	}{{r.Always, "always"}, {r.AutoEmptyFields, "auto: empty fields"}, {r.AutoNoLinks, "auto: no links"},
		{r.AutoSample, "auto: sample"}, {r.Label, "label"}} {
		if p.n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", p.name, p.n))
		}
	}
	s := fmt.Sprint(r.Rendered)
	if len(parts) > 0 {
		s += " (" + strings.Join(parts, ", ") + ")"
	}
	if r.Crashes > 0 {
		s += fmt.Sprintf(", %d tab crashes", r.Crashes)
	}
	if r.TimedOut > 0 {
		s += fmt.Sprintf(", %d timed out", r.TimedOut)
	}
	return s
}

// MaxPagesReached says whether a job with counters st took as many URLs
// as its max_pages allows: links beyond it were not crawled.
func MaxPagesReached(spec Spec, st Stats) bool { return spec.MaxPages > 0 && st.Seen >= spec.MaxPages }

// PageRecord is one page of a job's results.
type PageRecord struct {
	crawl.Page
	Job    string `json:"job"`
	Batch  string `json:"batch"`
	Runner string `json:"runner"`
	Epoch  int64  `json:"epoch"`
	// DuplicateOf is the URL of the job's page recorded first with the
	// same body (Page.BodyHash), for a page fetched without error.
	DuplicateOf string `json:"duplicate_of,omitempty"`
	// BodyRef says where the page's body was stored (Spec.Bodies):
	// "store" (Store.Body), or the file's path under the bodies directory.
	BodyRef string `json:"body_ref,omitempty"`
	// ScreenshotRef is the path, under the bodies directory, of the PNG of
	// the rendered page's viewport (--render-screenshots), or "not
	// stored: " and why.
	ScreenshotRef string `json:"screenshot_ref,omitempty"`
	// LinksRefused are links of the page the frontier did not take (a URL
	// longer than MaxURLBytes), each with the reason.
	LinksRefused []RefusedLink `json:"links_refused,omitempty"`
	// Label is the label the URL was queued with: a user crawler's, or
	// the one the built-in crawler's label rules (crawl.Options.Labels)
	// gave it.
	Label string `json:"label,omitempty"`
	// Items counts the items the page's handler pushed and that were
	// recorded with it; Skipped is the reason a handler gave to skip it.
	Items   int    `json:"items,omitempty"`
	Skipped string `json:"skipped,omitempty"`
	// Change is the page's change against the job's baseline
	// (ChangeNew, ChangeChanged, ChangeUnchanged): a page answered 304 is
	// unchanged, and holds the baseline's title, fields and links.
	Change string `json:"change,omitempty"`
	// Carried: the page was not due (Spec.Adaptive) and is the
	// baseline's, carried over without a request.
	Carried bool `json:"carried,omitempty"`
}

// BatchRef is one batch in flight: which Runner it was given to.
type BatchRef struct {
	Batch  string `json:"batch"`
	Runner string `json:"runner"`
	Size   int    `json:"size"`
}

// AssignInput asks for batches for idle Runners.
type AssignInput struct {
	Spec     Spec       `json:"spec"`
	InFlight []BatchRef `json:"in_flight"`
	Seq      int        `json:"seq"` // number of the next batch
	// Start stores the job first (what JobStart does), so a new job's
	// first batches go out in the same activity.
	Start bool `json:"start,omitempty"`
}

// AssignResult lists the batches handed out.
type AssignResult struct {
	Assigned []BatchRef `json:"assigned"`
	// Done lists assigned batches that finished before the call returned
	// (a new job's first call waits a moment for them).
	Done  []BatchRef `json:"done,omitempty"`
	Stats Stats      `json:"stats"`
}

// AwaitResult is what changed for a job's batches.
type AwaitResult struct {
	Done     []BatchRef `json:"done"`
	Requeued []BatchRef `json:"requeued"` // re-queued: their Runner died and nobody took over
	// Failed are batches that could not run (their Runner reported an
	// error, e.g. a spec it could not read); Error says why.
	Failed []BatchRef `json:"failed,omitempty"`
	Error  string     `json:"error,omitempty"`
	Idle   bool       `json:"idle"` // an idle Runner could take more work
	Stats  Stats      `json:"stats"`
}
