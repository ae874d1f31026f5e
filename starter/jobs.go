package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
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
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return nil, usage("--%s %q: want name=value", flag, p)
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
		authz                      []string
		follow, ignoreRobots, wait bool
		denyPrivate                bool
		depth, maxPages, batch     int
		parallelism, retries       int
		delay, timeout             time.Duration
		maxBody                    int64
	)
	var co *crawlOutput // --output, -q, --wait-for-runners: crawlwait.go
	def := crawl.DefaultOptions()
	cmd := &cobra.Command{
		Use:   "crawl SEED_URL...",
		Short: "Submit a crawl job to the cluster (it spreads the work over idle Runners)",
		Example: `  baton crawl http://127.0.0.1:8000/ --follow --depth 3 --select title=h1 --select price=.price --wait
  baton crawl http://127.0.0.1:8000/a http://127.0.0.1:8000/b --id my-job`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if id == "" {
				id = newJobID()
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
			timers := roles.DefaultTimers()
			if profile == "fast" {
				timers = roles.FastTimers()
			} else if profile != "default" {
				return usage("--timers %q: want default or fast", profile)
			}
			opts := def
			opts.Selectors, opts.Follow, opts.MaxDepth = fields, follow, depth
			opts.IgnoreRobots, opts.Delay, opts.Parallelism, opts.Retries = ignoreRobots, delay, parallelism, retries
			opts.Timeout, opts.MaxBodyBytes, opts.DenyPrivate = timeout, maxBody, denyPrivate
			opts.AllowedDomains = domains
			if len(domains) == 0 {
				for _, s := range args {
					if u, err := url.Parse(s); err == nil && u.Hostname() != "" {
						opts.AllowedDomains = appendUnique(opts.AllowedDomains, u.Hostname())
					}
				}
			}
			spec := jobs.Spec{ID: id, Group: g.group, Seeds: args, Options: opts, MaxPages: maxPages,
				BatchSize: batch, Cookie: ck, Authorization: az, Timers: timers}
			if err := spec.Validate(); err != nil {
				return usage("invalid crawl: %v", specFlagError(err))
			}
			if err := co.check(cmd, wait); err != nil {
				return err
			}
			var live *runnerCheck
			if wait {
				// Before anything is submitted: the Runners are watched
				// in ZooKeeper while waiting.
				if live, err = co.runners(cmd.Context(), g, id); err != nil {
					return err
				}
				defer live.Close()
			}
			c, err := tf.dial(cmd.Context())
			if err != nil {
				return err
			}
			defer c.Close()
			wid := workflows.JobWorkflowID(g.group, id)
			run, err := c.ExecuteWorkflow(cmd.Context(), client.StartWorkflowOptions{
				ID: wid, TaskQueue: workflows.JobQueue(g.group),
				WorkflowIDReusePolicy:                    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
				WorkflowExecutionErrorWhenAlreadyStarted: true,
				TypedSearchAttributes: temporal.NewSearchAttributes(workflows.AttrCluster.ValueSet(g.group),
					workflows.AttrJob.ValueSet(id), workflows.AttrRole.ValueSet("job")),
				Memo: map[string]any{"seeds": args, "follow": follow, "depth": depth, "max_pages": maxPages,
					"selectors": fields},
			}, workflows.CrawlJob, workflows.JobInput{Spec: spec})
			if err != nil {
				var exists *serviceerror.WorkflowExecutionAlreadyStarted
				if errors.As(err, &exists) {
					return usage("job %q exists already: choose another --id", id)
				}
				return fmt.Errorf("submit job: %w", err)
			}
			return co.report(cmd, c, submitted{ID: id, WorkflowID: wid, RunID: run.GetRunID(), WebUI: tf.link(wid)}, wait, live)
		},
	}
	f := cmd.Flags()
	f.StringVar(&id, "id", "", "job ID (default: generated)")
	f.StringArrayVar(&selects, "select", nil, "extract a field: name=CSS selector (repeatable)")
	f.BoolVar(&follow, "follow", false, "follow links within the allowed domains")
	f.IntVar(&depth, "depth", 2, "with --follow: link depth limit (seeds are depth 0)")
	f.IntVar(&maxPages, "max-pages", 1000, "most pages in the job (0: no limit)")
	f.StringArrayVar(&domains, "allow-domain", nil, "domain links may stay within (repeatable; default: the seeds' hosts)")
	f.BoolVar(&ignoreRobots, "ignore-robots", false, "do not obey robots.txt")
	f.BoolVar(&denyPrivate, "deny-private", false, "refuse private, loopback and link-local addresses for followed links")
	f.DurationVar(&delay, "delay", def.Delay, "least delay between requests to one domain")
	f.IntVar(&parallelism, "parallelism", def.Parallelism, "most concurrent requests to one domain")
	f.IntVar(&retries, "retries", def.Retries, "retries of transient failures (timeouts, 429, 5xx)")
	f.DurationVar(&timeout, "timeout", def.Timeout, "time limit of one request")
	f.Int64Var(&maxBody, "max-body", def.MaxBodyBytes, "largest body read, in bytes")
	f.IntVar(&batch, "batch-size", 0, "most URLs in one batch, a Runner's lease on the job (it starts small and grows as the Runner pulls work; then the job hands out the next); 0: a lease lasts while the frontier has work")
	f.StringArrayVar(&cookies, "cookie", nil, "cookie name=value sent with every request (repeatable)")
	f.StringArrayVar(&authz, "authorization", nil, "authorization: Bearer=TOKEN, Basic=B64 or Header=value (repeatable)")
	f.StringVar(&profile, "timers", "default", "timer profile of the cluster (default or fast), for dead-runner re-assignment")
	f.BoolVar(&wait, "wait", false, "wait for the job and show a live progress bar (on stderr); exit code 4 if it ends cancelled or failed")
	co = addCrawlOutputFlags(cmd)
	return cmd
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
