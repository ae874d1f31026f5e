package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/batoncrawl/baton/activities/metadata"
	"github.com/batoncrawl/baton/roles"
)

func (g *globals) dial(ctx context.Context) (*metadata.Cluster, func(), error) {
	cfg, err := g.zk.Config(quietLogger())
	if err != nil {
		return nil, nil, usageError{err}
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	s, err := metadata.DialZooKeeper(ctx, cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("%w (is ZooKeeper running? start the local stack with 'make stack-up')", err)
	}
	return metadata.NewCluster(s, g.zk.Root, g.group), func() { s.Close() }, nil
}

func clusterCmd(g *globals) *cobra.Command {
	var (
		watch    bool
		interval time.Duration
	)
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Show the group's instances: role, health, heartbeat age, task state and progress",
		Example: `  baton cluster
  baton cluster --watch --interval 500ms`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if interval <= 0 {
				return usage("--interval: %v, must be > 0", interval)
			}
			c, closeFn, err := g.dial(cmd.Context())
			if err != nil {
				return err
			}
			defer closeFn()
			if !watch {
				return printCluster(cmd.Context(), os.Stdout, c, time.Now())
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return watchCluster(ctx, os.Stdout, c, interval, isTerminal(os.Stdout), realClock{})
		},
	}
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "refresh the table every --interval until Ctrl-C")
	cmd.Flags().DurationVar(&interval, "interval", time.Second, "refresh interval of --watch")
	return cmd
}

// printCluster writes the GroupState summary and one row per instance.
func printCluster(ctx context.Context, w io.Writer, c *metadata.Cluster, now time.Time) error {
	gs, _, err := c.GetGroup(ctx)
	if err != nil {
		return fmt.Errorf("group %s: %w", c.Group, err)
	}
	fmt.Fprintf(w, "group %s: %d runners, %d backups, standby_id %q\n", c.Group, gs.TotalRunner, gs.TotalBackup, gs.StandbyID)
	fmt.Fprintf(w, "current_runner %v  current_backup %v  fail_crawler %v\n\n", gs.CurrentRunner, gs.CurrentBackup, gs.FailCrawler)
	names := append(append([]string{}, gs.CurrentCrawler...), gs.FailCrawler...)
	roles.SortNames(names)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "INSTANCE\tROLE\tHEALTH\tHEARTBEAT AGE\tTASK\tPROGRESS\tHOLDER/EPOCH")
	for _, n := range names {
		role, health, age, task, progress, holder := "?", "?", "?", "?", "", ""
		if ns, _, err := c.GetNode(ctx, n); err == nil {
			role = string(ns.Role)
			if ns.TakenOverBy != "" {
				role += " (by " + ns.TakenOverBy + ")"
			}
		} else {
			role = "error: " + err.Error()
		}
		if hb, _, err := c.GetHeartbeat(ctx, n); err == nil {
			health = string(hb.HealthyState)
			if a, err := hb.Age(now); err == nil {
				age = a.Round(time.Millisecond).String()
			}
		}
		if t, _, err := c.GetTask(ctx, n); err == nil {
			task = string(t.RunningStatus)
			if len(t.RunningContent) > 0 {
				progress = fmt.Sprintf("%d/%d (ok %d, failed %d)", t.NextIndex, len(t.RunningContent), t.RunningResult.SuccessCount, t.RunningResult.FailCount)
			}
			holder = fmt.Sprintf("%s/%d", t.Holder, t.Epoch)
		} else {
			task = "error"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", n, role, health, age, task, progress, holder)
	}
	return tw.Flush()
}
