package main

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/batoncrawl/baton/activities/cmdline/initgc"
	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/roles"
	"github.com/batoncrawl/baton/workflows"
)

// crawlFlags are the flags of `baton crawl`, by group: the job, the
// crawler, scope, extraction, requests, politeness and storage.
type crawlFlags struct {
	adaptive                   bool
	adaptiveFloor, adaptiveCap time.Duration
	id, profile, baseline      string
	selects, domains, cookies  []string
	authz, headers, sitemaps   []string
	follow, ignoreRobots, wait bool
	denyPrivate, storeBodies   bool
	keepTracking               bool
	depth, maxPages, batch     int
	parallelism, retries       int
	delay, timeout             time.Duration
	maxBody                    int64
	userAgent, seedsFile       string
	proxy, bodiesDir           string
	warcDir, politeness        string
	crawlerName                string
	sets, labels, links        []string
	followAllow, followDeny    []string
	secretParams               []string
	secretSets                 []string // the crawler's secret --set keys

	sf  secretFlags // --cookie-file, --auth-file, --header-file: secrets.go
	rf  renderFlags // --render, --render-wait, ...: renderflags.go
	def crawl.Options
}

// crawlCmd submits a job to the cluster, never to a named node.
func crawlCmd(g *globals, tf *temporalFlags) *cobra.Command {
	cf := &crawlFlags{def: crawl.DefaultOptions()}
	var co *crawlOutput // --output, -q, --wait-for-runners: crawlwait.go
	cmd := &cobra.Command{
		Use:   "crawl [SEED_URL...]",
		Short: "Submit a crawl job to the cluster (it spreads the work over idle Runners)",
		Example: `  baton crawl http://127.0.0.1:8000/ --follow --depth 3 --select title=h1 --select price=.price --wait
  baton crawl http://127.0.0.1:8000/a http://127.0.0.1:8000/b --id my-job
  baton crawl --seeds-file urls.txt --select image='img.main@src' --select sku='xpath://*[@itemprop="sku"]'
  baton crawl --sitemap http://127.0.0.1:8000/sitemap.xml --user-agent 'shopbot/1.0' --header 'Accept-Language: de'
  baton crawl http://127.0.0.1:8000/ --sitemap robots --store-bodies
  baton crawl http://127.0.0.1:8000/ --follow --follow-deny '/private/|/missing/' \
    --label product='/page/\d+\.html$' --select product:price=.price
  baton crawl https://api.example.com/items --follow --links json:items.#.url --links json:next`,
		Args:        cobra.ArbitraryArgs,
		Annotations: map[string]string{annotationGC: "smallHeapGC unless --seeds-file"},
		RunE: func(cmd *cobra.Command, args []string) error {
			if cf.seedsFile == "" {
				smallHeapGC()
			} else {
				initgc.Restore() // a seeds file's chunks are collected as Go does
			}
			sub, lf, err := cf.submission(cmd, g, args)
			if err != nil {
				return err
			}
			if sub.File != nil {
				defer sub.File.Close()
			}
			plan, err := sub.Build()
			if err != nil {
				return submitError(err)
			}
			if err := checkBaseline(cmd.Context(), g, tf, sub.Baseline); err != nil {
				return err
			}
			if err := co.check(cmd, cf.wait); err != nil {
				return err
			}
			return cf.submit(cmd, g, tf, co, plan, args, lf)
		},
	}
	cf.addFlags(cmd.Flags())
	co = addCrawlOutputFlags(cmd)
	return cmd
}

// addFlags registers every flag of `baton crawl` but its output flags.
func (cf *crawlFlags) addFlags(f *pflag.FlagSet) {
	cf.sf.add(f)
	cf.addJobFlags(f)
	cf.addSpecFlags(f)
}

// addSpecFlags registers the flags of what a job crawls and how: those
// `baton schedule create` takes too (it refuses --seeds-file, --cookie,
// --authorization and --header among them).
func (cf *crawlFlags) addSpecFlags(f *pflag.FlagSet) {
	cf.rf.add(f)
	cf.addCrawlerFlags(f)
	cf.addScopeFlags(f)
	cf.addExtractionFlags(f)
	cf.addRequestFlags(f)
	cf.addPolitenessFlags(f)
	cf.addStorageFlags(f)
	cf.addRecrawlFlags(f)
}

// addRecrawlFlags: how the runs of a crawl done again pick their pages.
func (cf *crawlFlags) addRecrawlFlags(f *pflag.FlagSet) {
	f.BoolVar(&cf.adaptive, "adaptive", false, "give each page a refetch interval that adapts to how often it changes: a run with a baseline fetches only the pages due, and new ones; the others are carried over unchanged without a request")
	f.DurationVar(&cf.adaptiveFloor, "adaptive-floor", time.Hour, "with --adaptive: the shortest refetch interval (a page's first)")
	f.DurationVar(&cf.adaptiveCap, "adaptive-cap", 14*24*time.Hour, "with --adaptive: the longest refetch interval")
}

// addJobFlags: the job's ID, --wait and the deprecated timer profile.
func (cf *crawlFlags) addJobFlags(f *pflag.FlagSet) {
	f.StringVar(&cf.id, "id", "", "job ID (default: generated)")
	f.StringVar(&cf.baseline, "baseline", "", "crawl again against this earlier job: requests carry its pages' validators (If-None-Match, If-Modified-Since), a 304 takes its page, and each page is recorded new, changed or unchanged (docs/recrawl.md)")
	f.StringVar(&cf.profile, "timers", "default", "timer profile (default or fast)")
	_ = f.MarkDeprecated("timers", "the job uses the group's timer profile, as its workers are configured")
	f.BoolVar(&cf.wait, "wait", false, "wait for the job, show a live progress bar (on stderr), then its stats; exit code 4 if it ends cancelled or failed")
}

// addCrawlerFlags: the crawler that runs the job's pages and its options.
func (cf *crawlFlags) addCrawlerFlags(f *pflag.FlagSet) {
	f.StringVar(&cf.crawlerName, "crawler", "", "the crawler that runs the job's pages: a user crawler a worker binary of the group carries (NAME or NAME@VERSION; baton cluster lists them), default the built-in one")
	f.StringArrayVar(&cf.sets, "set", nil, "an option of the user crawler, key=value (repeatable; checked against the options the workers advertise)")
}

// addScopeFlags: which pages the job crawls.
func (cf *crawlFlags) addScopeFlags(f *pflag.FlagSet) {
	f.StringArrayVar(&cf.followAllow, "follow-allow", nil, "follow only links whose normalised URL matches this regexp (repeatable: any of them)")
	f.StringArrayVar(&cf.followDeny, "follow-deny", nil, "never follow links whose normalised URL matches this regexp (repeatable; wins over --follow-allow)")
	f.StringArrayVar(&cf.links, "links", nil, "with --follow: json:PATH, a GJSON path whose strings in JSON responses are links to follow (repeatable; json:items.#.url)")
	f.StringVar(&cf.seedsFile, "seeds-file", "", "read more seed URLs from FILE, one per line ('#' comments; - for stdin); they go to the job store, not the workflow")
	f.StringArrayVar(&cf.sitemaps, "sitemap", nil, "crawl the pages a sitemap or sitemap index lists (URL, repeatable); 'robots' reads the Sitemap: lines of the seeds' robots.txt")
	f.BoolVar(&cf.follow, "follow", false, "follow links within the allowed domains")
	f.IntVar(&cf.depth, "depth", 2, "with --follow: link depth limit (seeds are depth 0); with --crawler: none unless given")
	f.IntVar(&cf.maxPages, "max-pages", 1000, "most pages in the job (0: no limit); with --crawler: none unless given. A job that reaches it says so in --wait, status and its stats")
	f.StringArrayVar(&cf.domains, "allow-domain", nil, "domain links may stay within (repeatable; default: the seeds' hosts)")
	f.BoolVar(&cf.keepTracking, "keep-tracking-params", false, "keep tracking parameters (utm_*, fbclid, gclid, ...) in seeds and links; by default they are removed")
	f.IntVar(&cf.batch, "batch-size", 0, "most URLs in one batch, a Runner's lease on the job (it starts small and grows as the Runner pulls work; then the job hands out the next); 0: a lease lasts while the frontier has work")
}

// addExtractionFlags: what the built-in crawler records of a page.
func (cf *crawlFlags) addExtractionFlags(f *pflag.FlagSet) {
	f.StringArrayVar(&cf.labels, "label", nil, "NAME=REGEX: pages whose normalised URL matches REGEX get label NAME (repeatable, the first match wins; "+
		"recorded with each page; see --select NAME:field); NAME alone: the label of the seeds (which handler of a user crawler gets them)")
	f.StringArrayVar(&cf.selects, "select", nil, "extract a field: name=SELECTOR (repeatable); SELECTOR is CSS (h1.title) for the text, "+
		"CSS@attr (a.next@href) for an attribute, xpath:EXPR (xpath://a/@href), or json:PATH on JSON responses (json:items.#.name); "+
		"LABEL:name=SELECTOR extracts it from the pages of --label LABEL only")
}

// addRequestFlags: what every request of the job sends, and through what.
func (cf *crawlFlags) addRequestFlags(f *pflag.FlagSet) {
	f.StringVar(&cf.userAgent, "user-agent", cf.def.UserAgent, "User-Agent of every request (robots.txt groups are matched against it)")
	f.StringArrayVar(&cf.headers, "header", nil, "header sent with every request: 'Name: value' (repeatable)")
	f.StringVar(&cf.proxy, "proxy", "", "proxy of every request of this job: http://, https:// or socks5://host:port, its user:password in $BATON_PROXY_CREDENTIALS (default: $HTTP_PROXY/$HTTPS_PROXY)")
	f.BoolVar(&cf.denyPrivate, "deny-private", false, "refuse private, loopback and link-local addresses for every request of the job but the seed and sitemap URLs typed as IP addresses (their redirects, sitemap entries, robots.txt and links included; a typed host name is guarded too)")
	f.DurationVar(&cf.timeout, "timeout", cf.def.Timeout, "time limit of one request")
	f.Int64Var(&cf.maxBody, "max-body-bytes", cf.def.MaxBodyBytes, "largest body read, in bytes")
	f.Int64Var(&cf.maxBody, "max-body", cf.def.MaxBodyBytes, "largest body read, in bytes")
	_ = f.MarkDeprecated("max-body", "use --max-body-bytes")
	f.StringArrayVar(&cf.cookies, "cookie", nil, "cookie name=value sent with every request (repeatable)")
	f.StringArrayVar(&cf.authz, "authorization", nil, "authorization: Bearer=TOKEN, Basic=B64 or Header=value (repeatable)")
	f.StringSliceVar(&cf.secretParams, "secret-params", nil, "query parameters whose values in the seed URLs are secrets (token,sig): sealed with the seeds' user:password into the job store, shown as REDACTED, sent only to the seed's own scheme, host and port")
}

// addPolitenessFlags: how the job treats the sites it crawls.
func (cf *crawlFlags) addPolitenessFlags(f *pflag.FlagSet) {
	f.BoolVar(&cf.ignoreRobots, "ignore-robots", false, "do not obey robots.txt")
	f.DurationVar(&cf.delay, "delay", cf.def.Delay, "least delay between requests to one domain")
	f.IntVar(&cf.parallelism, "parallelism", cf.def.Parallelism, "most concurrent requests to one domain")
	f.StringVar(&cf.politeness, "politeness", jobs.PolitenessGroup, "whose budget --parallelism, --delay and robots.txt Crawl-delay are per host: group (shared with every running job of the group crawling the host; the stricter job's holds) or job (this job's own)")
	f.IntVar(&cf.retries, "retries", cf.def.Retries, "retries of transient failures (timeouts, 429, 5xx)")
}

// addStorageFlags: where the response bodies are kept.
func (cf *crawlFlags) addStorageFlags(f *pflag.FlagSet) {
	f.BoolVar(&cf.storeBodies, "store-bodies", false, "keep every response body, compressed, in the job store (for reprocessing)")
	f.StringVar(&cf.bodiesDir, "bodies-dir", "", "keep every response body, compressed, as files under this directory of each Runner's machine")
	f.StringVar(&cf.warcDir, "warc", "", "archive every response as received (raw bytes, Content-Encoding kept) in WARC/1.1 files under this directory of each Runner's machine (under the workers' --bodies-root)")
}

// submission reads the flags and seeds into the job's submission (its
// seeds file open, for the caller to close).
func (cf *crawlFlags) submission(cmd *cobra.Command, g *globals, args []string) (jobs.Submission, linkFlags, error) {
	if cf.id == "" {
		cf.id = newJobID()
	}
	if len(args) == 0 && cf.seedsFile == "" && len(cf.sitemaps) == 0 {
		return jobs.Submission{}, linkFlags{}, usage("no seeds: give seed URLs, --seeds-file or --sitemap")
	}
	ck, az, hdr, err := cf.secretPairs()
	if err != nil {
		return jobs.Submission{}, linkFlags{}, err
	}
	if w := cf.argvSecretsWarning(); w != "" {
		fmt.Fprintln(cmd.ErrOrStderr(), w)
	}
	if w := seedSecretsWarning(args, cf.secretParams); w != "" {
		fmt.Fprintln(cmd.ErrOrStderr(), w)
	}
	timers, err := cf.timers(cmd)
	if err != nil {
		return jobs.Submission{}, linkFlags{}, err
	}
	sub, lf, err := cf.submissionFor(cmd, g, args, hdr)
	if err != nil {
		return jobs.Submission{}, lf, err
	}
	var given []string
	for _, kv := range cf.sets {
		if k, _, _ := strings.Cut(kv, "="); slices.Contains(cf.secretSets, strings.TrimSpace(k)) {
			given = append(given, strings.TrimSpace(k))
		}
	}
	if len(given) > 0 {
		fmt.Fprintf(cmd.ErrOrStderr(), "warning: --set %s: secret options of crawler %s on the command line are shown by ps and kept in shell histories; they are sealed in the job store all the same\n",
			strings.Join(given, ", "), cf.crawlerName)
	}
	sub.ID, sub.Cookie, sub.Authorization, sub.Timers = cf.id, ck, az, timers
	sub.Baseline = cf.baseline
	if cf.seedsFile != "" {
		if sub.File, err = jobs.ScanSeedFile(cf.seedsFile, cmd.InOrStdin()); err != nil {
			return jobs.Submission{}, lf, submitError(err)
		}
	}
	return sub, lf, nil
}

// submissionFor reads the flags of what a job crawls and how (addSpecFlags)
// into a submission of seeds with headers hdr: all of the job but its ID,
// credentials, timers and seeds file. `baton crawl` and `baton schedule
// create` both build their job with it.
func (cf *crawlFlags) submissionFor(cmd *cobra.Command, g *globals, seeds []string, hdr map[string]string) (jobs.Submission, linkFlags, error) {
	lf, err := parseLinkFlags(cf.selects, cf.labels, cf.links)
	if err != nil {
		return jobs.Submission{}, lf, err
	}
	crawlerVersion, crawlerSets, err := cf.crawler(cmd, g, lf)
	if err != nil {
		return jobs.Submission{}, lf, err
	}
	if len(lf.linksJSON) > 0 && !cf.follow {
		return jobs.Submission{}, lf, usage("--links: the links of JSON responses are followed with --follow: give it too")
	}
	opts, err := cf.options(lf, hdr)
	if err != nil {
		return jobs.Submission{}, lf, err
	}
	if cf.politeness != jobs.PolitenessGroup && cf.politeness != jobs.PolitenessJob {
		return jobs.Submission{}, lf, usage("--politeness %q: want group or job", cf.politeness)
	}
	var adaptive *jobs.Adaptive
	if cf.adaptive {
		adaptive = &jobs.Adaptive{Floor: cf.adaptiveFloor, Cap: cf.adaptiveCap}
	} else if cmd.Flags().Changed("adaptive-floor") || cmd.Flags().Changed("adaptive-cap") {
		return jobs.Submission{}, lf, usage("--adaptive-floor and --adaptive-cap bound --adaptive: give it too")
	}
	return jobs.Submission{Group: g.group, Seeds: seeds, Sitemaps: cf.sitemaps, MaxPages: cf.maxPages,
		BatchSize: cf.batch, StoreBodies: cf.storeBodies, BodiesDir: cf.bodiesDir, WARCDir: cf.warcDir, Options: opts,
		Crawler: cf.crawlerName, CrawlerVersion: crawlerVersion, CrawlerOptions: crawlerSets, SeedLabel: lf.seedLabel,
		SecretParams: cf.secretParams, SecretSettings: cf.secretSets, Adaptive: adaptive, Politeness: cf.politeness}, lf, nil
}

// secretPairs reads --cookie, --authorization and --header with their
// files.
func (cf *crawlFlags) secretPairs() (ck, az, hdr map[string]string, err error) {
	if ck, err = parsePairs("cookie", cf.cookies); err != nil {
		return nil, nil, nil, err
	}
	if az, err = parsePairs("authorization", cf.authz); err != nil {
		return nil, nil, nil, err
	}
	if hdr, err = parseHeaders(cf.headers); err != nil {
		return nil, nil, nil, err
	}
	for _, f := range []struct {
		flag, path, sep string
		into            *map[string]string
	}{{"cookie-file", cf.sf.cookieFile, "=", &ck}, {"auth-file", cf.sf.authFile, "=", &az}, {"header-file", cf.sf.headerFile, ":", &hdr}} {
		m, err := readSecretFile(f.flag, f.path, f.sep)
		if err != nil {
			return nil, nil, nil, err
		}
		*f.into = merge(*f.into, m)
	}
	return ck, az, hdr, nil
}

// argvSecretsWarning warns of secrets given on the command line, where
// ps and shell histories show them ("" when there are none): the files'
// flags keep them off it.
func (cf *crawlFlags) argvSecretsWarning() string {
	var flags []string
	for _, f := range []struct {
		name, file string
		n          int
	}{{"--cookie", "--cookie-file", len(cf.cookies)}, {"--authorization", "--auth-file", len(cf.authz)}, {"--header", "--header-file", len(cf.headers)}} {
		if f.n > 0 {
			flags = append(flags, f.name+" (use "+f.file+")")
		}
	}
	if len(flags) == 0 {
		return ""
	}
	return "warning: secrets on the command line are shown by ps and kept in shell histories: " + strings.Join(flags, ", ") +
		"; they are sealed in the job store all the same"
}

// seedSecretsWarning warns of seed arguments that hold a secret (a
// user:password, a parameter of --secret-params): ps shows them too.
func seedSecretsWarning(seeds, params []string) string {
	n := 0
	for _, u := range seeds {
		if _, secs, err := crawl.SplitURLSecrets(u, params, nil); err == nil && len(secs) > 0 {
			n++
		}
	}
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("warning: %d seed URLs on the command line hold a user:password or a --secret-params value, shown by ps and kept in shell histories (use --seeds-file); they are sealed in the job store all the same", n)
}

// timers is the job's timer profile: the group's (the workers'), unless
// the deprecated --timers names one.
func (cf *crawlFlags) timers(cmd *cobra.Command) (roles.Timers, error) {
	if !cmd.Flags().Changed("timers") {
		return roles.Timers{}, nil
	}
	switch cf.profile {
	case "default":
		return roles.DefaultTimers(), nil
	case "fast":
		return roles.FastTimers(), nil
	}
	return roles.Timers{}, usage("--timers %q: want default or fast", cf.profile)
}

// crawler checks --crawler and --set against the group's workers and the
// built-in crawler's flags; it leaves the crawler's bare name in
// cf.crawlerName ("" for the built-in one).
func (cf *crawlFlags) crawler(cmd *cobra.Command, g *globals, lf linkFlags) (version string, sets map[string]string, err error) {
	if cf.crawlerName == roles.BuiltinCrawler {
		cf.crawlerName = ""
	}
	if cf.crawlerName == "" {
		if len(cf.sets) > 0 {
			return "", nil, usage("--set: options of a user crawler: name it with --crawler (the built-in crawler takes flags)")
		}
		return "", nil, nil
	}
	if len(cf.selects) > 0 || cf.follow {
		return "", nil, usage("--select and --follow are the built-in crawler's: crawler %s chooses its links and items in code", cf.crawlerName)
	}
	if f := lf.builtinOnly(); f != "" {
		return "", nil, usage("%s is the built-in crawler's: crawler %s labels and chooses its links in code (--label NAME labels its seeds)", f, cf.crawlerName)
	}
	if sets, err = parsePairs("set", cf.sets); err != nil {
		return "", nil, err
	}
	if version, cf.secretSets, err = pickCrawler(cmd.Context(), g, cf.crawlerName, sets); err != nil {
		return "", nil, err
	}
	cf.crawlerName, _, _ = strings.Cut(cf.crawlerName, "@")
	// A user crawler's handlers choose their links: no depth limit and no
	// page cap unless asked.
	if !cmd.Flags().Changed("depth") {
		cf.depth = 0
	}
	if !cmd.Flags().Changed("max-pages") {
		cf.maxPages = 0
	}
	return version, sets, nil
}

// options are the job's fetch and extraction options.
func (cf *crawlFlags) options(lf linkFlags, hdr map[string]string) (crawl.Options, error) {
	opts := cf.def
	opts.Selectors, opts.FieldOrder, opts.Follow, opts.MaxDepth = lf.fields, lf.order, cf.follow, cf.depth
	opts.FollowAllow, opts.FollowDeny, opts.LinksJSON = cf.followAllow, cf.followDeny, lf.linksJSON
	opts.Labels, opts.LabelSelectors = lf.labels, lf.labelFields
	opts.IgnoreRobots, opts.Delay, opts.Parallelism, opts.Retries = cf.ignoreRobots, cf.delay, cf.parallelism, cf.retries
	opts.Timeout, opts.MaxBodyBytes, opts.DenyPrivate = cf.timeout, cf.maxBody, cf.denyPrivate
	opts.UserAgent, opts.Headers, opts.Proxy = cf.userAgent, hdr, cf.proxy
	if cred := os.Getenv(EnvProxyCredentials); cred != "" && cf.proxy != "" {
		u, err := url.Parse(cf.proxy)
		if err != nil || u.User != nil {
			return opts, usage("--proxy with $%s: give the proxy URL without user:password@", EnvProxyCredentials)
		}
		user, pw, _ := strings.Cut(cred, ":")
		u.User = url.UserPassword(user, pw)
		opts.Proxy = u.String()
	}
	opts.AllowedDomains, opts.KeepTrackingParams = cf.domains, cf.keepTracking
	opts.RenderOptions = cf.rf.options()
	return opts, nil
}

// crawlConns are the connections a submission needs, dialled side by
// side: Temporal, the Runners in ZooKeeper (with --wait) and the group's
// operator limits.
type crawlConns struct {
	c    client.Client
	live *runnerCheck
	lim  limitsRead
}

// limitsRead is the group's operator limits as read (groupLimits).
type limitsRead struct {
	l    jobs.Limits
	ok   bool
	note string
	bad  error
}

// dial connects before anything is submitted. With --wait the Runners are
// watched in ZooKeeper while waiting, dialled beside Temporal (a quicker
// pickup); the group's operator limits are read beside Temporal too, so a
// job above them is refused before anything is stored.
func (cf *crawlFlags) dial(cmd *cobra.Command, g *globals, tf *temporalFlags, co *crawlOutput) (*crawlConns, error) {
	type dialed struct {
		live *runnerCheck
		lim  limitsRead
		err  error
	}
	// One ZooKeeper session: the limits are read, then (with --wait) it
	// watches the Runners.
	zk := make(chan dialed, 1)
	go func() {
		c, closeFn, err := g.dial(cmd.Context())
		var d dialed
		d.lim.l, d.lim.ok, d.lim.note, d.lim.bad = limitsOf(cmd.Context(), c, err)
		switch {
		case err != nil && cf.wait:
			d.err = err
		case err == nil && cf.wait:
			d.live = &runnerCheck{c: c, close: closeFn, job: cf.id}
		case err == nil:
			closeFn()
		}
		zk <- d
	}()
	c, err := tf.dial(cmd.Context())
	d := <-zk
	cn := &crawlConns{c: c, live: d.live, lim: d.lim}
	if d.err == nil {
		d.err = cn.lim.bad
	}
	if d.err == nil {
		d.err = err
	}
	if d.err != nil {
		cn.close()
		return nil, d.err
	}
	return cn, nil
}

func (cn *crawlConns) close() {
	if cn.live != nil {
		cn.live.Close()
	}
	if cn.c != nil {
		cn.c.Close()
	}
}

// submit checks the job against the group's limits, stores its seeds and
// secrets, starts its workflow and reports it (with --wait, until it
// ends).
func (cf *crawlFlags) submit(cmd *cobra.Command, g *globals, tf *temporalFlags, co *crawlOutput, plan jobs.Plan, args []string, lf linkFlags) error {
	cn, err := cf.dial(cmd, g, tf, co)
	if err != nil {
		return err
	}
	defer cn.close()
	spec, secrets := plan.Spec, plan.Secrets
	if cn.lim.note != "" {
		fmt.Fprintln(cmd.ErrOrStderr(), cn.lim.note)
	}
	if cn.lim.ok {
		if err := checkGroupLimits(cmd, cn.lim.l, &plan.Spec); err != nil {
			return err
		}
		spec = plan.Spec
	}
	if spec.SeedsStored > 0 {
		// Large seed lists go to the job's frontier in the store, never
		// into the workflow's input.
		n, err := queueSeeds(cmd.Context(), g, tf, plan)
		if err != nil {
			return err
		}
		// A note, not data: stdout holds the job ID (-q) or the JSON
		// document (--output json) alone.
		fmt.Fprintf(cmd.ErrOrStderr(), "%d URLs queued in the job store (seeds from %s)\n", n, cf.seedsFile)
	}
	if !secrets.Empty() {
		if err := storeSecrets(cmd.Context(), g, tf, &cf.sf, cf.id, secrets); err != nil {
			return err
		}
	}
	wid := workflows.JobWorkflowID(g.group, cf.id)
	run, err := cn.c.ExecuteWorkflow(cmd.Context(), client.StartWorkflowOptions{
		ID: wid, TaskQueue: workflows.JobQueue(g.group), WorkflowTaskTimeout: workflows.JobTaskTimeout,
		WorkflowIDReusePolicy:                    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		TypedSearchAttributes: temporal.NewSearchAttributes(workflows.AttrCluster.ValueSet(g.group),
			workflows.AttrJob.ValueSet(cf.id), workflows.AttrRole.ValueSet("job")),
		Memo: cf.memo(spec, args, lf),
	}, workflows.CrawlJob, workflows.JobInput{Spec: spec})
	if err != nil {
		var exists *serviceerror.WorkflowExecutionAlreadyStarted
		if errors.As(err, &exists) {
			return usage("job %q exists already: choose another --id", cf.id)
		}
		return fmt.Errorf("submit job: %w", err)
	}
	if cf.wait && !co.quiet && !co.o.JSON() {
		ahead := openAhead(cmd.Context(), g, tf)
		defer ahead.close()
		co.stats = func(w io.Writer) { ahead.report(cmd.Context(), w, cf.id) }
	}
	co.growing, co.maxPages = jobGrows(spec), spec.MaxPages
	return co.report(cmd, cn.c, submitted{ID: cf.id, WorkflowID: wid, RunID: run.GetRunID(), WebUI: tf.link(wid)}, cf.wait, cn.live)
}

// memo is what the job's workflow shows of its submission in Temporal.
func (cf *crawlFlags) memo(spec jobs.Spec, args []string, lf linkFlags) map[string]any {
	memo := map[string]any{"seeds": spec.Seeds, "follow": cf.follow, "depth": cf.depth, "max_pages": cf.maxPages,
		"selectors": lf.fields}
	if cf.seedsFile != "" {
		memo["seeds_file"], memo["seeds_stored"] = cf.seedsFile, spec.SeedsStored
	}
	if len(spec.Sitemaps) > 0 {
		memo["sitemaps"] = spec.Sitemaps
	}
	return memo
}
