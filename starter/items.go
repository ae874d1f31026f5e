package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"syscall"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/spf13/cobra"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/batoncrawl/baton/activities/jobs"
)

// itemPage is how many items one read of the store returns.
const itemPage = 1000

// maxItemColumns bounds the columns a CSV or Parquet export of items gets
// from its items' keys (hostile pages, or a bug, must not make a file of
// a million columns); the rest of an item stays in its value.
const maxItemColumns = 256

// itemBase are the columns of every row of an items export, before the
// item's own keys.
var itemBase = []string{"item_id", "url", "label", "index"}

// eachItem calls fn for every item of job, in the order recorded; with
// follow, it then waits for more every interval until ctx ends or done
// says the job is over (and nothing more came).
func eachItem(ctx context.Context, js jobs.ReaderStore, job string, follow bool, interval time.Duration, done func() bool, fn func(jobs.ItemRecord) error) error {
	var after int64
	for {
		got, err := js.Items(ctx, job, after, itemPage)
		if err != nil {
			return err
		}
		for _, it := range got {
			if err := fn(it); err != nil {
				return err
			}
			after = it.Seq
		}
		if len(got) == itemPage {
			continue
		}
		if !follow {
			return nil
		}
		if done != nil && done() {
			// One last read: items recorded before the job ended.
			follow = false
			continue
		}
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// itemColumns is the union of the items' top-level keys (sorted) with
// the Parquet kind of each: int64, double, boolean or string (objects
// and arrays are JSON text), from a first pass over the items.
func itemColumns(ctx context.Context, js jobs.ReaderStore, job string) ([]string, map[string]string, error) {
	kinds := map[string]string{}
	err := eachItem(ctx, js, job, false, 0, nil, func(it jobs.ItemRecord) error {
		var obj map[string]json.RawMessage
		if json.Unmarshal(it.Value, &obj) != nil {
			return nil
		}
		for k, v := range obj {
			if _, ok := kinds[k]; !ok && len(kinds) >= maxItemColumns {
				continue
			}
			kinds[k] = mergeKind(kinds[k], kindOf(v))
		}
		return nil
	})
	cols := make([]string, 0, len(kinds))
	for k := range kinds {
		cols = append(cols, k)
	}
	sort.Strings(cols)
	return cols, kinds, err
}

func kindOf(v json.RawMessage) string {
	v = bytes.TrimSpace(v)
	switch {
	case len(v) == 0 || string(v) == "null":
		return ""
	case v[0] == 't' || v[0] == 'f':
		return "boolean"
	case v[0] == '"' || v[0] == '{' || v[0] == '[':
		return "string"
	}
	if _, err := strconv.ParseInt(string(v), 10, 64); err == nil {
		return "int64"
	}
	return "double"
}

// mergeKind is the kind of a column whose values have kinds a and b.
func mergeKind(a, b string) string {
	switch {
	case a == "" || a == b:
		return b
	case b == "":
		return a
	case (a == "int64" && b == "double") || (a == "double" && b == "int64"):
		return "double"
	}
	return "string"
}

// cell is a value as text: a string unquoted, anything else as JSON.
func cell(v json.RawMessage) string {
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s
	}
	if string(v) == "null" {
		return ""
	}
	return string(v)
}

// writeItems exports a job's items: JSONL (one StoredItem per line, as a
// sink gets it), CSV or Parquet (one row per item: its ID, page URL,
// label and index, then one column per top-level key of the items, typed
// in Parquet).
func writeItems(ctx context.Context, w io.Writer, js jobs.ReaderStore, job, format string, csvRaw, follow bool, done func() bool) error {
	switch format {
	case formatJSONL:
		enc := json.NewEncoder(w)
		flush, _ := w.(interface{ Flush() error })
		return eachItem(ctx, js, job, follow, 500*time.Millisecond, done, func(it jobs.ItemRecord) error {
			if err := enc.Encode(it.StoredItem); err != nil {
				return err
			}
			if flush != nil {
				return flush.Flush()
			}
			return nil
		})
	case formatCSV, formatParquet:
		if follow {
			return usage("--follow streams JSON lines: use --format jsonl")
		}
		cols, kinds, err := itemColumns(ctx, js, job)
		if err != nil {
			return err
		}
		if format == formatCSV {
			return writeItemsCSV(ctx, w, js, job, cols, csvRaw)
		}
		return writeItemsParquet(ctx, w, js, job, cols, kinds)
	}
	return fmt.Errorf("unknown format %q", format)
}

func writeItemsCSV(ctx context.Context, w io.Writer, js jobs.ReaderStore, job string, cols []string, raw bool) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(append(append([]string{}, itemBase...), cols...)); err != nil {
		return err
	}
	err := eachItem(ctx, js, job, false, 0, nil, func(it jobs.ItemRecord) error {
		var obj map[string]json.RawMessage
		_ = json.Unmarshal(it.Value, &obj)
		row := []string{it.ID, it.URL, it.Label, strconv.Itoa(it.Index)}
		for _, c := range cols {
			row = append(row, cell(obj[c]))
		}
		return writeCSVRow(cw, row, raw)
	})
	if err != nil {
		return err
	}
	cw.Flush()
	return cw.Error()
}

func writeItemsParquet(ctx context.Context, w io.Writer, js jobs.ReaderStore, job string, cols []string, kinds map[string]string) error {
	group := parquet.Group{
		"item_id": parquet.String(), "url": parquet.String(), "label": parquet.String(), "index": parquet.Leaf(parquet.Int64Type),
	}
	for _, c := range cols {
		if _, clash := group[c]; clash {
			continue
		}
		var n parquet.Node
		switch kinds[c] {
		case "int64":
			n = parquet.Leaf(parquet.Int64Type)
		case "double":
			n = parquet.Leaf(parquet.DoubleType)
		case "boolean":
			n = parquet.Leaf(parquet.BooleanType)
		default:
			n = parquet.String()
		}
		group[c] = parquet.Optional(n)
	}
	schema := parquet.NewSchema("item", group)
	pw := parquet.NewGenericWriter[map[string]any](w, schema, parquet.Compression(&parquet.Zstd),
		parquet.CreatedBy("baton", "", ""), parquet.MaxRowsPerRowGroup(parquetRowGroupRows))
	err := eachItem(ctx, js, job, false, 0, nil, func(it jobs.ItemRecord) error {
		var obj map[string]json.RawMessage
		_ = json.Unmarshal(it.Value, &obj)
		row := map[string]any{"item_id": it.ID, "url": it.URL, "label": it.Label, "index": int64(it.Index)}
		for _, c := range cols {
			if c == "item_id" || c == "url" || c == "label" || c == "index" {
				continue
			}
			v, ok := obj[c]
			if !ok || string(v) == "null" {
				continue
			}
			switch kinds[c] {
			case "int64":
				n, _ := strconv.ParseInt(string(v), 10, 64)
				row[c] = n
			case "double":
				f, _ := strconv.ParseFloat(string(v), 64)
				row[c] = f
			case "boolean":
				row[c] = string(v) == "true"
			default:
				row[c] = cell(v)
			}
		}
		_, err := pw.Write([]map[string]any{row})
		return err
	})
	if err != nil {
		return err
	}
	return pw.Close()
}

// exportItems is `baton results --items`: to stdout or, whole and
// atomically, to output; with follow, until the job's workflow is closed
// (asked of Temporal; if it cannot be asked, until Ctrl-C).
func exportItems(cmd *cobra.Command, g *globals, tf *temporalFlags, js jobs.ReaderStore, job, format, output string, csvRaw, follow bool) error {
	ctx := cmd.Context()
	var done func() bool
	if follow {
		var stop context.CancelFunc
		ctx, stop = signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
		defer stop()
		if c, err := tf.dialWithin(ctx, g.connectTimeout); err == nil {
			defer c.Close()
			done = func() bool {
				desc, err := describeJob(ctx, c, g, job)
				return err == nil && desc.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
			}
		} else {
			fmt.Fprintf(cmd.ErrOrStderr(), "note: Temporal not reachable (%v): following until Ctrl-C\n", err)
		}
	}
	if output == "" || output == "-" {
		w := bufio.NewWriter(cmd.OutOrStdout())
		if err := writeItems(ctx, w, js, job, format, csvRaw, follow, done); err != nil {
			return err
		}
		return w.Flush()
	}
	f, err := createAtomic(output)
	if err != nil {
		return err
	}
	defer f.Abort()
	if err := writeItems(ctx, f, js, job, format, csvRaw, follow, done); err != nil {
		return err
	}
	return f.Commit()
}

// jobSinks reads the delivery states of a job's sinks from the store;
// none when the store cannot be read from here (status still answers).
func jobSinks(ctx context.Context, g *globals, tf *temporalFlags, job string) []jobs.SinkState {
	js, err := tf.st.openReader(ctx, g)
	if err != nil {
		return nil
	}
	defer js.Close()
	sinks, err := js.Sinks(ctx, job)
	if err != nil {
		return nil
	}
	return sinks
}

// printSinks writes a line per sink: delivered items, cursor, the
// failures of a sink that is failing; then a line per dead letter, and
// how to skip or retry them.
func printSinks(w io.Writer, sinks []jobs.SinkState) error {
	for _, s := range sinks {
		line := fmt.Sprintf("SINK %s\tdelivered %d (cursor %d)", s.Sink, s.Delivered, s.Cursor)
		if s.Holder != "" {
			line += ", by " + s.Holder
		}
		if s.Skipped > 0 {
			line += fmt.Sprintf(", %d skipped", s.Skipped)
		}
		if s.Failures > 0 {
			line += fmt.Sprintf(", FAILING: %d failures", s.Failures)
			if !s.RetryAt.IsZero() {
				line += ", next try " + s.RetryAt.Format(time.RFC3339)
			}
			line += ", last: " + s.LastError
		}
		if len(s.DeadLetters) > 0 {
			line += fmt.Sprintf(", %d DEAD LETTERS (baton sink skip|retry %s %s)", len(s.DeadLetters), s.Job, s.Sink)
		}
		if _, err := fmt.Fprintln(w, line); err != nil {
			return err
		}
		for _, d := range s.DeadLetters {
			retry := ""
			if d.Retry {
				retry = " (to be retried)"
			}
			if _, err := fmt.Fprintf(w, "  DEAD LETTER %s\titems %d..%d (%d), %d failures, %s%s: %s\n", s.Sink, d.First, d.Last, d.Items,
				d.Failures, d.At.Format(time.RFC3339), retry, d.LastError); err != nil {
				return err
			}
		}
	}
	return nil
}

// followStartWait is how long `results --items --follow` waits for a job
// that is not in the store yet (submitted a moment ago).
const followStartWait = 30 * time.Second

// awaitJob waits up to d for job to appear in the store, saying so on
// stderr, and returns its spec (ErrNoJob after d).
func awaitJob(cmd *cobra.Command, js jobs.ReaderStore, job string, d time.Duration) (jobs.Spec, error) {
	fmt.Fprintf(cmd.ErrOrStderr(), "waiting up to %v for job %s to start\n", d, job)
	ctx, cancel := context.WithTimeout(cmd.Context(), d)
	defer cancel()
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		spec, err := js.Spec(ctx, job)
		if !errors.Is(err, jobs.ErrNoJob) {
			return spec, err
		}
		select {
		case <-ctx.Done():
			return spec, err
		case <-t.C:
		}
	}
}
