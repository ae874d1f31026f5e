package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/batoncrawl/baton/activities/connect/security"
	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/activities/jobs/sqlstore"
	"github.com/batoncrawl/baton/activities/metadata"
	"github.com/batoncrawl/baton/workflows"
)

// storeFlags choose the job store the CLI reads results and counters
// from: the workers' one (SQLite under --data-dir, or PostgreSQL).
type storeFlags struct {
	store, dataDir string
	sec            security.Store
}

func (s *storeFlags) add(f *pflag.FlagSet) {
	f.StringVar(&s.dataDir, "data-dir", "baton-data", "the workers' data directory (their SQLite job store), when --store is empty")
	f.StringVar(&s.store, "store", "", "the workers' job store: empty for SQLite under --data-dir, or postgres://user@host:port/database")
	s.sec.AddFlags(f)
}

// open opens the store without creating anything, and checks that it is
// the group's (when ZooKeeper answers quickly; from a machine that reaches
// only the store, the check is skipped with a note).
func (s *storeFlags) open(ctx context.Context, g *globals) (*sqlstore.Store, error) {
	pw, err := s.sec.Password()
	if err != nil {
		return nil, usageError{err}
	}
	cfg := sqlstore.Config{Store: s.store, DataDir: s.dataDir, Password: pw, Existing: true}
	if err := cfg.Validate(); err != nil {
		return nil, usageError{err}
	}
	octx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	js, err := sqlstore.Open(octx, cfg)
	if err != nil {
		return nil, err
	}
	if err := s.checkGroup(ctx, g, js.Identity()); err != nil {
		js.Close()
		return nil, err
	}
	return js, nil
}

func (s *storeFlags) checkGroup(ctx context.Context, g *globals, id jobs.Identity) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	c, closeZK, err := g.dial(ctx)
	if err != nil {
		fmt.Fprintf(os.Stderr, "note: ZooKeeper did not answer (%v): not checking that %s is group %s's store\n", err, id, g.group)
		return nil
	}
	defer closeZK()
	p := jobs.StorePath(g.zk.Root, g.group)
	data, _, err := c.Store.Get(ctx, p)
	if errors.Is(err, metadata.ErrNotFound) {
		return nil // the group has not formed with a store yet
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "note: could not read %s (%v): not checking the store\n", p, err)
		return nil
	}
	return jobs.CheckGroup(g.group, p, data, id)
}

func notFound(js *sqlstore.Store, job string, err error) error {
	if errors.Is(err, jobs.ErrNoJob) {
		return exitError{exitNotFound, fmt.Errorf("no job %q in %s (set --store or --data-dir to the workers' store)", job, js.Identity())}
	}
	return err
}

func jobCmds(g *globals, tf *temporalFlags) []*cobra.Command {
	list := &cobra.Command{
		Use:   "jobs",
		Short: "List the group's crawl jobs (from the job store; their workflow status when Temporal answers)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			js, err := tf.st.open(cmd.Context(), g)
			if err != nil {
				return err
			}
			defer js.Close()
			all, err := js.Jobs(cmd.Context())
			if err != nil {
				return err
			}
			status := workflowStatuses(cmd.Context(), tf, g.group)
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "JOB\tSTATUS\tCREATED\tRECORDED\tFAILED\tQUEUED\tSEEN")
			for _, j := range all {
				if j.Group != g.group {
					continue
				}
				st, ok := status[j.ID]
				if !ok {
					st = "-"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\n", j.ID, st, j.Created.Format(time.RFC3339),
					j.Stats.Recorded, j.Stats.Failed, j.Stats.Queued, j.Stats.Seen)
			}
			return tw.Flush()
		},
	}
	status := &cobra.Command{
		Use:   "status JOB",
		Short: "Show a job's progress (JSON on stdout); a finished job answers without any worker running",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := jobs.ValidID(args[0]); err != nil {
				return usage("%v", err)
			}
			p, err := jobStatus(cmd.Context(), g, tf, args[0])
			if err != nil {
				return err
			}
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			if err := enc.Encode(p); err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "Web UI: %s\n", tf.link(workflows.JobWorkflowID(g.group, args[0])))
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
		Short: "Export a job's results from the job store (JSONL or CSV), from any machine that reaches it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "jsonl" && format != "csv" {
				return usage("--format %q: want jsonl or csv", format)
			}
			if err := jobs.ValidID(args[0]); err != nil {
				return usage("%v", err)
			}
			js, err := tf.st.open(cmd.Context(), g)
			if err != nil {
				return err
			}
			defer js.Close()
			if _, err := js.Spec(cmd.Context(), args[0]); err != nil {
				return notFound(js, args[0], err)
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
			return writeResults(cmd.Context(), w, js, args[0], format)
		},
	}
	results.Flags().StringVar(&format, "format", "jsonl", "jsonl or csv")
	results.Flags().StringVarP(&output, "output", "o", "", "write to this file instead of stdout")
	return []*cobra.Command{list, status, signal("pause", "Pause a job (Runners finish their batches; no new ones)"),
		signal("resume", "Resume a paused job"), signal("cancel", "Cancel a job (in-flight batches finish, nothing new starts)"), results}
}

// workflowStatuses maps job IDs to their workflow status, if Temporal
// answers within a few seconds (else an empty map).
func workflowStatuses(ctx context.Context, tf *temporalFlags, group string) map[string]string {
	out := map[string]string{}
	ctx, cancel := context.WithTimeout(ctx, 4*time.Second)
	defer cancel()
	c, err := tf.dial(ctx)
	if err != nil {
		fmt.Fprintf(os.Stderr, "note: Temporal did not answer: job statuses unknown (%v)\n", err)
		return out
	}
	defer c.Close()
	resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
		Query: fmt.Sprintf("WorkflowType = 'CrawlJob' AND BatonCluster = '%s'", group), PageSize: 1000})
	if err != nil {
		fmt.Fprintf(os.Stderr, "note: could not list job workflows: %v\n", err)
		return out
	}
	for _, e := range resp.Executions {
		id := strings.TrimPrefix(e.Execution.WorkflowId, workflows.JobWorkflowID(group, ""))
		if _, ok := out[id]; !ok { // newest first
			out[id] = strings.ToLower(e.Status.String())
		}
	}
	return out
}

// jobStatus reads a job's progress: a finished job's result from its
// workflow history (no worker needed), a running job's progress query
// (a worker answers), else the counters from the job store with the state
// the workflow's memo last recorded.
func jobStatus(ctx context.Context, g *globals, tf *temporalFlags, job string) (workflows.JobProgress, error) {
	wid := workflows.JobWorkflowID(g.group, job)
	p := workflows.JobProgress{ID: job}
	var temporalErr error
	if c, err := tf.dial(ctx); err != nil {
		temporalErr = err
	} else {
		defer c.Close()
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		desc, err := c.DescribeWorkflowExecution(dctx, wid, "")
		cancel()
		var nf *serviceerror.NotFound
		switch {
		case errors.As(err, &nf):
			temporalErr = fmt.Errorf("no job workflow %s", wid)
		case err != nil:
			temporalErr = err
		case desc.WorkflowExecutionInfo.Status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
			gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err := c.GetWorkflow(gctx, wid, "").Get(gctx, &p)
			cancel()
			if err == nil {
				return p, nil
			}
			p.State = strings.ToLower(desc.WorkflowExecutionInfo.Status.String())
			temporalErr = fmt.Errorf("workflow %s ended %s: %w", wid, p.State, err)
		default:
			qctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			q, err := queryProgress(qctx, c, wid)
			cancel()
			if err == nil {
				return q, nil
			}
			temporalErr = fmt.Errorf("no worker answered the progress query (%v)", err)
			if f, ok := desc.WorkflowExecutionInfo.GetMemo().GetFields()["state"]; ok {
				var s string
				if json.Unmarshal(f.GetData(), &s) == nil {
					p.State = s
				}
			}
			if p.State == "" {
				p.State = workflows.JobRunning
			}
		}
	}
	js, err := tf.st.open(ctx, g)
	if err != nil {
		return p, fmt.Errorf("%v; and the job store: %w", temporalErr, err)
	}
	defer js.Close()
	st, err := js.Stats(ctx, job)
	if err != nil {
		if errors.Is(err, jobs.ErrNoJob) {
			return p, exitError{exitNotFound, fmt.Errorf("no job %q: %v; not in %s either", job, temporalErr, js.Identity())}
		}
		return p, err
	}
	p.Stats = st
	if p.State == "" {
		p.State = "unknown"
	}
	fmt.Fprintf(os.Stderr, "note: %v; counters from %s\n", temporalErr, js.Identity())
	return p, nil
}

func writeResults(ctx context.Context, w io.Writer, js jobs.Store, job, format string) error {
	if format == "jsonl" {
		enc := json.NewEncoder(w)
		return js.Results(ctx, job, func(p jobs.PageRecord) error { return enc.Encode(p) })
	}
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"url", "final_url", "status_code", "content_type", "bytes", "duration_ms", "depth", "title", "fields", "links", "error", "runner"})
	err := js.Results(ctx, job, func(p jobs.PageRecord) error {
		fields, _ := json.Marshal(p.Fields)
		return cw.Write([]string{p.URL, p.FinalURL, strconv.Itoa(p.StatusCode), p.ContentType, strconv.FormatInt(p.Bytes, 10),
			strconv.FormatInt(p.DurationMS, 10), strconv.Itoa(p.Depth), p.Title, string(fields), strconv.Itoa(len(p.Links)), p.Error, p.Runner})
	})
	cw.Flush() // the pages read before an error are written
	if err != nil {
		return err
	}
	return cw.Error()
}
