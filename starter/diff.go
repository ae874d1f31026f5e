package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/batoncrawl/baton/activities/jobs"
)

// diffFormat is the --output of `baton diff`: table, json or csv.
type diffFormat string

func (o *diffFormat) String() string { return string(*o) }

// Set accepts table, json or csv.
func (o *diffFormat) Set(v string) error {
	switch v {
	case "table", "json", "csv":
		*o = diffFormat(v)
		return nil
	}
	return fmt.Errorf("want table, json or csv")
}

// Type names the value in the help.
func (o *diffFormat) Type() string { return "table|json|csv" }

// diffCmd compares the results of two jobs URL by URL.
func diffCmd(g *globals, tf *temporalFlags) *cobra.Command {
	format := diffFormat("table")
	var unchanged bool
	cmd := &cobra.Command{
		Use:   "diff JOB_A JOB_B",
		Short: "Compare two jobs' results by URL: new, gone and changed pages, and which fields changed",
		Long: `Compare two jobs' results by URL, from the job store: a URL in JOB_B only is new,
in JOB_A only gone; in both it is changed when its title or any extracted field
(--select) differs, with the fields named, else unchanged. Unchanged pages are
counted, and listed with --unchanged. The two jobs are read in URL order and
merged, so memory stays flat whatever their size.`,
		Example: `  baton diff shop-20261127T030000Z shop-20261128T030000Z
  baton diff run-1 run-2 --output csv > changes.csv
  baton diff run-1 run-2 --output json --unchanged`,
		Args: twoJobs,
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, id := range args {
				if err := jobs.ValidID(id); err != nil {
					return usage("%v", err)
				}
			}
			js, err := tf.st.openReader(cmd.Context(), g)
			if err != nil {
				return err
			}
			defer js.Close()
			for _, id := range args {
				if _, err := js.Spec(cmd.Context(), id); err != nil {
					return notFound(js, id, err)
				}
			}
			w := newDiffWriter(cmd.OutOrStdout(), string(format), args[0], args[1])
			if err := w.begin(); err != nil {
				return err
			}
			counts, err := jobs.Diff(cmd.Context(), js, args[0], args[1], func(e jobs.DiffEntry) error {
				if e.Kind == jobs.DiffUnchanged && !unchanged {
					return nil
				}
				return w.entry(e)
			})
			if err != nil {
				return err
			}
			return w.end(counts)
		},
	}
	cmd.Flags().Var(&format, "output", "output format: table (for people), json (one JSON document) or csv (one row per URL)")
	cmd.Flags().BoolVar(&unchanged, "unchanged", false, "list the unchanged pages too (they are always counted)")
	return cmd
}

// twoJobs checks the arguments of `baton diff`.
func twoJobs(cmd *cobra.Command, args []string) error {
	switch len(args) {
	case 0:
		return usage("missing JOB_A and JOB_B: give the IDs of the two jobs to compare (baton jobs lists them) ('%s')", useLine(cmd))
	case 1:
		return usage("missing JOB_B: give the ID of the job to compare %s with ('%s')", args[0], useLine(cmd))
	case 2:
		return nil
	}
	return usage("two jobs only, got %d (%s): '%s'", len(args), strings.Join(quoteAll(args), " "), useLine(cmd))
}

// diffWriter writes a diff as it is merged: one line, row or JSON object
// per URL, the counts at the end.
type diffWriter struct {
	w      io.Writer
	format string
	a, b   string
	csv    *csv.Writer
	n      int
}

func newDiffWriter(w io.Writer, format, a, b string) *diffWriter {
	return &diffWriter{w: w, format: format, a: a, b: b}
}

func (d *diffWriter) begin() error {
	switch d.format {
	case "json":
		ja, _ := json.Marshal(d.a)
		jb, _ := json.Marshal(d.b)
		_, err := fmt.Fprintf(d.w, "{\n  \"job_a\": %s,\n  \"job_b\": %s,\n  \"pages\": [", ja, jb)
		return err
	case "csv":
		d.csv = csv.NewWriter(d.w)
		return d.csv.Write([]string{"url", "change", "title_changed", "fields_changed"})
	}
	_, err := fmt.Fprintf(d.w, "%-9s  %-24s  %s\n", "CHANGE", "WHAT", "URL")
	return err
}

func (d *diffWriter) entry(e jobs.DiffEntry) error {
	d.n++
	switch d.format {
	case "json":
		b, err := json.Marshal(e)
		if err != nil {
			return err
		}
		sep := ","
		if d.n == 1 {
			sep = ""
		}
		_, err = fmt.Fprintf(d.w, "%s\n    %s", sep, b)
		return err
	case "csv":
		return writeCSVRow(d.csv, []string{e.URL, e.Kind, strconv.FormatBool(e.Title), strings.Join(e.Fields, fieldSep)}, false)
	}
	_, err := fmt.Fprintf(d.w, "%-9s  %-24s  %s\n", e.Kind, diffWhat(e), e.URL)
	return err
}

// diffWhat names what changed on a page: title and the fields.
func diffWhat(e jobs.DiffEntry) string {
	what := e.Fields
	if e.Title {
		what = append([]string{"title"}, what...)
	}
	if len(what) == 0 {
		return "-"
	}
	return strings.Join(what, ", ")
}

func (d *diffWriter) end(c jobs.DiffCounts) error {
	switch d.format {
	case "json":
		b, err := json.MarshalIndent(c, "  ", "  ")
		if err != nil {
			return err
		}
		nl := "\n  "
		if d.n == 0 {
			nl = ""
		}
		_, err = fmt.Fprintf(d.w, "%s],\n  \"counts\": %s\n}\n", nl, b)
		return err
	case "csv":
		d.csv.Flush()
		return d.csv.Error()
	}
	_, err := fmt.Fprintf(d.w, "%s → %s: %d new, %d gone, %d changed, %d unchanged\n", d.a, d.b, c.New, c.Gone, c.Changed, c.Unchanged)
	return err
}

// writeChanged writes the pages of a job that are new or changed against
// its baseline (Spec.Baseline), as JSON lines: `baton results
// --changed-only`.
func writeChanged(ctx context.Context, w io.Writer, js jobs.ReaderStore, spec jobs.Spec, format string) error {
	if format != formatJSONL {
		return usage("--changed-only writes JSON lines: --format jsonl (or leave --format out)")
	}
	if spec.Baseline == "" {
		return usage("job %s has no baseline (a schedule's run, or a job started with a baseline) to compare with: use baton diff JOB_A JOB_B", spec.ID)
	}
	if _, err := js.Spec(ctx, spec.Baseline); err != nil {
		return notFound(js, spec.Baseline, err)
	}
	enc := json.NewEncoder(w)
	_, err := jobs.DiffPages(ctx, js, spec.Baseline, spec.ID, func(e jobs.DiffEntry, p *jobs.PageRecord) error {
		if e.Kind != jobs.DiffNew && e.Kind != jobs.DiffChanged {
			return nil
		}
		return enc.Encode(p)
	})
	return err
}
