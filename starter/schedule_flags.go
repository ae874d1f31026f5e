package main

import (
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/roles"
)

// crawlTemplate holds the crawl flags of `baton schedule create`: the job
// every firing submits, as `baton crawl` with the same flags would. (The
// flags are `baton crawl`'s, registered here too: crawl's are local to
// its command.)
type crawlTemplate struct {
	selects, domains, sitemaps []string
	follow, ignoreRobots       bool
	denyPrivate, storeBodies   bool
	keepTracking               bool
	depth, maxPages, batch     int
	parallelism, retries       int
	delay, timeout             time.Duration
	maxBody                    int64
	userAgent, proxy           string
	bodiesDir, crawlerName     string
	sets, labels, links        []string
	followAllow, followDeny    []string
	// refused: flags of `baton crawl` a schedule does not take.
	refused map[string]*[]string
}

// scheduleRefusals are `baton crawl` flags a schedule refuses, with why.
var scheduleRefusals = map[string]string{
	"cookie":        "a schedule's job is stored in the Temporal schedule, which the Web UI shows: it carries no credentials",
	"authorization": "a schedule's job is stored in the Temporal schedule, which the Web UI shows: it carries no credentials",
	"header":        "headers are sealed as secrets, and a schedule's job carries none (it is stored in the Temporal schedule, which the Web UI shows)",
	"cookie-file":   "a schedule's job carries no credentials",
	"auth-file":     "a schedule's job carries no credentials",
	"header-file":   "a schedule's job carries no secrets (headers are sealed as secrets)",
	"seeds-file":    "a seeds file is read where the command runs, not at each firing: give the seeds as arguments or --sitemap",
}

func (ct *crawlTemplate) add(f *pflag.FlagSet) {
	def := crawl.DefaultOptions()
	f.StringVar(&ct.crawlerName, "crawler", "", "the crawler that runs the jobs' pages (as baton crawl --crawler)")
	f.StringArrayVar(&ct.sets, "set", nil, "an option of the user crawler, key=value (repeatable)")
	f.StringArrayVar(&ct.labels, "label", nil, "NAME=REGEX label rule, or NAME: the seeds' label (as baton crawl --label)")
	f.StringArrayVar(&ct.selects, "select", nil, "extract a field: name=SELECTOR (repeatable; as baton crawl --select)")
	f.StringArrayVar(&ct.followAllow, "follow-allow", nil, "follow only links matching this regexp (repeatable)")
	f.StringArrayVar(&ct.followDeny, "follow-deny", nil, "never follow links matching this regexp (repeatable)")
	f.StringArrayVar(&ct.links, "links", nil, "with --follow: json:PATH of links in JSON responses (repeatable)")
	f.StringVar(&ct.userAgent, "user-agent", def.UserAgent, "User-Agent of every request")
	f.StringArrayVar(&ct.sitemaps, "sitemap", nil, "crawl the pages a sitemap lists (URL, repeatable; 'robots' for the seeds' robots.txt)")
	f.StringVar(&ct.proxy, "proxy", "", "proxy of every request, without credentials")
	f.BoolVar(&ct.storeBodies, "store-bodies", false, "keep every response body in the job store")
	f.StringVar(&ct.bodiesDir, "bodies-dir", "", "keep every response body under this directory of each Runner's machine")
	f.BoolVar(&ct.follow, "follow", false, "follow links within the allowed domains")
	f.IntVar(&ct.depth, "depth", 2, "with --follow: link depth limit")
	f.IntVar(&ct.maxPages, "max-pages", 1000, "most pages in each job (0: no limit)")
	f.StringArrayVar(&ct.domains, "allow-domain", nil, "domain links may stay within (repeatable; default: the seeds' hosts)")
	f.BoolVar(&ct.ignoreRobots, "ignore-robots", false, "do not obey robots.txt")
	f.BoolVar(&ct.denyPrivate, "deny-private", false, "refuse private, loopback and link-local addresses but the seeds'")
	f.BoolVar(&ct.keepTracking, "keep-tracking-params", false, "keep tracking parameters in seeds and links")
	f.DurationVar(&ct.delay, "delay", def.Delay, "least delay between requests to one domain")
	f.IntVar(&ct.parallelism, "parallelism", def.Parallelism, "most concurrent requests to one domain")
	f.IntVar(&ct.retries, "retries", def.Retries, "retries of transient failures")
	f.DurationVar(&ct.timeout, "timeout", def.Timeout, "time limit of one request")
	f.Int64Var(&ct.maxBody, "max-body", def.MaxBodyBytes, "largest body read, in bytes")
	f.IntVar(&ct.batch, "batch-size", 0, "most URLs in one batch (0: a lease lasts while the frontier has work)")
	ct.refused = map[string]*[]string{}
	for name, why := range scheduleRefusals {
		v := new([]string)
		ct.refused[name] = v
		f.StringArrayVar(v, name, nil, "refused: "+why)
		_ = f.MarkHidden(name)
	}
}

// spec builds the job template of the schedule's firings from the flags and
// seeds, checked as `baton crawl` checks its job (its ID is a placeholder:
// each firing names its job). Flags that would put a secret into the
// template are refused.
func (ct *crawlTemplate) spec(cmd *cobra.Command, g *globals, name string, seeds []string) (jobs.Spec, error) {
	for flag := range ct.refused {
		if cmd.Flags().Changed(flag) {
			return jobs.Spec{}, usage("--%s: a schedule does not take it: %s", flag, scheduleRefusals[flag])
		}
	}
	if ct.proxy != "" && os.Getenv(EnvProxyCredentials) != "" {
		return jobs.Spec{}, usage("--proxy with $%s: a schedule's job carries no credentials (it is stored in the Temporal schedule)", EnvProxyCredentials)
	}
	if len(seeds) == 0 && len(ct.sitemaps) == 0 {
		return jobs.Spec{}, usage("no seeds: give seed URLs or --sitemap")
	}
	lf, err := parseLinkFlags(ct.selects, ct.labels, ct.links)
	if err != nil {
		return jobs.Spec{}, err
	}
	crawlerName, version, sets, err := ct.crawler(cmd, g, lf)
	if err != nil {
		return jobs.Spec{}, err
	}
	if len(lf.linksJSON) > 0 && !ct.follow {
		return jobs.Spec{}, usage("--links: the links of JSON responses are followed with --follow: give it too")
	}
	opts := crawl.DefaultOptions()
	opts.Selectors, opts.FieldOrder, opts.Follow, opts.MaxDepth = lf.fields, lf.order, ct.follow, ct.depth
	opts.FollowAllow, opts.FollowDeny, opts.LinksJSON = ct.followAllow, ct.followDeny, lf.linksJSON
	opts.Labels, opts.LabelSelectors = lf.labels, lf.labelFields
	opts.IgnoreRobots, opts.Delay, opts.Parallelism, opts.Retries = ct.ignoreRobots, ct.delay, ct.parallelism, ct.retries
	opts.Timeout, opts.MaxBodyBytes, opts.DenyPrivate = ct.timeout, ct.maxBody, ct.denyPrivate
	opts.UserAgent, opts.Proxy = ct.userAgent, ct.proxy
	opts.AllowedDomains, opts.KeepTrackingParams = ct.domains, ct.keepTracking
	sub := jobs.Submission{ID: scheduleTemplateID(name), Group: g.group, Seeds: seeds, Sitemaps: ct.sitemaps,
		MaxPages: ct.maxPages, BatchSize: ct.batch, StoreBodies: ct.storeBodies, BodiesDir: ct.bodiesDir, Options: opts,
		Crawler: crawlerName, CrawlerVersion: version, CrawlerOptions: sets, SeedLabel: lf.seedLabel}
	plan, err := sub.Build()
	if err != nil {
		return jobs.Spec{}, submitError(err)
	}
	if !plan.Secrets.Empty() {
		return jobs.Spec{}, usage("a schedule's job carries no secrets: %s", strings.Join(plan.Spec.Secrets, ", "))
	}
	if plan.Spec.SeedsStored > 0 {
		return jobs.Spec{}, usage("--sitemap robots with stored seeds: give the sitemaps' URLs")
	}
	return plan.Spec, nil
}

// crawler checks --crawler and --set as `baton crawl` does, returning the
// crawler's name ("" for the built-in one), pinned version and options.
func (ct *crawlTemplate) crawler(cmd *cobra.Command, g *globals, lf linkFlags) (string, string, map[string]string, error) {
	name := ct.crawlerName
	if name == roles.BuiltinCrawler {
		name = ""
	}
	if name == "" {
		if len(ct.sets) > 0 {
			return "", "", nil, usage("--set: options of a user crawler: name it with --crawler (the built-in crawler takes flags)")
		}
		return "", "", nil, nil
	}
	if len(ct.selects) > 0 || ct.follow {
		return "", "", nil, usage("--select and --follow are the built-in crawler's: crawler %s chooses its links and items in code", name)
	}
	if f := lf.builtinOnly(); f != "" {
		return "", "", nil, usage("%s is the built-in crawler's: crawler %s labels and chooses its links in code", f, name)
	}
	sets, err := parsePairs("set", ct.sets)
	if err != nil {
		return "", "", nil, err
	}
	version, err := pickCrawler(cmd.Context(), g, name, sets)
	if err != nil {
		return "", "", nil, err
	}
	if !cmd.Flags().Changed("depth") {
		ct.depth = 0
	}
	name, _, _ = strings.Cut(name, "@")
	return name, version, sets, nil
}

// scheduleTemplateID is the placeholder ID of a schedule's job template
// (a valid ID of the length of the jobs' names; each firing sets its own).
func scheduleTemplateID(name string) string { return name + "-" + strings.Repeat("0", 8) + "T000000Z" }

// scheduleMemo is the memo `baton crawl` gives a job's workflow, for the
// schedule's jobs.
func scheduleMemo(spec jobs.Spec) map[string]any {
	memo := map[string]any{"seeds": spec.Seeds, "follow": spec.Options.Follow, "depth": spec.Options.MaxDepth,
		"max_pages": spec.MaxPages, "selectors": spec.Options.Selectors}
	if len(spec.Sitemaps) > 0 {
		memo["sitemaps"] = spec.Sitemaps
	}
	return memo
}
