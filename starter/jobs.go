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
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/batoncrawl/baton/activities/cmdline/exitcode"
	"github.com/batoncrawl/baton/activities/connect"
	"github.com/batoncrawl/baton/activities/jobs"
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
	// The CLI's requests are small (a spec, a query, a signal): gzip
	// would cost each command CPU (a compressor set up per request) and
	// save no time.
	opts.ConnectionOptions.GrpcCompression = &client.GrpcCompressionNone{}
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
	if err == nil {
		defer js.Close()
	}
	writeReport(ctx, w, js, err, job)
}

// writeReport prints the job's stats block from js, opened with err.
func writeReport(ctx context.Context, w io.Writer, js submitStore, err error, job string) {
	if err != nil {
		fmt.Fprintf(os.Stderr, "note: no stats: the job store cannot be read from here (%v)\n", err)
		return
	}
	rep, err := jobs.BuildReport(ctx, js, job)
	if err != nil {
		fmt.Fprintf(os.Stderr, "note: no stats: %v\n", err)
		return
	}
	fmt.Fprintln(w, "stats:")
	_ = rep.Write(w)
}

// storeAhead is the job store opened in the background while a crawl is
// waited for, so that the stats block at its end reads it at once.
type storeAhead struct {
	done chan struct{}
	js   submitStore
	err  error
}

// openAhead starts opening the job store.
func openAhead(ctx context.Context, g *globals, tf *temporalFlags) *storeAhead {
	a := &storeAhead{done: make(chan struct{})}
	go func() {
		defer close(a.done)
		a.js, a.err = tf.st.open(ctx, g)
	}()
	return a
}

// report prints the job's stats block (printReport) from the store
// opened ahead.
func (a *storeAhead) report(ctx context.Context, w io.Writer, job string) {
	<-a.done
	writeReport(ctx, w, a.js, a.err, job)
}

// close closes the store if it is open; one still opening is left to
// the command's exit (a crawl that ended early never waits for it).
func (a *storeAhead) close() {
	select {
	case <-a.done:
		if a.js != nil {
			a.js.Close()
		}
	default:
	}
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

// maxPagesNote says that a job reached its --max-pages cap ("" when it
// did not): its pages are not all the site has.
func maxPagesNote(p workflows.JobProgress) string {
	if !p.MaxPagesReached {
		return ""
	}
	if p.State == workflows.JobCompleted {
		return fmt.Sprintf("; stopped at --max-pages %d", p.MaxPages)
	}
	return fmt.Sprintf("; --max-pages %d reached: no more URLs taken", p.MaxPages)
}

// printSummary writes a finished job's outcome.
func printSummary(w io.Writer, p workflows.JobProgress) {
	d := p.FinishedAt.Sub(p.StartedAt)
	rate := 0.0
	if d > 0 {
		rate = float64(p.Stats.Recorded) / d.Seconds()
	}
	rendered := ""
	if n := p.Stats.Render.Rendered; n > 0 {
		rendered = fmt.Sprintf(", %d rendered", n)
	}
	fmt.Fprintf(w, "job %s %s: %d pages (%d failed%s)%s, %d batches, %d re-queued, in %v (%.1f pages/s)\n",
		p.ID, p.State, p.Stats.Recorded, p.Stats.Failed, maxPagesNote(p), rendered, p.Batches, p.Requeued, d.Round(time.Millisecond), rate)
	if p.FailedBatches > 0 {
		fmt.Fprintf(w, "%d batches failed; the last because: %s\n", p.FailedBatches, p.LastError)
	}
}
