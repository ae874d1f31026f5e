package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/batoncrawl/baton/activities/cmdline/exitcode"
	"github.com/batoncrawl/baton/activities/jobs"
)

// This file holds what the CLI says of a recrawl: a job's changes against
// its baseline, and the check of `baton crawl --baseline`.

// jobChanges counts a job's pages by change against its baseline (nil
// without a baseline, or when the store cannot be read from here).
func jobChanges(ctx context.Context, g *globals, tf *temporalFlags, job, baseline string) *jobs.ChangeStats {
	if baseline == "" {
		return nil
	}
	js, err := tf.st.openReader(ctx, g)
	if err != nil {
		return nil
	}
	defer js.Close()
	ch, err := js.Changes(ctx, job, baseline)
	if err != nil {
		return nil
	}
	return &ch
}

// checkBaseline refuses a --baseline the job store does not hold (exit
// code 4, naming it); a store that cannot be read from here is not
// checked (the workers read it).
func checkBaseline(ctx context.Context, g *globals, tf *temporalFlags, baseline string) error {
	if baseline == "" {
		return nil
	}
	js, err := tf.st.openReader(ctx, g)
	if err != nil {
		return nil
	}
	defer js.Close()
	if _, err := js.Spec(ctx, baseline); err != nil {
		if errors.Is(err, jobs.ErrNoJob) {
			return exitcode.With(exitcode.NotFound, fmt.Errorf("--baseline %s: no such job in %s", baseline, js.Identity()))
		}
		return fmt.Errorf("--baseline %s: %w", baseline, err)
	}
	return nil
}
