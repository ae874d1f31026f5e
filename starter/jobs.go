package main

import (
	"bufio"
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

	"github.com/batoncrawl/baton/activities/connect"
	"github.com/batoncrawl/baton/activities/connect/exitcode"
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
  baton crawl http://127.0.0.1:8000/ --sitemap robots --store-bodies`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if id == "" {
				id = newJobID()
			}
			if len(args) == 0 && seedsFile == "" && len(sitemaps) == 0 {
				return usage("no seeds: give seed URLs, --seeds-file or --sitemap")
			}
			fields, err := parsePairs("select", selects)
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
			var file *seedFile
			if seedsFile != "" {
				if file, err = scanSeedFile(seedsFile, cmd.InOrStdin()); err != nil {
					return err
				}
				defer file.close()
			}
			var maps []string
			robots := false
			for _, s := range sitemaps {
				if s == "robots" {
					robots = true
					continue
				}
				maps = appendUnique(maps, s)
			}
			var storedMaps []string
			if robots {
				for _, s := range args {
					if o := origin(s); o != "" {
						maps = appendUnique(maps, o+"/robots.txt")
					}
				}
				if file != nil {
					for _, o := range file.origins {
						storedMaps = append(storedMaps, o+"/robots.txt")
					}
				}
			}
			opts := def
			opts.Selectors, opts.Follow, opts.MaxDepth = fields, follow, depth
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
			if len(domains) == 0 {
				hosts := map[string]bool{}
				for _, list := range [][]string{args, maps} {
					for _, s := range list {
						if u, err := url.Parse(s); err == nil && u.Hostname() != "" && !hosts[u.Hostname()] {
							hosts[u.Hostname()] = true
							opts.AllowedDomains = append(opts.AllowedDomains, u.Hostname())
						}
					}
				}
				if file != nil {
					for _, h := range file.hosts {
						if !hosts[h] {
							hosts[h] = true
							opts.AllowedDomains = append(opts.AllowedDomains, h)
						}
					}
				}
				if len(opts.AllowedDomains) > maxDefaultDomains {
					return usage("the seeds are on %d hosts, more than the %d a job lists by default: give the domains to stay within with --allow-domain",
						len(opts.AllowedDomains), maxDefaultDomains)
				}
			}
			spec := jobs.Spec{ID: id, Group: g.group, Seeds: args, Options: opts, MaxPages: maxPages,
				BatchSize: batch, Cookie: ck, Authorization: az, Timers: timers, Sitemaps: maps,
				SeedsStored: len(storedMaps)}
			if file != nil {
				spec.SeedsStored += file.count
			}
			switch {
			case storeBodies && bodiesDir != "":
				return usage("--store-bodies and --bodies-dir: choose one")
			case storeBodies:
				spec.Bodies = jobs.BodiesStore
			case bodiesDir != "":
				spec.Bodies, spec.BodiesPath = jobs.BodiesDir, bodiesDir
			}
			if err := spec.Validate(); err != nil {
				return usage("invalid crawl: %v", specFlagError(err))
			}
			// Cookies, authorization, headers and the proxy's credentials
			// go sealed into the job store; the spec that travels (the
			// workflow's input, the jobs table) names them only.
			spec, secrets := jobs.SplitSecrets(spec)
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
			c, err := tf.dial(cmd.Context())
			d := <-zk
			if d.live != nil {
				live = d.live
				defer live.Close()
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
			out := cmd.OutOrStdout()
			if spec.SeedsStored > 0 {
				// Large seed lists go to the job's frontier in the store,
				// never into the workflow's input.
				n, err := storeSeeds(cmd.Context(), g, tf, spec, file, storedMaps)
				if err != nil {
					return err
				}
				fmt.Fprintf(out, "%d URLs queued in the job store (seeds from %s)\n", n, seedsFile)
			}
			if !secrets.Empty() {
				if err := storeSecrets(cmd.Context(), g, tf, &sf, id, secrets); err != nil {
					return err
				}
			}
			wid := workflows.JobWorkflowID(g.group, id)
			memo := map[string]any{"seeds": args, "follow": follow, "depth": depth, "max_pages": maxPages,
				"selectors": fields}
			if seedsFile != "" {
				memo["seeds_file"], memo["seeds_stored"] = seedsFile, spec.SeedsStored
			}
			if len(maps) > 0 {
				memo["sitemaps"] = maps
			}
			run, err := c.ExecuteWorkflow(cmd.Context(), client.StartWorkflowOptions{
				ID: wid, TaskQueue: workflows.JobQueue(g.group),
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
			return co.report(cmd, c, submitted{ID: id, WorkflowID: wid, RunID: run.GetRunID(), WebUI: tf.link(wid)}, wait, live)
		},
	}
	f := cmd.Flags()
	sf.add(f)
	f.StringVar(&id, "id", "", "job ID (default: generated)")
	f.StringArrayVar(&selects, "select", nil, "extract a field: name=SELECTOR (repeatable); SELECTOR is CSS (h1.title) for the text, "+
		"CSS@attr (a.next@href) for an attribute, xpath:EXPR (xpath://a/@href), or json:PATH on JSON responses (json:items.#.name)")
	f.StringVar(&userAgent, "user-agent", def.UserAgent, "User-Agent of every request (robots.txt groups are matched against it)")
	f.StringArrayVar(&headers, "header", nil, "header sent with every request: 'Name: value' (repeatable)")
	f.StringVar(&seedsFile, "seeds-file", "", "read more seed URLs from FILE, one per line ('#' comments; - for stdin); they go to the job store, not the workflow")
	f.StringArrayVar(&sitemaps, "sitemap", nil, "crawl the pages a sitemap or sitemap index lists (URL, repeatable); 'robots' reads the Sitemap: lines of the seeds' robots.txt")
	f.StringVar(&proxy, "proxy", "", "proxy of every request of this job: http://, https:// or socks5://host:port, its user:password in $BATON_PROXY_CREDENTIALS (default: $HTTP_PROXY/$HTTPS_PROXY)")
	f.BoolVar(&storeBodies, "store-bodies", false, "keep every response body, compressed, in the job store (for reprocessing)")
	f.StringVar(&bodiesDir, "bodies-dir", "", "keep every response body, compressed, as files under this directory of each Runner's machine")
	f.BoolVar(&follow, "follow", false, "follow links within the allowed domains")
	f.IntVar(&depth, "depth", 2, "with --follow: link depth limit (seeds are depth 0)")
	f.IntVar(&maxPages, "max-pages", 1000, "most pages in the job (0: no limit)")
	f.StringArrayVar(&domains, "allow-domain", nil, "domain links may stay within (repeatable; default: the seeds' hosts)")
	f.BoolVar(&ignoreRobots, "ignore-robots", false, "do not obey robots.txt")
	f.BoolVar(&denyPrivate, "deny-private", false, "refuse private, loopback and link-local addresses for every request of the job but the seed and sitemap URLs typed (their redirects, sitemap entries, robots.txt and links included)")
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

// maxDefaultDomains bounds the allowed domains a job gets from its seeds'
// hosts (they travel in the job's spec).
const maxDefaultDomains = 1000

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

// origin is scheme://host of a URL, or "".
func origin(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return ""
	}
	return strings.ToLower(u.Scheme) + "://" + u.Host
}

// maxBadSeeds is how many bad lines of a seed file are reported.
const maxBadSeeds = 10

// seedFile is a seed file checked whole (scanSeedFile) and read again,
// line by line, when its seeds go to the store: a million seeds are never
// in memory at once.
type seedFile struct {
	name    string // as given (- for stdin)
	path    string // the file to read again (stdin is spooled to a temporary file)
	spool   bool   // path is a temporary file to remove
	count   int    // URLs in it (a URL on several lines counts each time)
	hosts   []string
	hostSet map[string]bool
	origins []string // scheme://host of its URLs, each once, in order
}

func (sf *seedFile) close() {
	if sf != nil && sf.spool {
		os.Remove(sf.path)
	}
}

// each calls fn for every URL of the file, in order.
func (sf *seedFile) each(fn func(string) error) error {
	f, err := os.Open(sf.path)
	if err != nil {
		return usage("--seeds-file: %v", err)
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

// scanSeedFile checks a seed file (or stdin for "-"): one URL per line,
// blank lines and '#' comments skipped. Every bad line is reported with
// its line number (the first ten) and nothing is submitted.
func scanSeedFile(name string, stdin io.Reader) (*seedFile, error) {
	sf := &seedFile{name: name, path: name, hostSet: map[string]bool{}}
	var r io.Reader = stdin
	var spool *bufio.Writer
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, usage("--seeds-file: %v", err)
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
	fail := func(err error) (*seedFile, error) {
		sf.close()
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
		err := (roles.Request{URL: s}).Validate()
		if err == nil {
			_, err = crawl.NormalizeURL(s)
		}
		if err == nil {
			err = jobs.CheckURLLength(s)
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
		if u, err := url.Parse(s); err == nil && u.Hostname() != "" && !sf.hostSet[u.Hostname()] && len(sf.hosts) <= maxDefaultDomains {
			sf.hostSet[u.Hostname()] = true
			sf.hosts = append(sf.hosts, u.Hostname())
		}
		if o := origin(s); o != "" && !originSet[o] {
			originSet[o] = true
			sf.origins = append(sf.origins, o)
		}
	}
	if err := sc.Err(); err != nil {
		return fail(usage("--seeds-file %s line %d: %v", name, line+1, err))
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
		return fail(usage("--seeds-file %s: %d bad lines (nothing submitted):\n%s%s", name, nBad, strings.Join(bad, "\n"), more))
	}
	if sf.count == 0 {
		return fail(usage("--seeds-file %s: no URL in it", name))
	}
	return sf, nil
}

// storeSeeds creates the job in the group's store with every seed, so
// that JobStart finds it created (same spec: nothing more to do). It
// returns how many URLs were queued.
func storeSeeds(ctx context.Context, g *globals, tf *temporalFlags, spec jobs.Spec, file *seedFile, storedMaps []string) (int, error) {
	js, err := tf.st.open(ctx, g)
	if err != nil {
		return 0, fmt.Errorf("--seeds-file writes the seeds to the workers' job store: %w", err)
	}
	defer js.Close()
	// One normaliser for every seed, the job's, as JobStart's (so
	// --keep-tracking-params holds for a seed file too).
	seed := func(u string) (jobs.Entry, error) {
		n, err := spec.Options.NormalizeURL(u)
		if err != nil {
			return jobs.Entry{}, usage("seed %q: %v", u, err)
		}
		return jobs.Entry{URL: n}, nil
	}
	var entries []jobs.Entry
	for _, u := range spec.Seeds {
		e, err := seed(u)
		if err != nil {
			return 0, err
		}
		entries = append(entries, e)
	}
	for _, list := range [][]string{spec.Sitemaps, storedMaps} {
		for _, u := range list {
			n, err := crawl.NormalizeURL(u)
			if err != nil {
				return 0, usage("sitemap %q: %v", u, err)
			}
			entries = append(entries, jobs.Entry{URL: n, Depth: jobs.SitemapDepth})
		}
	}
	st, err := js.CreateJob(ctx, spec, entries)
	if errors.Is(err, jobs.ErrJobExists) {
		return 0, usage("job %q exists already in %s: choose another --id", spec.ID, js.Identity())
	}
	if err != nil {
		return 0, fmt.Errorf("store the seeds of job %s: %w", spec.ID, err)
	}
	seen := st.Seen
	if file == nil {
		return seen, nil
	}
	// The file's seeds, read again and queued in chunks: memory stays flat
	// however long the file.
	const chunk = 5000
	batch := make([]jobs.Entry, 0, chunk)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		n, err := js.AddSeeds(ctx, spec.ID, batch)
		if err != nil {
			return fmt.Errorf("store the seeds of job %s: %w", spec.ID, err)
		}
		seen += n
		batch = batch[:0]
		return nil
	}
	err = file.each(func(u string) error {
		e, err := seed(u)
		if err != nil {
			return err
		}
		if batch = append(batch, e); len(batch) == chunk {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return 0, err
	}
	if spec.MaxPages > 0 {
		seen = min(seen, spec.MaxPages)
	}
	return seen, nil
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

func appendUnique(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
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
