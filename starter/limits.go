package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/batoncrawl/baton/activities/cmdline/exitcode"
	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/activities/metadata"
)

// groupLimits reads the operator limits the group's workers recorded
// (jobs.LimitsPath). ok is false when they cannot be read: a group whose
// workers predate the limits records none, and a ZooKeeper the CLI cannot
// reach gives a note to show; the job is then submitted as it is, and
// every Runner still refuses it if it is above its own limits.
func groupLimits(ctx context.Context, g *globals) (l jobs.Limits, ok bool, note string, bad error) {
	c, closeFn, err := g.dial(ctx)
	if err == nil {
		defer closeFn()
	}
	return limitsOf(ctx, c, err)
}

// limitsOf is groupLimits over a session c dialled with err.
func limitsOf(ctx context.Context, c *metadata.Cluster, err error) (l jobs.Limits, ok bool, note string, bad error) {
	if exitcode.Of(err) == exitcode.Usage {
		return l, false, "", err // a bad --zk-hosts or credentials: bad input, not an outage
	}
	if err != nil {
		return l, false, fmt.Sprintf("note: the group's operator limits could not be read (%v): the Runners check the job against theirs", err), nil
	}
	gl, err := jobs.ReadLimits(ctx, c.Store, c.Root, c.Group)
	switch {
	case errors.Is(err, jobs.ErrNoLimits):
		return l, false, "", nil
	case err != nil:
		return l, false, fmt.Sprintf("note: %v: the Runners check the job against their limits", err), nil
	}
	return gl.Limits, true, "", nil
}

// checkGroupLimits refuses a job above the group's limits before it is
// submitted (exit 2, naming the flag, its value and the cap). The
// built-in defaults of --max-body-bytes and --timeout, when not given, are
// lowered to caps below them.
func checkGroupLimits(cmd *cobra.Command, l jobs.Limits, spec *jobs.Spec) error {
	o := &spec.Options
	if !cmd.Flags().Changed("max-body-bytes") && !cmd.Flags().Changed("max-body") && l.MaxBodyBytes > 0 && o.MaxBodyBytes > l.MaxBodyBytes {
		o.MaxBodyBytes = l.MaxBodyBytes
	}
	if !cmd.Flags().Changed("timeout") && l.MaxTimeout > 0 && o.Timeout > l.MaxTimeout {
		o.Timeout = l.MaxTimeout
	}
	return limitError(l.CheckSubmission(*spec))
}

// limitError is a jobs.LimitError in the CLI's words: the flag of
// `baton crawl` that set the field, and the workers' flag that set the
// cap.
func limitError(err error) error {
	var le *jobs.LimitError
	if !errors.As(err, &le) {
		return err
	}
	flag, ok := specFlags[le.Field]
	switch {
	case le.Field == "bodies_path":
		flag = "--bodies-dir"
	case !ok:
		flag = le.Field
	}
	return usage("invalid crawl: %s: %s (the workers' %s)", flag, le.Msg, le.Flag)
}
