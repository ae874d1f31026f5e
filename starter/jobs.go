package main

import (
	"context"
	"crypto/rand"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"

	"github.com/batoncrawl/baton/activities"
	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/jobstore"
	"github.com/batoncrawl/baton/roles"
	"github.com/batoncrawl/baton/worker/security"
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
	address, namespace, uiURL, dataDir string
	sec                                security.Temporal
}

func (t *temporalFlags) add(cmd *cobra.Command) {
	f := cmd.PersistentFlags()
	f.StringVar(&t.address, "temporal-address", "127.0.0.1:7233", "Temporal frontend host:port")
	f.StringVar(&t.namespace, "temporal-namespace", "default", "Temporal namespace")
	f.StringVar(&t.uiURL, "ui-url", "http://127.0.0.1:8233", "Temporal Web UI base URL, for the links printed")
	f.StringVar(&t.dataDir, "data-dir", "baton-data", "the workers' data directory (job frontiers and results)")
	t.sec.AddFlags(f)
}

func (t *temporalFlags) dial(ctx context.Context) (client.Client, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	opts := client.Options{HostPort: t.address, Namespace: t.namespace,
		Logger: tlog.NewStructuredLogger(quietLogger())}
	if err := t.sec.Apply(&opts); err != nil {
		return nil, usageError{err}
	}
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("connect to Temporal at %s: %w (is the stack up? 'make stack-up')", t.address, err)
	}
	return c, nil
}

func (t *temporalFlags) link(wid string) string {
	return fmt.Sprintf("%s/namespaces/%s/workflows/%s", strings.TrimRight(t.uiURL, "/"), t.namespace, url.PathEscape(wid))
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
			spec := activities.JobSpec{ID: id, Group: g.group, Seeds: args, Options: opts, MaxPages: maxPages,
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
			printSummary(out, p, tf.dataDir)
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
	f.DurationVar(&delay, "delay", def.Delay, "least delay between requests to one domain")
	f.IntVar(&parallelism, "parallelism", def.Parallelism, "most concurrent requests to one domain")
	f.IntVar(&retries, "retries", def.Retries, "retries of transient failures (timeouts, 429, 5xx)")
	f.DurationVar(&timeout, "timeout", def.Timeout, "time limit of one request")
	f.Int64Var(&maxBody, "max-body", def.MaxBodyBytes, "largest body read, in bytes")
	f.IntVar(&batch, "batch-size", 50, "URLs per batch given to a Runner (fewer at the start and the end of a crawl, to keep every Runner busy)")
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

func printSummary(w io.Writer, p workflows.JobProgress, dataDir string) {
	d := p.FinishedAt.Sub(p.StartedAt)
	rate := 0.0
	if d > 0 {
		rate = float64(p.Stats.Recorded) / d.Seconds()
	}
	fmt.Fprintf(w, "job %s %s: %d pages (%d failed), %d batches, %d re-queued, in %v (%.1f pages/s)\n",
		p.ID, p.State, p.Stats.Recorded, p.Stats.Failed, p.Batches, p.Requeued, d.Round(time.Millisecond), rate)
	fmt.Fprintf(w, "results: %s/%s/results.jsonl (baton results %s)\n", dataDir, p.ID, p.ID)
}

func jobCmds(g *globals, tf *temporalFlags) []*cobra.Command {
	jobs := &cobra.Command{
		Use:   "jobs",
		Short: "List the group's crawl jobs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := tf.dial(cmd.Context())
			if err != nil {
				return err
			}
			defer c.Close()
			resp, err := c.ListWorkflow(cmd.Context(), &workflowservice.ListWorkflowExecutionsRequest{
				Query: fmt.Sprintf("WorkflowType = 'CrawlJob' AND BatonCluster = '%s'", g.group), PageSize: 100})
			if err != nil {
				return fmt.Errorf("list jobs: %w", err)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "JOB\tSTATUS\tSTARTED\tWORKFLOW")
			for _, e := range resp.Executions {
				id := strings.TrimPrefix(e.Execution.WorkflowId, workflows.JobWorkflowID(g.group, ""))
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", id, strings.ToLower(e.Status.String()),
					e.StartTime.AsTime().Format(time.RFC3339), e.Execution.WorkflowId)
			}
			return tw.Flush()
		},
	}
	status := &cobra.Command{
		Use:   "status JOB",
		Short: "Show a job's progress",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := tf.dial(cmd.Context())
			if err != nil {
				return err
			}
			defer c.Close()
			wid := workflows.JobWorkflowID(g.group, args[0])
			p, err := queryProgress(cmd.Context(), c, wid)
			if err != nil {
				return err
			}
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			if err := enc.Encode(p); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Web UI: %s\n", tf.link(wid))
			return nil
		},
	}
	signal := func(name, short string) *cobra.Command {
		return &cobra.Command{
			Use:   name + " JOB",
			Short: short,
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				c, err := tf.dial(cmd.Context())
				if err != nil {
					return err
				}
				defer c.Close()
				err = c.SignalWorkflow(cmd.Context(), workflows.JobWorkflowID(g.group, args[0]), "", name, nil)
				var nf *serviceerror.NotFound
				if errors.As(err, &nf) {
					return exitError{exitNotFound, fmt.Errorf("no running job %q in group %s", args[0], g.group)}
				}
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s sent to job %s\n", name, args[0])
				return nil
			},
		}
	}
	var format, output string
	results := &cobra.Command{
		Use:   "results JOB",
		Short: "Print a job's results (JSONL or CSV) from the data directory",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "jsonl" && format != "csv" {
				return usage("--format %q: want jsonl or csv", format)
			}
			js, err := jobstore.Open(tf.dataDir)
			if err != nil {
				return err
			}
			if err := jobstore.ValidID(args[0]); err != nil {
				return usage("%v", err)
			}
			var meta json.RawMessage
			if err := js.Meta(args[0], &meta); err != nil {
				if errors.Is(err, jobstore.ErrNoJob) {
					return exitError{exitNotFound, fmt.Errorf("%w in data directory %s (set --data-dir to the workers' one)", err, tf.dataDir)}
				}
				return err
			}
			var w io.Writer = cmd.OutOrStdout()
			if output != "" && output != "-" {
				f, err := os.Create(output)
				if err != nil {
					return err
				}
				defer f.Close()
				w = f
			}
			return writeResults(w, js.ResultsPath(args[0]), format)
		},
	}
	results.Flags().StringVar(&format, "format", "jsonl", "jsonl or csv")
	results.Flags().StringVarP(&output, "output", "o", "", "write to this file instead of stdout")
	return []*cobra.Command{jobs, status, signal("pause", "Pause a job (Runners finish their batches; no new ones)"),
		signal("resume", "Resume a paused job"), signal("cancel", "Cancel a job (in-flight batches finish, nothing new starts)"), results}
}

func writeResults(w io.Writer, path, format string) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil // no page yet
	}
	if err != nil {
		return err
	}
	defer f.Close()
	if format == "jsonl" {
		_, err := io.Copy(w, f)
		return err
	}
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"url", "final_url", "status_code", "content_type", "bytes", "duration_ms", "depth", "title", "fields", "links", "error", "runner"})
	dec := json.NewDecoder(f)
	for {
		var p activities.PageRecord
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return fmt.Errorf("results %s: %w", path, err)
		}
		fields, _ := json.Marshal(p.Fields)
		_ = cw.Write([]string{p.URL, p.FinalURL, strconv.Itoa(p.StatusCode), p.ContentType, strconv.FormatInt(p.Bytes, 10),
			strconv.FormatInt(p.DurationMS, 10), strconv.Itoa(p.Depth), p.Title, string(fields), strconv.Itoa(len(p.Links)), p.Error, p.Runner})
	}
	cw.Flush()
	return cw.Error()
}
