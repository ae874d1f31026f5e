package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/batoncrawl/baton/activities/jobs"
)

// sinkStore is the job store as `baton sink` holds it: it reads a job's
// sinks and skips or retries their dead letters.
type sinkStore interface {
	Sinks(ctx context.Context, job string) ([]jobs.SinkState, error)
	jobs.SinkOperator
	io.Closer
}

// openSinks opens the store for `baton sink` (see openWith).
func (s *storeFlags) openSinks(ctx context.Context, g *globals) (sinkStore, error) {
	js, err := s.openWith(ctx, g, true)
	if err != nil {
		return nil, err
	}
	return js, nil
}

// sinkCmd is `baton sink skip|retry JOB SINK`: what an operator does to
// the dead letters of a sink of a user crawler (baton status shows them).
func sinkCmd(g *globals, tf *temporalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sink",
		Short: "Skip or retry the dead letters of a job's sink (batches of items it refused; baton status shows them)",
	}
	op := func(use, short, long, did string, fn func(sinkStore, context.Context, string, string) ([]jobs.DeadLetter, error)) *cobra.Command {
		return &cobra.Command{
			Use:     use + " JOB SINK",
			Short:   short,
			Long:    long,
			Example: "  baton sink " + use + " shop1 webhook",
			Args:    jobAndSink,
			RunE: func(cmd *cobra.Command, args []string) error {
				job, sink := args[0], args[1]
				if err := jobs.ValidID(job); err != nil {
					return usage("%v", err)
				}
				js, err := tf.st.openSinks(cmd.Context(), g)
				if err != nil {
					return err
				}
				defer js.Close()
				ds, err := fn(js, cmd.Context(), job, sink)
				if err != nil {
					return err
				}
				if len(ds) == 0 {
					return sinkHasNoDeadLetters(cmd.Context(), cmd.OutOrStdout(), js, job, sink)
				}
				n := 0
				for _, d := range ds {
					n += d.Items
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "job %s sink %s: %s %d dead letters (%d items)\n", job, sink, did, len(ds), n)
				return err
			},
		}
	}
	cmd.AddCommand(
		op("skip", "Drop a sink's dead letters: their items are never delivered to it (counted as skipped)",
			`Drops the dead letters of the job's sink: the batches of items the sink refused
as many times as it allows, set aside so that the items after them were
delivered. Their items stay in the store (baton results --items) and are
counted as skipped in baton status; the sink never gets them.`,
			"skipped", sinkStore.SkipDeadLetters),
		op("retry", "Deliver a sink's dead letters again, before its next items",
			`Marks the dead letters of the job's sink to be delivered again: a worker
carrying the job's crawler delivers them at its next pass (within a
second), before the items at the sink's cursor. A dead letter refused
again stays, with its new error; one the sink could not be reached for
waits with the sink's backoff.`,
			"retrying", sinkStore.RetryDeadLetters),
	)
	return cmd
}

// jobAndSink wants two arguments: the job and the sink.
func jobAndSink(cmd *cobra.Command, args []string) error {
	if len(args) != 2 {
		return usage("want JOB and SINK, got %d arguments (%s): '%s'", len(args), strings.Join(quoteAll(args), " "), useLine(cmd))
	}
	return nil
}

// sinkHasNoDeadLetters answers a skip or retry that found nothing to do:
// it names the sinks the job has when sink is not one of them.
func sinkHasNoDeadLetters(ctx context.Context, w io.Writer, js sinkStore, job, sink string) error {
	sinks, err := js.Sinks(ctx, job)
	if err != nil {
		return err
	}
	var names []string
	for _, s := range sinks {
		if s.Sink == sink {
			_, err := fmt.Fprintf(w, "job %s sink %s: no dead letters\n", job, sink)
			return err
		}
		names = append(names, s.Sink)
	}
	return usage("job %s has no sink %q (its sinks: %v)", job, sink, names)
}
