package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/batoncrawl/baton/activities/cmdline/exitcode"
	"github.com/batoncrawl/baton/activities/connect"
	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/roles"
	"github.com/batoncrawl/baton/workflows"
)

type temporalFlags struct {
	conn  connect.Temporal
	uiURL string
	st    storeFlags
	g     *globals
}

func (t *temporalFlags) add(cmd *cobra.Command) {
	f := cmd.PersistentFlags()
	t.conn.AddFlags(f)
	f.StringVar(&t.uiURL, "ui-url", "http://127.0.0.1:8233", "Temporal Web UI base URL, for the links printed")
	t.st.add(f)
}

// dial connects to Temporal within --connect-timeout.
func (t *temporalFlags) dial(ctx context.Context) (client.Client, error) {
	return t.dialWithin(ctx, t.g.connectTimeout)
}

// dialWithin connects to Temporal within timeout.
func (t *temporalFlags) dialWithin(ctx context.Context, timeout time.Duration) (client.Client, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	opts, err := t.conn.Options(quietLogger())
	if err != nil {
		return nil, exitcode.With(exitcode.Usage, err)
	}
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		return nil, t.conn.Unreachable(err, timeout)
	}
	return c, nil
}

func (t *temporalFlags) link(wid string) string {
	return fmt.Sprintf("%s/namespaces/%s/workflows/%s", strings.TrimRight(t.uiURL, "/"), t.conn.Namespace, url.PathEscape(wid))
}

func newJobID() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return "job-" + time.Now().UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b)
}

func parsePairs(flag string, pairs []string) (map[string]string, error) {
	out := map[string]string{}
	for i, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return nil, usage("--%s #%d: want name=value (not shown: it may hold a secret)", flag, i+1)
		}
		out[k] = v
	}
	return out, nil
}

// crawlCmd submits a job to the cluster, never to a named node.
func crawlCmd(g *globals, tf *temporalFlags) *cobra.Command {
	var (
		id, profile                string
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
		crawlerName                string
		sets, labels, links        []string
		followAllow, followDeny    []string
	)
	var co *crawlOutput // --output, -q, --wait-for-runners: crawlwait.go
	var sf secretFlags  // --cookie-file, --auth-file, --header-file: secrets.go
	def := crawl.DefaultOptions()
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
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if id == "" {
				id = newJobID()
			}
			if len(args) == 0 && seedsFile == "" && len(sitemaps) == 0 {
				return usage("no seeds: give seed URLs, --seeds-file or --sitemap")
			}
			lf, err := parseLinkFlags(selects, labels, links)
			if err != nil {
				return err
			}
			ck, err := parsePairs("cookie", cookies)
			if err != nil {
				return err
			}
			az, err := parsePairs("authorization", authz)
			if err != nil {
				return err
			}
			hdr, err := parseHeaders(headers)
			if err != nil {
				return err
			}
			for _, f := range []struct {
				flag, path, sep string
				into            *map[string]string
			}{{"cookie-file", sf.cookieFile, "=", &ck}, {"auth-file", sf.authFile, "=", &az}, {"header-file", sf.headerFile, ":", &hdr}} {
				m, err := readSecretFile(f.flag, f.path, f.sep)
				if err != nil {
					return err
				}
				*f.into = merge(*f.into, m)
			}
			// The group's timer profile applies (the workers'), unless
			// the deprecated --timers names one.
			var timers roles.Timers
			if cmd.Flags().Changed("timers") {
				switch profile {
				case "default":
					timers = roles.DefaultTimers()
				case "fast":
					timers = roles.FastTimers()
				default:
					return usage("--timers %q: want default or fast", profile)
				}
			}
			var crawlerSets map[string]string
			crawlerVersion := ""
			if crawlerName == roles.BuiltinCrawler {
				crawlerName = ""
			}
			if crawlerName == "" && len(sets) > 0 {
				return usage("--set: options of a user crawler: name it with --crawler (the built-in crawler takes flags)")
			}
			if crawlerName != "" {
				if len(selects) > 0 || follow {
					return usage("--select and --follow are the built-in crawler's: crawler %s chooses its links and items in code", crawlerName)
				}
				if f := lf.builtinOnly(); f != "" {
					return usage("%s is the built-in crawler's: crawler %s labels and chooses its links in code (--label NAME labels its seeds)", f, crawlerName)
				}
				if crawlerSets, err = parsePairs("set", sets); err != nil {
					return err
				}
				if crawlerVersion, err = pickCrawler(cmd.Context(), g, crawlerName, crawlerSets); err != nil {
					return err
				}
				crawlerName, _, _ = strings.Cut(crawlerName, "@")
				if !cmd.Flags().Changed("depth") {
					depth = 0 // a user crawler's handlers choose their links: no depth limit unless asked
				}
			}
			if len(lf.linksJSON) > 0 && !follow {
				return usage("--links: the links of JSON responses are followed with --follow: give it too")
			}
			sub := jobs.Submission{ID: id, Group: g.group, Seeds: args, Sitemaps: sitemaps, MaxPages: maxPages,
				BatchSize: batch, Cookie: ck, Authorization: az, Timers: timers,
				StoreBodies: storeBodies, BodiesDir: bodiesDir}
			if seedsFile != "" {
				if sub.File, err = jobs.ScanSeedFile(seedsFile, cmd.InOrStdin()); err != nil {
					return submitError(err)
				}
				defer sub.File.Close()
			}
			opts := def
			opts.Selectors, opts.FieldOrder, opts.Follow, opts.MaxDepth = lf.fields, lf.order, follow, depth
			opts.FollowAllow, opts.FollowDeny, opts.LinksJSON = followAllow, followDeny, lf.linksJSON
			opts.Labels, opts.LabelSelectors = lf.labels, lf.labelFields
			opts.IgnoreRobots, opts.Delay, opts.Parallelism, opts.Retries = ignoreRobots, delay, parallelism, retries
			opts.Timeout, opts.MaxBodyBytes, opts.DenyPrivate = timeout, maxBody, denyPrivate
			opts.UserAgent, opts.Headers, opts.Proxy = userAgent, hdr, proxy
			if cred := os.Getenv(EnvProxyCredentials); cred != "" && proxy != "" {
				u, err := url.Parse(proxy)
				if err != nil || u.User != nil {
					return usage("--proxy with $%s: give the proxy URL without user:password@", EnvProxyCredentials)
				}
				user, pw, _ := strings.Cut(cred, ":")
				u.User = url.UserPassword(user, pw)
				opts.Proxy = u.String()
			}
			opts.AllowedDomains, opts.KeepTrackingParams = domains, keepTracking
			sub.Options = opts
			sub.Crawler, sub.CrawlerVersion, sub.CrawlerOptions, sub.SeedLabel = crawlerName, crawlerVersion, crawlerSets, lf.seedLabel
			plan, err := sub.Build()
			if err != nil {
				return submitError(err)
			}
			spec, secrets := plan.Spec, plan.Secrets
			if err := co.check(cmd, wait); err != nil {
				return err
			}
			var live *runnerCheck
			type dialed struct {
				live *runnerCheck
				err  error
			}
			zk := make(chan dialed, 1)
			if wait {
				// Before anything is submitted: the Runners are watched in
				// ZooKeeper while waiting. Dialled beside Temporal (a
				// quicker pickup), both before the job is submitted.
				go func() {
					l, err := co.runners(cmd.Context(), g, id)
					zk <- dialed{l, err}
				}()
			} else {
				zk <- dialed{}
			}
			// The group's operator limits, read beside Temporal too: a
			// job above them is refused before anything is stored.
			type limitsRead struct {
				l    jobs.Limits
				ok   bool
				note string
				bad  error
			}
			lim := make(chan limitsRead, 1)
			go func() {
				l, ok, note, bad := groupLimits(cmd.Context(), g)
				lim <- limitsRead{l, ok, note, bad}
			}()
			c, err := tf.dial(cmd.Context())
			d := <-zk
			lr := <-lim
			if d.live != nil {
				live = d.live
				defer live.Close()
			}
			if d.err == nil {
				d.err = lr.bad
			}
			if d.err != nil {
				if c != nil {
					c.Close()
				}
				return d.err
			}
			if err != nil {
				return err
			}
			defer c.Close()
			if lr.note != "" {
				fmt.Fprintln(cmd.ErrOrStderr(), lr.note)
			}
			if lr.ok {
				if err := checkGroupLimits(cmd, lr.l, &plan.Spec); err != nil {
					return err
				}
				spec = plan.Spec
			}
			if spec.SeedsStored > 0 {
				// Large seed lists go to the job's frontier in the store,
				// never into the workflow's input.
				n, err := queueSeeds(cmd.Context(), g, tf, plan)
				if err != nil {
					return err
				}
				// A note, not data: stdout holds the job ID (-q) or the
				// JSON document (--output json) alone.
				fmt.Fprintf(cmd.ErrOrStderr(), "%d URLs queued in the job store (seeds from %s)\n", n, seedsFile)
			}
			if !secrets.Empty() {
				if err := storeSecrets(cmd.Context(), g, tf, &sf, id, secrets); err != nil {
					return err
				}
			}
			wid := workflows.JobWorkflowID(g.group, id)
			memo := map[string]any{"seeds": args, "follow": follow, "depth": depth, "max_pages": maxPages,
				"selectors": lf.fields}
			if seedsFile != "" {
				memo["seeds_file"], memo["seeds_stored"] = seedsFile, spec.SeedsStored
			}
			if len(spec.Sitemaps) > 0 {
				memo["sitemaps"] = spec.Sitemaps
			}
			run, err := c.ExecuteWorkflow(cmd.Context(), client.StartWorkflowOptions{
				ID: wid, TaskQueue: workflows.JobQueue(g.group), WorkflowTaskTimeout: workflows.JobTaskTimeout,
				WorkflowIDReusePolicy:                    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
				WorkflowExecutionErrorWhenAlreadyStarted: true,
				TypedSearchAttributes: temporal.NewSearchAttributes(workflows.AttrCluster.ValueSet(g.group),
					workflows.AttrJob.ValueSet(id), workflows.AttrRole.ValueSet("job")),
				Memo: memo,
			}, workflows.CrawlJob, workflows.JobInput{Spec: spec})
			if err != nil {
				var exists *serviceerror.WorkflowExecutionAlreadyStarted
				if errors.As(err, &exists) {
					return usage("job %q exists already: choose another --id", id)
				}
				return fmt.Errorf("submit job: %w", err)
			}
			co.stats = func(w io.Writer) { printReport(cmd.Context(), w, g, tf, id) }
			co.growing, co.maxPages = jobGrows(spec), spec.MaxPages
			return co.report(cmd, c, submitted{ID: id, WorkflowID: wid, RunID: run.GetRunID(), WebUI: tf.link(wid)}, wait, live)
		},
	}
	f := cmd.Flags()
	sf.add(f)
	f.StringVar(&id, "id", "", "job ID (default: generated)")
	f.StringVar(&crawlerName, "crawler", "", "the crawler that runs the job's pages: a user crawler a worker binary of the group carries (NAME or NAME@VERSION; see `baton cluster`), default the built-in one")
	f.StringArrayVar(&sets, "set", nil, "an option of the user crawler, key=value (repeatable; checked against the options the workers advertise)")
	f.StringArrayVar(&labels, "label", nil, "NAME=REGEX: pages whose normalised URL matches REGEX get label NAME (repeatable, the first match wins; "+
		"recorded with each page; see --select NAME:field); NAME alone: the label of the seeds (which handler of a user crawler gets them)")
	f.StringArrayVar(&selects, "select", nil, "extract a field: name=SELECTOR (repeatable); SELECTOR is CSS (h1.title) for the text, "+
		"CSS@attr (a.next@href) for an attribute, xpath:EXPR (xpath://a/@href), or json:PATH on JSON responses (json:items.#.name); "+
		"LABEL:name=SELECTOR extracts it from the pages of --label LABEL only")
	f.StringArrayVar(&followAllow, "follow-allow", nil, "follow only links whose normalised URL matches this regexp (repeatable: any of them)")
	f.StringArrayVar(&followDeny, "follow-deny", nil, "never follow links whose normalised URL matches this regexp (repeatable; wins over --follow-allow)")
	f.StringArrayVar(&links, "links", nil, "with --follow: json:PATH, a GJSON path whose strings in JSON responses are links to follow (repeatable; json:items.#.url)")
	f.StringVar(&userAgent, "user-agent", def.UserAgent, "User-Agent of every request (robots.txt groups are matched against it)")
	f.StringArrayVar(&headers, "header", nil, "header sent with every request: 'Name: value' (repeatable)")
	f.StringVar(&seedsFile, "seeds-file", "", "read more seed URLs from FILE, one per line ('#' comments; - for stdin); they go to the job store, not the workflow")
	f.StringArrayVar(&sitemaps, "sitemap", nil, "crawl the pages a sitemap or sitemap index lists (URL, repeatable); 'robots' reads the Sitemap: lines of the seeds' robots.txt")
	f.StringVar(&proxy, "proxy", "", "proxy of every request of this job: http://, https:// or socks5://host:port, its user:password in $BATON_PROXY_CREDENTIALS (default: $HTTP_PROXY/$HTTPS_PROXY)")
	f.BoolVar(&storeBodies, "store-bodies", false, "keep every response body, compressed, in the job store (for reprocessing)")
	f.StringVar(&bodiesDir, "bodies-dir", "", "keep every response body, compressed, as files under this directory of each Runner's machine")
	f.BoolVar(&follow, "follow", false, "follow links within the allowed domains")
	f.IntVar(&depth, "depth", 2, "with --follow: link depth limit (seeds are depth 0); with --crawler: none unless given")
	f.IntVar(&maxPages, "max-pages", 1000, "most pages in the job (0: no limit)")
	f.StringArrayVar(&domains, "allow-domain", nil, "domain links may stay within (repeatable; default: the seeds' hosts)")
	f.BoolVar(&ignoreRobots, "ignore-robots", false, "do not obey robots.txt")
	f.BoolVar(&denyPrivate, "deny-private", false, "refuse private, loopback and link-local addresses for every request of the job but the seed and sitemap URLs typed as IP addresses (their redirects, sitemap entries, robots.txt and links included; a typed host name is guarded too)")
	f.BoolVar(&keepTracking, "keep-tracking-params", false, "keep tracking parameters (utm_*, fbclid, gclid, ...) in seeds and links; by default they are removed")
	f.DurationVar(&delay, "delay", def.Delay, "least delay between requests to one domain")
	f.IntVar(&parallelism, "parallelism", def.Parallelism, "most concurrent requests to one domain")
	f.IntVar(&retries, "retries", def.Retries, "retries of transient failures (timeouts, 429, 5xx)")
	f.DurationVar(&timeout, "timeout", def.Timeout, "time limit of one request")
	f.Int64Var(&maxBody, "max-body", def.MaxBodyBytes, "largest body read, in bytes")
	f.IntVar(&batch, "batch-size", 0, "most URLs in one batch, a Runner's lease on the job (it starts small and grows as the Runner pulls work; then the job hands out the next); 0: a lease lasts while the frontier has work")
	f.StringArrayVar(&cookies, "cookie", nil, "cookie name=value sent with every request (repeatable)")
	f.StringArrayVar(&authz, "authorization", nil, "authorization: Bearer=TOKEN, Basic=B64 or Header=value (repeatable)")
	f.StringVar(&profile, "timers", "default", "timer profile (default or fast)")
	_ = f.MarkDeprecated("timers", "the job uses the group's timer profile, as its workers are configured")
	f.BoolVar(&wait, "wait", false, "wait for the job, show a live progress bar (on stderr), then its stats; exit code 4 if it ends cancelled or failed")
	co = addCrawlOutputFlags(cmd)
	return cmd
}

// jobGrows reports whether a job may find more URLs than it has seen:
// it follows links, reads sitemaps or runs a user crawler's handlers
// (which enqueue links).
func jobGrows(spec jobs.Spec) bool {
	return spec.Options.Follow || len(spec.Sitemaps) > 0 || spec.Crawler != ""
}

// parseHeaders reads --header 'Name: value' pairs.
func parseHeaders(hs []string) (map[string]string, error) {
	out := map[string]string{}
	for i, h := range hs {
		k, v, ok := strings.Cut(h, ":")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, usage("--header #%d: want 'Name: value' (not shown: it may hold a secret)", i+1)
		}
		out[k] = strings.TrimSpace(v)
	}
	return out, nil
}

// queueSeeds creates the job in the group's store with every seed (the
// plan's Queue), so that JobStart finds it created (same spec: nothing
// more to do). It returns how many URLs were queued.
func queueSeeds(ctx context.Context, g *globals, tf *temporalFlags, plan jobs.Plan) (int, error) {
	js, err := tf.st.open(ctx, g)
	if err != nil {
		return 0, fmt.Errorf("--seeds-file writes the seeds to the workers' job store: %w", err)
	}
	defer js.Close()
	n, err := plan.Queue(ctx, js)
	switch {
	case errors.Is(err, jobs.ErrJobExists):
		return 0, usage("job %q exists already in %s: choose another --id", plan.Spec.ID, js.Identity())
	case err != nil:
		return 0, submitError(fmt.Errorf("store the seeds of job %s: %w", plan.Spec.ID, err))
	}
	return n, nil
}

// submitError is a submission's error in the CLI's words: a bad
// submission or spec is a usage error (exit 2) naming the flag at fault.
func submitError(err error) error {
	switch {
	case errors.Is(err, jobs.ErrBadSubmission):
		msg := strings.TrimPrefix(err.Error(), jobs.ErrBadSubmission.Error()+": ")
		for from, to := range map[string]string{"seeds file": "--seeds-file", "give the domains to stay within": "give the domains to stay within with --allow-domain",
			"bodies in the store and in a directory": "--store-bodies and --bodies-dir", "a seeds file or a sitemap": "--seeds-file or --sitemap"} {
			msg = strings.Replace(msg, from, to, 1)
		}
		return usage("%s", msg)
	case errors.Is(err, jobs.ErrBadSpec):
		return usage("invalid crawl: %v", specFlagError(err))
	}
	return err
}

// printReport prints the job's stats block from the store (a note if the
// store cannot be read from here).
func printReport(ctx context.Context, w io.Writer, g *globals, tf *temporalFlags, job string) {
	js, err := tf.st.open(ctx, g)
	if err != nil {
		fmt.Fprintf(os.Stderr, "note: no stats: the job store cannot be read from here (%v)\n", err)
		return
	}
	defer js.Close()
	rep, err := jobs.BuildReport(ctx, js, job)
	if err != nil {
		fmt.Fprintf(os.Stderr, "note: no stats: %v\n", err)
		return
	}
	fmt.Fprintln(w, "stats:")
	_ = rep.Write(w)
}

func queryProgress(ctx context.Context, c client.Client, wid string) (workflows.JobProgress, error) {
	var p workflows.JobProgress
	v, err := c.QueryWorkflow(ctx, wid, "", workflows.QueryProgress)
	if err != nil {
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return p, exitcode.With(exitcode.NotFound, fmt.Errorf("no job with workflow ID %s", wid))
		}
		return p, err
	}
	return p, v.Get(&p)
}

// printSummary writes a finished job's outcome.
func printSummary(w io.Writer, p workflows.JobProgress) {
	d := p.FinishedAt.Sub(p.StartedAt)
	rate := 0.0
	if d > 0 {
		rate = float64(p.Stats.Recorded) / d.Seconds()
	}
	fmt.Fprintf(w, "job %s %s: %d pages (%d failed), %d batches, %d re-queued, in %v (%.1f pages/s)\n",
		p.ID, p.State, p.Stats.Recorded, p.Stats.Failed, p.Batches, p.Requeued, d.Round(time.Millisecond), rate)
	if p.FailedBatches > 0 {
		fmt.Fprintf(w, "%d batches failed; the last because: %s\n", p.FailedBatches, p.LastError)
	}
}
