// Command baton is Baton's command-line client: it shows the cluster,
// assigns Tasks and runs crawl jobs. Global settings (where ZooKeeper,
// Temporal and the job store are; the group) can be set from the
// environment (BATON_<FLAG>, shown in --help); a command's own flags
// cannot.
//
// Data goes to stdout (a table, or JSON with --output json), hints, links
// and progress to stderr. The exit codes are package exitcode's, shared
// with baton-worker.
package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/batoncrawl/baton/activities/cmdline/exitcode"
	"github.com/batoncrawl/baton/activities/cmdline/flagenv"
	"github.com/batoncrawl/baton/activities/cmdline/initgc"
	"github.com/batoncrawl/baton/activities/cmdline/version"
	"github.com/batoncrawl/baton/activities/connect"
	"github.com/batoncrawl/baton/roles"
)

// usage returns a bad-usage error (exit code 2).
func usage(format string, args ...any) error { return exitcode.Usagef(format, args...) }

// globals are the settings every command shares.
type globals struct {
	zk    connect.ZooKeeper
	group string
	// connectTimeout bounds each attempt to reach a server (ZooKeeper,
	// Temporal, the job store).
	connectTimeout time.Duration
}

// defaultConnectTimeout is --connect-timeout's default.
const defaultConnectTimeout = 10 * time.Second

func main() {
	os.Exit(execute(os.Args[1:], os.Stdout, os.Stderr))
}

// execute runs the CLI with args, writing to stdout and stderr, and returns
// the exit code.
func execute(args []string, stdout, stderr io.Writer) int {
	root := newRootCmd(stdout, stderr)
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	if err == nil {
		return exitcode.OK
	}
	fmt.Fprintf(stderr, "baton: %v\n", err)
	code := exitcode.Of(err)
	if code == exitcode.Failure && isArgsError(err) {
		code = exitcode.Usage
	}
	if code == exitcode.Usage {
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
	}
	return code
}

// newRootCmd is the baton command with all its subcommands.
func newRootCmd(stdout, stderr io.Writer) *cobra.Command {
	g := &globals{zk: connect.DefaultZooKeeper(), group: roles.DefaultGroup, connectTimeout: defaultConnectTimeout}
	root := &cobra.Command{
		Use:     "baton",
		Short:   "Baton: a crawler cluster that never loses a page",
		Version: version.String(),
		Long: `baton shows a Baton cluster, assigns Tasks and runs crawl jobs on it.

The global settings below (where ZooKeeper, Temporal and the job store are,
and the group) can also be set with the environment variable shown with
each; a command's own flags are read from the command line only.

Data goes to stdout: a table, or JSON with --output json (for scripts);
hints, links and progress go to stderr.

Exit codes (the same for baton-worker):
  0 success                      4 the job ended cancelled or failed (--wait)
  1 failure at run time          5 ZooKeeper, Temporal or the store unreachable
  2 bad usage or input           6 crawl --wait: no live Runner (the job stays queued)
  3 not found (no such job,    130 crawl --wait interrupted (Ctrl-C): the job goes on
    group or instance)

Secrets are read from files or the environment, never from the command
line: ZooKeeper digest credentials user:password from --zk-auth-file or
$BATON_ZK_AUTH, a Temporal API key from --temporal-api-key-file or
$BATON_TEMPORAL_API_KEY, and the mTLS private key from
--temporal-tls-key-file.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := flagenv.Bind(cmd.Flags()); err != nil {
				return exitcode.With(exitcode.Usage, err)
			}
			if g.connectTimeout <= 0 {
				return usage("--connect-timeout: is %v, must be > 0", g.connectTimeout)
			}
			if cmd.Annotations[annotationGC] == "" {
				initgc.Restore()
			}
			return nil
		},
	}
	root.SetVersionTemplate("baton {{.Version}}\n")
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return exitcode.With(exitcode.Usage, err) })
	pf := root.PersistentFlags()
	g.zk.AddFlags(pf)
	pf.StringVar(&g.group, "group", g.group, "cluster group name")
	pf.DurationVar(&g.connectTimeout, "connect-timeout", g.connectTimeout, "give up reaching ZooKeeper, Temporal or the job store after this long (exit code 5)")
	tf := &temporalFlags{conn: connect.DefaultTemporal(), g: g}
	tf.add(root)
	flagenv.Document(root.PersistentFlags(), "BATON")
	root.AddCommand(clusterCmd(g), taskCmd(g), crawlCmd(g, tf), demoSiteCmd(), storeCmd(g, tf), sinkCmd(g, tf), codecServerCmd(tf), scheduleCmd(g, tf))
	root.AddCommand(jobCmds(g, tf)...)
	return root
}

// isArgsError reports whether err is cobra's complaint about the
// arguments or the command (flag errors go through SetFlagErrorFunc).
func isArgsError(err error) bool {
	s := err.Error()
	for _, p := range []string{"unknown command", "accepts ", "requires at least", "requires at most", "received "} {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}
