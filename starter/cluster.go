package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path"
	"slices"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/batoncrawl/baton/activities/cmdline/exitcode"
	"github.com/batoncrawl/baton/activities/metadata"
	"github.com/batoncrawl/baton/roles"
)

// dial opens a ZooKeeper session within --connect-timeout.
func (g *globals) dial(ctx context.Context) (*metadata.Cluster, func(), error) {
	return g.dialWithin(ctx, g.connectTimeout)
}

// dialWithin opens a ZooKeeper session within timeout.
func (g *globals) dialWithin(ctx context.Context, timeout time.Duration) (*metadata.Cluster, func(), error) {
	cfg, err := g.zk.Config(quietLogger())
	if err != nil {
		return nil, nil, exitcode.With(exitcode.Usage, err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	s, err := metadata.DialZooKeeper(ctx, cfg)
	if err != nil {
		return nil, nil, g.zk.Unreachable(err, timeout)
	}
	if err := s.CheckRoot(ctx, g.zk.Root); err != nil {
		s.Close()
		return nil, nil, exitcode.With(exitcode.Usage, err)
	}
	return metadata.NewCluster(s, g.zk.Root, g.group), func() { s.Close() }, nil
}

func clusterCmd(g *globals) *cobra.Command {
	var (
		watch    bool
		interval time.Duration
		o        *output
	)
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Show the group's instances: role, health, heartbeat age, task state and progress",
		Example: `  baton cluster
  baton cluster --watch --interval 500ms
  baton cluster --output json | jq -r '.instances[] | select(.role == "runner") | .name'`,
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
			out := cmd.OutOrStdout()
			if !watch {
				if o.JSON() {
					v, err := readCluster(cmd.Context(), c, time.Now())
					if err != nil {
						return err
					}
					return writeJSON(out, v)
				}
				return printCluster(cmd.Context(), out, c, time.Now())
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if o.JSON() {
				return watchClusterJSON(ctx, out, c, interval, realClock{})
			}
			return watchCluster(ctx, out, c, interval, isTerminal(os.Stdout), realClock{})
		},
	}
	o = addOutputFlag(cmd)
	cmd.AddCommand(scaleCmd(g))
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "refresh the table every --interval until Ctrl-C (with --output json: one JSON line each time)")
	cmd.Flags().DurationVar(&interval, "interval", time.Second, "refresh interval of --watch")
	return cmd
}

// noGroup is the error of a group that ZooKeeper does not have (exit code
// 3), naming the groups it has under the root.
func noGroup(ctx context.Context, c *metadata.Cluster) error {
	msg := fmt.Sprintf("no group %s under ZooKeeper root %s (--group, --zk-root): no worker of it has started", c.Group, c.Root)
	if names, err := c.Store.Children(ctx, path.Join(c.Root, "group")); err == nil {
		var groups []string
		for _, n := range names {
			if _, _, err := c.Store.Get(ctx, path.Join(c.Root, "group", n, "state")); err == nil {
				groups = append(groups, n)
			}
		}
		sort.Strings(groups)
		if len(groups) > 0 {
			msg += "; the groups there: " + strings.Join(groups, ", ")
		}
	}
	return exitcode.With(exitcode.NotFound, errors.New(msg))
}

// clusterView is the group and its instances, as `baton cluster` shows them.
type clusterView struct {
	Group     string           `json:"group"`
	State     roles.GroupState `json:"state"`
	Instances []instanceView   `json:"instances"`
	// DeathReports are the runners a member declared dead for the standby
	// to take over (the group's dead/ znode), while they wait.
	DeathReports []string `json:"death_reports,omitempty"`
	// At is when it was read.
	At time.Time `json:"at"`
}

// instanceView is one instance; a part that could not be read is left out
// and its error recorded.
type instanceView struct {
	Name        string `json:"name"`
	Role        string `json:"role,omitempty"`
	TakenOverBy string `json:"taken_over_by,omitempty"`
	// WatchedBy are the members whose ring watch reads this one's heartbeat.
	WatchedBy      []string  `json:"watched_by,omitempty"`
	Health         string    `json:"health,omitempty"`
	HeartbeatAgeMS *int64    `json:"heartbeat_age_ms,omitempty"`
	Task           *taskView `json:"task,omitempty"`
	// Crawlers are the crawlers the instance's binary carries.
	Crawlers []roles.CrawlerInfo `json:"crawlers,omitempty"`
	Errors   []string            `json:"errors,omitempty"`
}

// taskView is the state of an instance's Task.
type taskView struct {
	Status    string `json:"status"`
	Requests  int    `json:"requests"`
	NextIndex int    `json:"next_index"`
	OK        int    `json:"ok"`
	Failed    int    `json:"failed"`
	Holder    string `json:"holder,omitempty"`
	Epoch     int64  `json:"epoch"`
	// Job is the crawl job whose batch the Task runs now (only while it
	// is processing: an ended Task keeps the ID of its last batch's job).
	Job string `json:"job,omitempty"`
}

// readCluster reads GroupState and every instance's node, heartbeat and
// Task.
func readCluster(ctx context.Context, c *metadata.Cluster, now time.Time) (clusterView, error) {
	gs, _, err := c.GetGroup(ctx)
	if errors.Is(err, metadata.ErrNotFound) {
		return clusterView{}, noGroup(ctx, c)
	}
	if err != nil {
		return clusterView{}, fmt.Errorf("group %s: %w", c.Group, err)
	}
	v := clusterView{Group: c.Group, State: gs, At: now.UTC(), Instances: []instanceView{}}
	names := append(append([]string{}, gs.CurrentCrawler...), gs.FailCrawler...)
	roles.SortNames(names)
	members, _ := gs.Members()
	if reports, err := c.Store.Children(ctx, c.ReportsPath()); err == nil {
		roles.SortNames(reports)
		v.DeathReports = reports
	}
	for _, n := range names {
		in := instanceView{Name: n}
		if slices.Contains(members, n) {
			in.WatchedBy = roles.RingWatchersOf(members, n, roles.RingWatchers)
		}
		if ns, _, err := c.GetNode(ctx, n); err == nil {
			in.Role, in.TakenOverBy = string(ns.Role), ns.TakenOverBy
		} else {
			in.Errors = append(in.Errors, "node: "+err.Error())
		}
		if hb, _, err := c.GetHeartbeat(ctx, n); err == nil {
			in.Health = string(hb.HealthyState)
			if a, err := hb.Age(now); err == nil {
				ms := a.Milliseconds()
				in.HeartbeatAgeMS = &ms
			}
		} else {
			in.Errors = append(in.Errors, "heartbeat: "+err.Error())
		}
		if t, _, err := c.GetTask(ctx, n); err == nil {
			in.Task = &taskView{Status: string(t.RunningStatus), Requests: len(t.RunningContent), NextIndex: t.NextIndex,
				OK: t.RunningResult.SuccessCount, Failed: t.RunningResult.FailCount, Holder: t.Holder, Epoch: t.Epoch}
			if t.Job != nil && t.RunningStatus == roles.TaskProcessing {
				in.Task.Job = t.Job.ID
			}
		} else {
			in.Errors = append(in.Errors, "task: "+err.Error())
		}
		if cr, err := c.GetCrawlers(ctx, n); err == nil {
			in.Crawlers = cr.List
		} else {
			in.Errors = append(in.Errors, "crawlers: "+err.Error())
		}
		v.Instances = append(v.Instances, in)
	}
	return v, nil
}

// printCluster writes the GroupState summary and one row per instance.
func printCluster(ctx context.Context, w io.Writer, c *metadata.Cluster, now time.Time) error {
	v, err := readCluster(ctx, c, now)
	if err != nil {
		return err
	}
	gs := v.State
	fmt.Fprintf(w, "group %s: %d runners, %d backups, standby_id %q\n", c.Group, gs.TotalRunner, gs.TotalBackup, gs.StandbyID)
	fmt.Fprintf(w, "current_runner %v  current_backup %v  fail_crawler %v\n", gs.CurrentRunner, gs.CurrentBackup, gs.FailCrawler)
	if len(v.DeathReports) > 0 {
		fmt.Fprintf(w, "reported dead, waiting for the standby: %v\n", v.DeathReports)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "INSTANCE\tROLE\tHEALTH\tHEARTBEAT AGE\tTASK\tPROGRESS\tHOLDER/EPOCH\tWATCHED BY\tCRAWLERS")
	for _, in := range v.Instances {
		role, health, age, task, progress, holder := "?", "?", "?", "error", "", ""
		if in.Role != "" {
			role = in.Role
			if in.TakenOverBy != "" {
				role += " (by " + in.TakenOverBy + ")"
			}
		} else if len(in.Errors) > 0 {
			role = "error: " + in.Errors[0]
		}
		if in.Health != "" {
			health = in.Health
		}
		if in.HeartbeatAgeMS != nil {
			age = time.Duration(*in.HeartbeatAgeMS * int64(time.Millisecond)).String()
		}
		if t := in.Task; t != nil {
			task = t.Status
			if t.Job != "" {
				task += " (job " + t.Job + ")"
			}
			if t.Requests > 0 {
				progress = fmt.Sprintf("%d/%d (ok %d, failed %d)", t.NextIndex, t.Requests, t.OK, t.Failed)
			}
			holder = fmt.Sprintf("%s/%d", t.Holder, t.Epoch)
		}
		watchedBy := strings.Join(in.WatchedBy, ",")
		if watchedBy == "" {
			watchedBy = "-"
		}
		var carried []string
		for _, ci := range in.Crawlers {
			if ci.Name != roles.BuiltinCrawler {
				carried = append(carried, ci.Name+"@"+ci.Version)
			}
		}
		crawlers := "builtin"
		if len(carried) > 0 {
			crawlers += "," + strings.Join(carried, ",")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", in.Name, role, health, age, task, progress, holder, watchedBy, crawlers)
	}
	return tw.Flush()
}
