package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/batoncrawl/baton/workflows"
)

// scheduleAction is what pause, resume, trigger, backfill and delete print
// with --output json.
type scheduleAction struct {
	Schedule string `json:"schedule"`
	Action   string `json:"action"`
	Detail   string `json:"detail,omitempty"`
}

// scheduleControlCmds are pause, resume, trigger, backfill and delete.
func scheduleControlCmds(g *globals, tf *temporalFlags) []*cobra.Command {
	simple := func(use, short, done string, do func(ctx context.Context, c client.Client, h client.ScheduleHandle, name string) (string, error)) *cobra.Command {
		var out *output
		cmd := &cobra.Command{
			Use: use + " NAME", Short: short,
			Args: oneArg("NAME", "the schedule's name (baton schedule list lists them)"),
			RunE: func(cmd *cobra.Command, args []string) error {
				return runScheduleAction(cmd, g, tf, out, args[0], done, do)
			},
		}
		out = addOutputFlag(cmd)
		return cmd
	}
	pause := simple("pause", "Pause a schedule: it fires no more until resumed (a running crawl goes on)", "paused",
		func(ctx context.Context, _ client.Client, h client.ScheduleHandle, _ string) (string, error) {
			return "", h.Pause(ctx, client.SchedulePauseOptions{Note: "paused with baton schedule pause"})
		})
	resume := simple("resume", "Resume a paused schedule (times missed while paused are not run: backfill runs them)", "resumed",
		func(ctx context.Context, _ client.Client, h client.ScheduleHandle, _ string) (string, error) {
			return "", h.Unpause(ctx, client.ScheduleUnpauseOptions{Note: "resumed with baton schedule resume"})
		})
	trigger := simple("trigger", "Fire a schedule now, under its overlap policy (even when paused); the job is named from the time now", "triggered",
		func(ctx context.Context, _ client.Client, h client.ScheduleHandle, _ string) (string, error) {
			return "", h.Trigger(ctx, client.ScheduleTriggerOptions{})
		})
	del := simple("delete", "Delete a schedule (its jobs and a crawl running stay)", "deleted",
		func(ctx context.Context, c client.Client, h client.ScheduleHandle, name string) (string, error) {
			if err := h.Delete(ctx); err != nil {
				return "", err
			}
			err := c.ScheduleClient().GetHandle(ctx, workflows.BackfillScheduleID(g.group, name)).Delete(ctx)
			var nf *serviceerror.NotFound
			if errors.As(err, &nf) {
				err = nil
			}
			return "", err
		})
	return []*cobra.Command{pause, resume, trigger, scheduleBackfillCmd(g, tf), del}
}

// runScheduleAction runs do on schedule name and reports it.
func runScheduleAction(cmd *cobra.Command, g *globals, tf *temporalFlags, out *output, name, done string,
	do func(ctx context.Context, c client.Client, h client.ScheduleHandle, name string) (string, error)) error {
	c, err := tf.dial(cmd.Context())
	if err != nil {
		return err
	}
	defer c.Close()
	h, _, err := scheduleHandle(cmd.Context(), c, g.group, name)
	if err != nil {
		return err
	}
	detail, err := do(cmd.Context(), c, h, name)
	if err != nil {
		return fmt.Errorf("schedule %s: %w", name, err)
	}
	if out.JSON() {
		return writeJSON(cmd.OutOrStdout(), scheduleAction{Schedule: name, Action: done, Detail: detail})
	}
	msg := "schedule " + name + " " + done
	if detail != "" {
		msg += ": " + detail
	}
	fmt.Fprintln(cmd.OutOrStdout(), msg)
	return nil
}

func scheduleBackfillCmd(g *globals, tf *temporalFlags) *cobra.Command {
	var from, to string
	var out *output
	cmd := &cobra.Command{
		Use:     "backfill NAME --from TIME --to TIME",
		Short:   "Run a schedule's times in a past range now, each a job named from its time and tagged trigger=backfill",
		Example: `  baton schedule backfill shop --from 2026-11-20T00:00:00Z --to 2026-11-27T00:00:00Z`,
		Args:    oneArg("NAME", "the schedule's name (baton schedule list lists them)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			start, end, err := backfillRange(from, to)
			if err != nil {
				return err
			}
			return runScheduleAction(cmd, g, tf, out, args[0], "backfilled",
				func(ctx context.Context, c client.Client, _ client.ScheduleHandle, name string) (string, error) {
					h := c.ScheduleClient().GetHandle(ctx, workflows.BackfillScheduleID(g.group, name))
					err := h.Backfill(ctx, client.ScheduleBackfillOptions{Backfill: []client.ScheduleBackfill{{Start: start, End: end}}})
					return fmt.Sprintf("its times from %s to %s", start.Format(time.RFC3339), end.Format(time.RFC3339)), err
				})
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "start of the range (RFC 3339: 2026-11-20T00:00:00Z)")
	cmd.Flags().StringVar(&to, "to", "", "end of the range (RFC 3339)")
	out = addOutputFlag(cmd)
	return cmd
}

// backfillRange parses --from and --to.
func backfillRange(from, to string) (time.Time, time.Time, error) {
	var t [2]time.Time
	for i, f := range []struct{ flag, v string }{{"from", from}, {"to", to}} {
		if f.v == "" {
			return t[0], t[1], usage("--%s: required (RFC 3339: 2026-11-20T00:00:00Z)", f.flag)
		}
		v, err := time.Parse(time.RFC3339, f.v)
		if err != nil {
			return t[0], t[1], usage("--%s %q: want RFC 3339 (2026-11-20T00:00:00Z)", f.flag, f.v)
		}
		t[i] = v.UTC()
	}
	if !t[1].After(t[0]) {
		return t[0], t[1], usage("--to %s is not after --from %s", to, from)
	}
	return t[0], t[1], nil
}
