package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/batoncrawl/baton/activities/cmdline/exitcode"
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

// readStore is the job store as a command that only reads it holds it.
type readStore interface {
	jobs.ReaderStore
	io.Closer
}

// submitStore is the job store as a command that submits a job holds it:
// it writes the job's seeds or secrets, and reads the job back (the crawl
// command prints the job's stats when it ends).
type submitStore interface {
	jobs.SubmitterStore
	jobs.ReaderStore
	io.Closer
}

// openReader opens the store for a read command (see open).
func (s *storeFlags) openReader(ctx context.Context, g *globals) (readStore, error) {
	js, err := s.openWith(ctx, g, true)
	if err != nil {
		return nil, err // not a nil *sqlstore.Store in a non-nil interface
	}
	return js, nil
}

// open opens the store without creating anything, and checks that it is
// the group's (when ZooKeeper answers quickly; from a machine that reaches
// only the store, the check is skipped with a note).
func (s *storeFlags) open(ctx context.Context, g *globals) (submitStore, error) {
	js, err := s.openWith(ctx, g, true)
	if err != nil {
		return nil, err
	}
	return js, nil
}

// openWith opens the store; existing false sets up or upgrades its schema
// (baton store migrate). It is the one place the CLI holds the SQL type:
// the commands hold the interfaces above, or a schemaStore.
func (s *storeFlags) openWith(ctx context.Context, g *globals, existing bool) (*sqlstore.Store, error) {
	pw, err := s.sec.Password()
	if err != nil {
		return nil, exitcode.With(exitcode.Usage, err)
	}
	cfg := sqlstore.Config{Store: s.store, DataDir: s.dataDir, Password: pw, Existing: existing, MaxConns: 4}
	if err := cfg.Validate(); err != nil {
		return nil, usage("--%v", err)
	}
	octx, cancel := context.WithTimeout(ctx, g.connectTimeout)
	defer cancel()
	js, err := sqlstore.Open(octx, cfg)
	switch {
	case err == nil:
	case errors.Is(err, sqlstore.ErrNoSchema), errors.Is(err, fs.ErrNotExist):
		// The database answered but holds no store of this version (the
		// wrong database, or no worker of this version has opened it),
		// or there is none (read-only commands create nothing): bad
		// input, and ZooKeeper may say where the group's store is.
		return nil, exitcode.With(exitcode.Usage, fmt.Errorf("%w%s", err, s.groupStoreHint(ctx, g)))
	case errors.Is(err, context.DeadlineExceeded):
		return nil, exitcode.With(exitcode.Unavailable, fmt.Errorf("the job store did not answer within %v (%w); "+
			"check --store (BATON_STORE) and that the database is reachable from this machine", g.connectTimeout, err))
	default:
		return nil, err
	}
	if err := s.checkGroup(ctx, g, js.Identity()); err != nil {
		js.Close()
		return nil, err
	}
	return js, nil
}

func (s *storeFlags) checkGroup(ctx context.Context, g *globals, id jobs.Identity) error {
	p, data, dialErr, err := g.groupStoreZnode(ctx)
	if exitcode.Of(dialErr) == exitcode.Usage {
		return dialErr // a bad --zk-hosts or credentials
	}
	if dialErr != nil {
		fmt.Fprintf(os.Stderr, "note: ZooKeeper did not answer (%v): not checking that %s is group %s's store\n", dialErr, id, g.group)
		return nil
	}
	if errors.Is(err, metadata.ErrNotFound) {
		return nil // the group has not formed with a store yet
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "note: could not read %s (%v): not checking the store\n", p, err)
		return nil
	}
	if err := jobs.CheckGroup(g.group, p, data, id); err != nil {
		if errors.Is(err, jobs.ErrOtherStore) {
			return exitcode.With(exitcode.Usage, err) // a configuration error: the wrong --store/--data-dir
		}
		return err
	}
	return nil
}

// groupStoreHint says which store the group keeps its data in, as its
// workers recorded it in ZooKeeper (jobs.StorePath), for the error of a
// store not found: "" when ZooKeeper does not answer quickly or has none.
func (s *storeFlags) groupStoreHint(ctx context.Context, g *globals) string {
	p, data, dialErr, err := g.groupStoreZnode(ctx)
	if dialErr != nil {
		return ""
	}
	if errors.Is(err, metadata.ErrNotFound) {
		return fmt.Sprintf("; group %s has no store recorded in ZooKeeper (%s): has a worker of the group started?", g.group, p)
	}
	var id jobs.Identity
	if err != nil || json.Unmarshal(data, &id) != nil || id.ID == "" {
		return ""
	}
	flag := "--store postgres://USER@" + id.Location
	if id.Engine == "sqlite" {
		flag = "--data-dir " + filepath.Dir(id.Location) + " (on the workers' machine)"
	}
	return fmt.Sprintf("; group %s keeps its crawl data in %s (recorded in ZooKeeper at %s): give %s", g.group, id, p, flag)
}

func notFound(js jobs.ReaderStore, job string, err error) error {
	if errors.Is(err, jobs.ErrNoJob) {
		return exitcode.With(exitcode.NotFound, fmt.Errorf("no job %q in %s (set --store or --data-dir to the workers' store)", job, js.Identity()))
	}
	return err
}

func jobCmds(g *globals, tf *temporalFlags) []*cobra.Command {
	return append(append([]*cobra.Command{jobsCmd(g, tf), statusCmd(g, tf)}, controlCmds(g, tf)...), resultsCmd(g, tf), diffCmd(g, tf))
}

// resultsCmd exports a job's results, items, bodies or stats.
func resultsCmd(g *globals, tf *temporalFlags) *cobra.Command {
	var format, output, bodiesOut string
	var stats, csvRaw, items, follow, changedOnly bool
	results := &cobra.Command{
		Use:   "results JOB",
		Short: "Export a job's results from the job store (JSONL, CSV or Parquet), or its stats, from any machine that reaches it",
		Example: `  baton results my-job > pages.jsonl
  baton results my-job --format csv -o pages.csv        # one column per --select field
  baton results my-job --format parquet -o pages.parquet
  baton results my-job --stats                           # status codes, bytes, retries, refusals, duplicates
  baton results my-job --bodies-out bodies/              # the bodies kept by crawl --store-bodies
  baton results shop-job --items --format csv            # a user crawler's items, one row each
  baton results shop-job --items --follow                # stream items as they are recorded`,
		Args: oneArg("JOB", "the ID of the job (baton jobs lists them)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkResultsFlags(cmd, format, output, stats); err != nil {
				return err
			}
			if err := jobs.ValidID(args[0]); err != nil {
				return usage("%v", err)
			}
			toStdout := output == "" || output == "-"
			if format == formatParquet && toStdout && !stats && writesToTerminal(cmd.OutOrStdout()) {
				return usage("--format parquet is binary: give --output FILE (or redirect stdout)")
			}
			js, err := tf.st.openReader(cmd.Context(), g)
			if err != nil {
				return err
			}
			defer js.Close()
			spec, err := js.Spec(cmd.Context(), args[0])
			if follow && errors.Is(err, jobs.ErrNoJob) {
				// Followed from the moment of submission: the job's
				// workflow creates it in the store a moment later.
				spec, err = awaitJob(cmd, js, args[0], followStartWait)
			}
			if err != nil {
				return notFound(js, args[0], err)
			}
			if changedOnly {
				if items || stats || bodiesOut != "" || follow {
					return usage("--changed-only exports pages: not with --items, --stats, --bodies-out or --follow")
				}
				return writeTo(cmd.OutOrStdout(), output, func(w io.Writer) error {
					return writeChanged(cmd.Context(), w, js, spec, format)
				})
			}
			if bodiesOut != "" {
				n, err := exportBodies(cmd.Context(), js, spec, bodiesOut)
				if err != nil {
					return fmt.Errorf("export the bodies of job %s to %s: %w", args[0], bodiesOut, err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%d bodies written to %s (index.tsv lists them)\n", n, bodiesOut)
				if n == 0 && spec.Bodies != jobs.BodiesStore {
					fmt.Fprintf(cmd.ErrOrStderr(), "note: job %s did not keep its bodies in the store (--store-bodies)\n", args[0])
				}
				return nil
			}
			if follow && !items {
				return usage("--follow streams items: give --items")
			}
			if items {
				return exportItems(cmd, g, tf, js, args[0], format, output, csvRaw, follow)
			}
			if stats {
				rep, err := jobs.BuildReport(cmd.Context(), js, args[0])
				if err != nil {
					return err
				}
				return writeTo(cmd.OutOrStdout(), output, func(w io.Writer) error {
					if format == formatJSON {
						return writeJSON(w, jobStats{Job: args[0], Report: rep})
					}
					fmt.Fprintf(w, "job %s\n", args[0])
					return rep.Write(w)
				})
			}
			// To a FILE: written whole to a new file, then renamed over it:
			// an existing file is never truncated in place, and a symbolic
			// link at it is replaced, not followed.
			return writeTo(cmd.OutOrStdout(), output, func(w io.Writer) error {
				return writeResultsCSV(cmd.Context(), w, js, spec, format, csvRaw)
			})
		},
	}
	results.Flags().StringVar(&format, "format", formatJSONL, "jsonl (every field of every page), csv (one column per extracted field, several values joined by ' | ') or parquet; "+
		"with --stats: json for one JSON document (default: a text block)")
	results.Flags().StringVarP(&output, "output", "o", "", "write to this FILE instead of stdout (here -o/--output names a file: the format is --format)")
	results.Flags().BoolVar(&csvRaw, "csv-raw", false, "CSV: keep cells that start with =, +, -, @ as they are (by default they get a leading ' so a spreadsheet does not run them as formulas)")
	results.Flags().StringVar(&bodiesOut, "bodies-out", "", "write the response bodies the job kept in the store (crawl --store-bodies) to this directory instead, with an index.tsv")
	results.Flags().BoolVar(&items, "items", false, "export the items a user crawler pushed instead of the pages: one row per item with its stable ID, page URL, label and index (CSV/Parquet: a column per key of the items, typed in Parquet)")
	results.Flags().BoolVar(&follow, "follow", false, "with --items: stream the items as they are recorded (JSON lines) until the job ends or Ctrl-C")
	results.Flags().BoolVar(&changedOnly, "changed-only", false, "export only the pages new or changed since the job's baseline (a schedule's previous run), as JSON lines: see baton diff")
	results.Flags().BoolVar(&stats, "stats", false, "print the job's stats instead: pages by status code, bytes, retries, pages refused by robots.txt, duplicates")
	return results
}

// jobStats is a job's stats as `baton results --stats --format json`
// writes them: the job's ID and its report.
type jobStats struct {
	Job string `json:"job"`
	jobs.Report
}

// formatJSON is --format json: the stats of `results --stats` as one JSON
// document.
const formatJSON = "json"

// checkResultsFlags refuses the --format and --output of `baton results`
// that do not fit: a format name given to -o/--output (elsewhere in the
// CLI --output is the format; here it names the file, and
// `results --output json` would silently write a file named json), a
// format --stats has no form in, json for pages.
func checkResultsFlags(cmd *cobra.Command, format, output string, stats bool) error {
	switch output {
	case "json", "table", formatJSONL, formatCSV, formatParquet:
		hint := "--format jsonl (the default), csv or parquet"
		if stats {
			hint = "--stats --format json"
		}
		return usage("--output %s: in 'baton results', -o/--output names the FILE to write, not the format; for the format give %s "+
			"(to write a file named %s: -o ./%s)", output, hint, output, output)
	}
	if stats {
		if cmd.Flags().Changed("format") && format != formatJSON {
			return usage("--format %q with --stats: the stats are a text block, or one JSON document with --format json", format)
		}
		return nil
	}
	switch format {
	case formatJSONL, formatCSV, formatParquet:
		return nil
	case formatJSON:
		return usage("--format json is for --stats: the pages are JSON lines with --format jsonl (the default)")
	}
	return usage("--format %q: want jsonl, csv or parquet (with --stats: json)", format)
}

// writeTo writes with write to stdout, or whole to file output (a new
// file renamed over it: see createAtomic) when output is set and not -.
func writeTo(stdout io.Writer, output string, write func(io.Writer) error) error {
	if output == "" || output == "-" {
		return write(stdout)
	}
	f, err := createAtomic(output)
	if err != nil {
		return err
	}
	defer f.Abort()
	if err := write(f); err != nil {
		return err
	}
	return f.Commit()
}

// jobRow is a job as `baton jobs` lists it.
type jobRow struct {
	jobs.JobInfo
	// Status is its workflow's status ("running", "completed", ...; "-"
	// when Temporal did not answer or has no such workflow).
	Status string `json:"status"`
}

// printProgress writes a job's progress as a table.
func printProgress(w io.Writer, p workflows.JobProgress) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "JOB\t%s\n", p.ID)
	fmt.Fprintf(tw, "STATE\t%s\n", p.State)
	fmt.Fprintf(tw, "PAGES\t%d recorded, %d failed, %d queued, %d seen%s\n", p.Stats.Recorded, p.Stats.Failed, p.Stats.Queued, p.Stats.Seen, maxPagesNote(p))
	if p.Stats.Items > 0 {
		fmt.Fprintf(tw, "ITEMS\t%d recorded\n", p.Stats.Items)
	}
	if r := p.Stats.Render; r != (jobs.RenderStats{}) {
		fmt.Fprintf(tw, "RENDERED\t%s\n", r.Summary())
	}
	fmt.Fprintf(tw, "BATCHES\t%d done, %d in flight, %d re-queued, %d failed\n", p.Batches, len(p.InFlight), p.Requeued, p.FailedBatches)
	if !p.StartedAt.IsZero() {
		fmt.Fprintf(tw, "STARTED\t%s\n", p.StartedAt.UTC().Format(time.RFC3339))
	}
	if !p.FinishedAt.IsZero() {
		fmt.Fprintf(tw, "FINISHED\t%s (in %v)\n", p.FinishedAt.UTC().Format(time.RFC3339), p.FinishedAt.Sub(p.StartedAt).Round(time.Millisecond))
	}
	if p.LastError != "" {
		fmt.Fprintf(tw, "LAST ERROR\t%s\n", p.LastError)
	}
	return tw.Flush()
}

// writesToTerminal reports whether w is a terminal.
func writesToTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && isTerminal(f)
}

// workflowStatuses maps job IDs to their workflow status, if Temporal
// answers within a few seconds (else an empty map); its error is a bad
// Temporal setting (exit code 2).
func workflowStatuses(ctx context.Context, tf *temporalFlags, group string) (map[string]string, error) {
	out := map[string]string{}
	c, err := tf.dialWithin(ctx, min(4*time.Second, tf.g.connectTimeout))
	if exitcode.Of(err) == exitcode.Usage {
		return nil, err
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "note: Temporal did not answer: job statuses unknown (%v)\n", err)
		return out, nil
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, 4*time.Second)
	defer cancel()
	resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
		Query: fmt.Sprintf("WorkflowType = 'CrawlJob' AND BatonCluster = '%s'", group), PageSize: 1000})
	if err != nil {
		fmt.Fprintf(os.Stderr, "note: could not list job workflows: %v\n", err)
		return out, nil
	}
	for _, e := range resp.Executions {
		id := strings.TrimPrefix(e.Execution.WorkflowId, workflows.JobWorkflowID(group, ""))
		if _, ok := out[id]; !ok { // newest first
			out[id] = statusState(e.Status, memoState(e.Memo))
		}
	}
	return out, nil
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
		if exitcode.Of(err) == exitcode.Usage {
			return p, err // a bad --temporal-address: nothing to fall back on
		}
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
			err := jobOutcome(c.GetWorkflow(gctx, wid, "").Get(gctx, &p), &p)
			cancel()
			if err == nil {
				return p, nil
			}
			p.State = statusState(desc.WorkflowExecutionInfo.Status, memoState(desc.WorkflowExecutionInfo.GetMemo()))
			temporalErr = fmt.Errorf("workflow %s ended %s: %w", wid, p.State, err)
		default:
			qctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			q, err := queryProgress(qctx, c, wid)
			cancel()
			if err == nil {
				return q, nil
			}
			temporalErr = fmt.Errorf("no worker answered the progress query (%v)", err)
			memoProgress(desc.WorkflowExecutionInfo.GetMemo(), &p)
			if t := desc.WorkflowExecutionInfo.GetStartTime(); t != nil {
				p.StartedAt = t.AsTime()
			}
			if p.State == "" {
				p.State = workflows.JobRunning
			}
		}
	}
	js, err := tf.st.openReader(ctx, g)
	if err != nil && p.State != "" {
		// The workflow exists: its state, without counters.
		fmt.Fprintf(os.Stderr, "note: %v; no counters (the job store: %v)\n", temporalErr, err)
		return p, nil
	}
	if err != nil {
		err = fmt.Errorf("%v; and the job store: %w", temporalErr, err)
		if exitcode.Of(temporalErr) == exitcode.Unavailable {
			err = exitcode.With(exitcode.Unavailable, err) // reaching Temporal is the first thing to fix
		}
		return p, err
	}
	defer js.Close()
	st, err := js.Stats(ctx, job)
	if err != nil {
		if errors.Is(err, jobs.ErrNoJob) && p.State != "" {
			fmt.Fprintf(os.Stderr, "note: %v; job %s is not in %s yet: no worker has started it\n", temporalErr, job, js.Identity())
			return p, nil
		}
		if errors.Is(err, jobs.ErrNoJob) {
			return p, exitcode.With(exitcode.NotFound, fmt.Errorf("no job %q: %v; not in %s either", job, temporalErr, js.Identity()))
		}
		return p, err
	}
	p.Stats = st
	p.Started = true // a job in the store was started by a worker
	if spec, err := js.Spec(ctx, job); err == nil {
		p.MaxPages, p.MaxPagesReached = spec.MaxPages, jobs.MaxPagesReached(spec, st)
	}
	if p.State == "" {
		p.State = "unknown"
	}
	fmt.Fprintf(os.Stderr, "note: %v; counters from %s\n", temporalErr, js.Identity())
	return p, nil
}

// memoProgress fills p with what a running job's memo last recorded
// (workflows.JobProgressMemo): its state and batch counts, for a status
// that no worker answered (right after a fail-over, the job's workflow
// task is still on its way to another worker).
func memoProgress(memo *commonpb.Memo, p *workflows.JobProgress) {
	f := memo.GetFields()
	get := func(key string, v any) {
		if d, ok := f[key]; ok {
			_ = json.Unmarshal(d.GetData(), v)
		}
	}
	get("state", &p.State)
	get("batches", &p.Batches)
	get("requeued", &p.Requeued)
	get("failed_batches", &p.FailedBatches)
}

// groupStoreZnode reads the group's store znode (jobs.StorePath) within a
// few seconds: dialErr when ZooKeeper does not answer, err when the read
// fails (metadata.ErrNotFound: the group has none recorded).
func (g *globals) groupStoreZnode(ctx context.Context) (p string, data []byte, dialErr, err error) {
	c, closeZK, err := g.dialWithin(ctx, min(3*time.Second, g.connectTimeout))
	if err != nil {
		return "", nil, err, nil
	}
	defer closeZK()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	p = jobs.StorePath(g.zk.Root, g.group)
	data, _, err = c.Store.Get(ctx, p)
	return p, data, nil, err
}
