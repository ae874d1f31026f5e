package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/batoncrawl/baton/activities/cmdline/exitcode"
	"github.com/batoncrawl/baton/activities/metadata"
	"github.com/batoncrawl/baton/roles"
)

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func taskCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "task", Short: "Assign and inspect the Task of one instance (the reference's direct assignment)"}
	var (
		node, file   string
		urls         []string
		force        bool
		allowSecrets bool
	)
	assign := &cobra.Command{
		Use:   "assign --node NAME (--file TASK.json | --url URL...)",
		Short: "Write a Task to a Runner's Task znode; the Runner starts it at once (ZooKeeper watch)",
		Example: `  baton task assign --node sc-crawler_1 --url http://127.0.0.1:8000/a --url http://127.0.0.1:8000/b
  baton task assign --node sc-crawler_2 --file task.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if node == "" {
				return usage("--node is required")
			}
			if _, err := roles.ParseName(node); err != nil {
				return usage("--node: %v", err)
			}
			t, err := buildTask(file, urls, allowSecrets)
			if err != nil {
				return err
			}
			if secrets := t.SecretFields(); len(secrets) > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: --allow-task-secrets: %s stored in clear in the Task znode\n", strings.Join(secrets, ", "))
			}
			c, closeFn, err := g.dial(cmd.Context())
			if err != nil {
				return err
			}
			defer closeFn()
			return assignTask(cmd.Context(), c, node, t, force, cmd.OutOrStdout())
		},
	}
	assign.Flags().StringVar(&node, "node", "", "name of the Runner to assign the Task to (required)")
	assign.Flags().StringVar(&file, "file", "", "Task JSON file ('-' for stdin): {\"running_content\": [{\"task_id\", \"url\", \"method\", \"parameters\", \"header\", \"body\"}], \"cookie\", \"authorization\"}")
	assign.Flags().StringArrayVar(&urls, "url", nil, "a URL to GET (repeatable); a quick alternative to --file")
	assign.Flags().BoolVar(&force, "force", false, "replace a Task that is still running")
	assign.Flags().BoolVar(&allowSecrets, "allow-task-secrets", false,
		"write the Task even though it holds credentials (cookie, authorization, credential headers or parameters, user:password in a URL): "+
			"a plain Task keeps the reference's layout, so they are stored in clear in its Task znode (a crawl job's are sealed: baton crawl)")
	show := &cobra.Command{
		Use:   "show NAME",
		Short: "Print an instance's Task znode as JSON",
		Args:  oneArg("NAME", "the name of an instance (baton cluster lists them)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, closeFn, err := g.dial(cmd.Context())
			if err != nil {
				return err
			}
			defer closeFn()
			t, _, err := c.GetTask(cmd.Context(), args[0])
			if errors.Is(err, metadata.ErrNotFound) {
				return exitcode.With(exitcode.NotFound, fmt.Errorf("no instance %s under ZooKeeper root %s (no Task znode %s): 'baton cluster' lists the group's instances",
					args[0], c.Root, c.TaskPath(args[0])))
			}
			if err != nil {
				return fmt.Errorf("instance %s: %w", args[0], err)
			}
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			return enc.Encode(t)
		},
	}
	cmd.AddCommand(assign, show)
	return cmd
}

// buildTask reads a Task from file or builds one from urls and validates
// every request, so nothing half-valid is written. A Task holding
// credentials is refused unless allowSecrets (errTaskSecrets).
func buildTask(file string, urls []string, allowSecrets bool) (roles.Task, error) {
	t := roles.EmptyTask()
	switch {
	case file != "" && len(urls) > 0:
		return t, usage("give --file or --url, not both")
	case file != "":
		var data []byte
		var err error
		if file == "-" {
			data, err = io.ReadAll(os.Stdin)
		} else {
			data, err = os.ReadFile(file)
		}
		if err != nil {
			return t, usage("read task file: %v", err)
		}
		if err := json.Unmarshal(data, &t); err != nil {
			return t, usage("task file %s: malformed JSON: %v", file, err)
		}
		if t.RunningStatus == "" {
			t.RunningStatus = roles.TaskNothing
		}
	case len(urls) > 0:
		for i, u := range urls {
			t.RunningContent = append(t.RunningContent, roles.Request{TaskID: i, URL: u, Method: "GET"})
		}
	default:
		return t, usage("give the requests with --file or --url")
	}
	if len(t.RunningContent) == 0 {
		return t, usage("task has no requests (running_content is empty)")
	}
	// A fresh assignment starts from the beginning.
	t.RunningStatus, t.NextIndex, t.InProgressingID = roles.TaskNothing, 0, ""
	t.RunningResult, t.ResultDetail, t.Holder, t.HandedOverFrom = roles.RunningResult{}, []roles.ResultDetail{}, "", ""
	if t.Cookie == nil {
		t.Cookie = map[string]string{}
	}
	if t.Authorization == nil {
		t.Authorization = map[string]string{}
	}
	if err := t.ValidateRequests(); err != nil {
		return t, usage("invalid task: %v", err)
	}
	if secrets := t.SecretFields(); len(secrets) > 0 && !allowSecrets {
		return t, usage("the Task holds credentials (%s): a plain Task keeps the reference's layout, so they would be "+
			"stored in clear in its Task znode, readable by every ZooKeeper client its ACL lets in. Crawl with "+
			"`baton crawl` (--cookie-file, --auth-file, --header-file: sealed in the job store), or give "+
			"--allow-task-secrets to store them anyway", strings.Join(secrets, ", "))
	}
	return t, nil
}

var errBusy = errors.New("the instance's Task is still running (use --force to replace it)")

// assignTask writes t to node's Task znode with compare-and-set, keeping
// the epoch increasing.
func assignTask(ctx context.Context, c *metadata.Cluster, node string, t roles.Task, force bool, out io.Writer) error {
	ns, _, err := c.GetNode(ctx, node)
	if errors.Is(err, metadata.ErrNotFound) {
		return exitcode.With(exitcode.NotFound, fmt.Errorf("no instance %s under ZooKeeper root %s: 'baton cluster' lists the group's instances", node, c.Root))
	}
	if err != nil {
		return fmt.Errorf("node %s: %w", node, err)
	}
	if ns.Role != roles.RoleRunner {
		return usage("node %s is %s, not a runner: assign the Task to a runner (see 'baton cluster')", node, ns.Role)
	}
	cur, v, err := c.GetTask(ctx, node)
	var ce *metadata.CorruptError
	switch {
	case errors.As(err, &ce):
		_, v, err = c.Store.Get(ctx, c.TaskPath(node))
		if err != nil {
			return err
		}
	case err != nil:
		return err
	case cur.Pending() && !force:
		return fmt.Errorf("node %s: %w", node, errBusy)
	}
	t = t.Replacing(cur)
	if _, err := c.Store.Set(ctx, c.TaskPath(node), metadata.Encode(t), v); err != nil {
		return fmt.Errorf("assign task to %s: %w", node, err)
	}
	fmt.Fprintf(out, "assigned %d requests to %s (epoch %d)\n", len(t.RunningContent), node, t.Epoch)
	return nil
}
