package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/batoncrawl/baton/activities/cmdline/exitcode"
	"github.com/batoncrawl/baton/activities/metadata"
	"github.com/batoncrawl/baton/roles"
)

// scalePlan is what `baton cluster scale` changed and what the cluster
// will do about it.
type scalePlan struct {
	Group string `json:"group"`
	// Runners and Backups are the counts when the targets were written.
	Runners int `json:"runners"`
	Backups int `json:"backups"`
	// WantRunners is total_runner; MinBackup is min_backup.
	WantRunners int `json:"want_runners"`
	MinBackup   int `json:"min_backup"`
	// Promote backups become runners; StepDown runners become backups
	// once their batch is done; StartWorkers more instances are needed.
	Promote      int `json:"promote"`
	StepDown     int `json:"step_down"`
	StartWorkers int `json:"start_workers"`
	// Converged is set by --wait when the runners reached the target.
	Converged bool `json:"converged,omitempty"`
}

func scaleCmd(g *globals) *cobra.Command {
	var (
		runners, backups int
		wait             time.Duration
		o                *output
	)
	cmd := &cobra.Command{
		Use:   "scale --runners N [--backups M]",
		Short: "Change how many of the group's instances are Runners; the cluster converges on its own",
		Long: `Scale sets the group's target number of Runners (total_runner) and, with
--backups, how many Backup Runners a scale-up keeps (min_backup). The running
cluster converges: the standby backup promotes itself while the group wants
more runners, and surplus runners (the largest indexes) step down to backups
once their current batch is done (a crawl-job batch stops pulling URLs and
finishes what it holds). New workers started for the group join it at once,
as runners while it wants some, else as backups; a worker stopped with
SIGTERM leaves it. In All-are-Runner mode every instance is a runner: add or
stop workers instead.`,
		Example: `  baton cluster scale --runners 4 --backups 2 --wait 1m
  baton cluster scale --runners 1`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("runners") {
				return usage("--runners: required")
			}
			if runners < 1 {
				return usage("--runners: %d, must be >= 1", runners)
			}
			if backups < 0 {
				return usage("--backups: %d, must be >= 0", backups)
			}
			c, closeFn, err := g.dial(cmd.Context())
			if err != nil {
				return err
			}
			defer closeFn()
			plan, err := setScale(cmd.Context(), c, runners, backups, cmd.Flags().Changed("backups"))
			if err != nil {
				return err
			}
			errw := cmd.ErrOrStderr()
			if !o.JSON() {
				printPlan(cmd.OutOrStdout(), plan)
			}
			if wait > 0 {
				plan.Converged, err = waitScale(cmd.Context(), c, plan.WantRunners, wait)
				if err != nil {
					return err
				}
				if !o.JSON() {
					fmt.Fprintf(cmd.OutOrStdout(), "converged: %v\n", plan.Converged)
				}
			}
			if o.JSON() {
				if err := writeJSON(cmd.OutOrStdout(), plan); err != nil {
					return err
				}
			}
			if wait > 0 && !plan.Converged {
				fmt.Fprintf(errw, "the group has not reached %d runners within %v: see `baton cluster`\n", plan.WantRunners, wait)
				return exitcode.With(exitcode.Failure, fmt.Errorf("group %s: not converged within %v", c.Group, wait))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&runners, "runners", 0, "how many instances crawl (total_runner)")
	f.IntVar(&backups, "backups", 0, "how many backups a scale-up keeps (min_backup; default: unchanged)")
	f.DurationVar(&wait, "wait", 0, "wait up to this long until the group has --runners runners (exit 1 if not)")
	o = addOutputFlag(cmd)
	return cmd
}

// setScale writes the targets under the group lock and returns the plan.
func setScale(ctx context.Context, c *metadata.Cluster, runners, backups int, setBackups bool) (scalePlan, error) {
	var plan scalePlan
	_, err := c.UpdateGroup(ctx, func(gs *roles.GroupState) error {
		if gs.AllAreRunners() {
			return exitcode.Usagef("group %s runs every instance as a Runner (All-are-Runner mode): start workers to grow it, stop workers (SIGTERM) to shrink it", c.Group)
		}
		if !gs.Formed() {
			return exitcode.Usagef("group %s has not formed yet (no runner elected): start its workers first", c.Group)
		}
		gs.TotalRunner = runners
		if setBackups {
			gs.MinBackup = backups
		}
		plan = planOf(c.Group, *gs)
		return nil
	})
	if errors.Is(err, metadata.ErrNotFound) {
		return plan, exitcode.With(exitcode.NotFound, fmt.Errorf("group %s: no such group under this ZooKeeper root", c.Group))
	}
	return plan, err
}

func planOf(group string, g roles.GroupState) scalePlan {
	p := scalePlan{Group: group, Runners: len(g.CurrentRunner), Backups: len(g.CurrentBackup),
		WantRunners: g.TotalRunner, MinBackup: g.MinBackup}
	if short := g.TotalRunner - p.Runners; short > 0 {
		p.Promote = min(short, max(0, p.Backups-g.MinBackup))
		p.StartWorkers = max(0, g.TotalRunner+g.MinBackup-p.Runners-p.Backups)
	} else {
		p.StepDown = -short
		p.StartWorkers = max(0, g.MinBackup-p.Backups-p.StepDown)
	}
	return p
}

func printPlan(w io.Writer, p scalePlan) {
	fmt.Fprintf(w, "group %s: %d runners, %d backups now; target %d runners, keeping at least %d backups\n",
		p.Group, p.Runners, p.Backups, p.WantRunners, p.MinBackup)
	switch {
	case p.Promote > 0:
		fmt.Fprintf(w, "%s will be promoted to %s\n", plural(p.Promote, "backup"), noun(p.Promote, "runner"))
	case p.StepDown > 0:
		fmt.Fprintf(w, "%s will step down to %s once idle (a running batch drains first)\n", plural(p.StepDown, "runner"), noun(p.StepDown, "backup"))
	default:
		fmt.Fprintln(w, "no role changes needed")
	}
	if p.StartWorkers > 0 {
		fmt.Fprintf(w, "start %d more %s for this group to reach the target (they join on their own)\n", p.StartWorkers, noun(p.StartWorkers, "worker"))
	}
}

// waitScale waits (a watch on GroupState) until the group has want runners.
func waitScale(ctx context.Context, c *metadata.Cluster, want int, d time.Duration) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for {
		data, _, ch, err := c.Store.GetW(ctx, c.GroupPath())
		if err != nil {
			if ctx.Err() != nil {
				return false, nil
			}
			return false, err
		}
		if g, err := roles.DecodeGroupState(data); err == nil && len(g.CurrentRunner) == want && len(g.Surplus()) == 0 {
			return true, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return false, nil
		}
	}
}

// noun is word, plural for n != 1.
func noun(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// plural is "n word(s)".
func plural(n int, word string) string { return fmt.Sprintf("%d %s", n, noun(n, word)) }
