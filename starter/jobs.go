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

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/batoncrawl/baton/activities/connect"
	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/roles"
	"github.com/batoncrawl/baton/workflows"
)

// Exit codes beyond 0 (success), 1 (failure) and 2 (bad usage or input).
const (
	exitNotFound  = 3 // the job does not exist
	exitJobFailed = 4 // --wait: the job ended cancelled or failed
)

type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string { return e.err.Error() }
func (e exitError) Unwrap() error { return e.err }

type temporalFlags struct {
	conn  connect.Temporal
	uiURL string
	st    storeFlags
}

func (t *temporalFlags) add(cmd *cobra.Command) {
	f := cmd.PersistentFlags()
	t.conn.AddFlags(f)
	f.StringVar(&t.uiURL, "ui-url", "http://127.0.0.1:8233", "Temporal Web UI base URL, for the links printed")
	t.st.add(f)
}

func (t *temporalFlags) dial(ctx context.Context) (client.Client, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	opts, err := t.conn.Options(quietLogger())
	if err != nil {
		return nil, usageError{err}
	}
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("connect to Temporal at %s: %w (is the stack up? 'make stack-up')", t.conn.Address, err)
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
		denyPrivate, keepTracking  bool
		depth, maxPages, batch     int
		parallelism, retries       int
		delay, timeout             time.Duration
		maxBody                    int64
	)
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
			opts.AllowedDomains, opts.KeepTrackingParams = domains, keepTracking
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
				return usage("invalid crawl: %v", err)
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
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "job %s submitted\n  workflow %s (run %s)\n  Web UI   %s\n", id, wid, run.GetRunID(), tf.link(wid))
			if !wait {
				return nil
			}
			p, err := waitJob(cmd.Context(), c, wid, os.Stderr)
			if err != nil {
				return err
			}
			printSummary(out, p)
			if p.State != workflows.JobCompleted {
				return exitError{exitJobFailed, fmt.Errorf("job %s ended %s", id, p.State)}
			}
			return nil
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
	f.BoolVar(&keepTracking, "keep-tracking-params", false, "keep tracking parameters (utm_*, fbclid, gclid, ...) in seeds and links; by default they are removed")
	f.DurationVar(&delay, "delay", def.Delay, "least delay between requests to one domain")
	f.IntVar(&parallelism, "parallelism", def.Parallelism, "most concurrent requests to one domain")
	f.IntVar(&retries, "retries", def.Retries, "retries of transient failures (timeouts, 429, 5xx)")
	f.DurationVar(&timeout, "timeout", def.Timeout, "time limit of one request")
	f.Int64Var(&maxBody, "max-body", def.MaxBodyBytes, "largest body read, in bytes")
	f.IntVar(&batch, "batch-size", 2000, "most URLs in one batch (a Runner's lease on the job: it starts small and grows as the Runner pulls work; then the job hands out the next)")
	f.StringArrayVar(&cookies, "cookie", nil, "cookie name=value sent with every request (repeatable)")
	f.StringArrayVar(&authz, "authorization", nil, "authorization: Bearer=TOKEN, Basic=B64 or Header=value (repeatable)")
	f.StringVar(&profile, "timers", "default", "timer profile of the cluster (default or fast), for dead-runner re-assignment")
	f.BoolVar(&wait, "wait", false, "wait for the job and show a live progress bar")
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
			return p, exitError{exitNotFound, fmt.Errorf("no job with workflow ID %s", wid)}
		}
		return p, err
	}
	return p, v.Get(&p)
}

// waitJob shows a progress bar until the job ends.
func waitJob(ctx context.Context, c client.Client, wid string, w io.Writer) (workflows.JobProgress, error) {
	bar := progressbar.NewOptions(-1, progressbar.OptionSetWriter(w), progressbar.OptionSetDescription("crawling"),
		progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionSetItsString("pages"),
		progressbar.OptionThrottle(200*time.Millisecond), progressbar.OptionClearOnFinish())
	run := c.GetWorkflow(ctx, wid, "")
	done := make(chan error, 1)
	var final workflows.JobProgress
	go func() { done <- run.Get(ctx, &final) }()
	tick := time.NewTicker(300 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			_ = bar.Finish()
			fmt.Fprintln(w)
			if err != nil {
				return final, fmt.Errorf("job workflow failed: %w", err)
			}
			return final, nil
		case <-tick.C:
			if p, err := queryProgress(ctx, c, wid); err == nil {
				bar.ChangeMax(p.Stats.Seen)
				_ = bar.Set(p.Stats.Recorded)
				bar.Describe(fmt.Sprintf("%s: done %d, failed %d, queued %d, in flight %d batches",
					p.State, p.Stats.Recorded, p.Stats.Failed, p.Stats.Queued, len(p.InFlight)))
			}
		case <-ctx.Done():
			return final, ctx.Err()
		}
	}
}

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
	fmt.Fprintf(w, "results: baton results %s [--format csv]\n", p.ID)
}
