// Command baton is Baton's command-line client: it shows the cluster and
// assigns Tasks. Every flag can be set from the environment (BATON_<FLAG>).
//
// Exit codes: 0 success, 1 runtime failure, 2 bad usage or bad input.
package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/batoncrawl/baton/activities/connect"
	"github.com/batoncrawl/baton/activities/connect/flagenv"
	"github.com/batoncrawl/baton/roles"
)

// usageError is bad input: exit code 2.
type usageError struct{ error }

func usage(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

type globals struct {
	zk    connect.ZooKeeper
	group string
}

func main() {
	os.Exit(execute(os.Args[1:]))
}

func execute(args []string) int {
	g := &globals{zk: connect.DefaultZooKeeper(), group: roles.DefaultGroup}
	root := &cobra.Command{
		Use:   "baton",
		Short: "Baton: a crawler cluster that never loses a page",
		Long: `baton shows a Baton cluster, assigns Tasks and runs crawl jobs on it.

Every flag can also be set with an environment variable, shown with it.
Secrets are read from files or the environment, never from the command
line: ZooKeeper digest credentials user:password from --zk-auth-file or
$BATON_ZK_AUTH, a Temporal API key from --temporal-api-key-file or
$BATON_TEMPORAL_API_KEY, and the mTLS private key from
--temporal-tls-key-file.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := flagenv.Bind(cmd.Flags(), "BATON"); err != nil {
				return usageError{err}
			}
			return nil
		},
	}
	pf := root.PersistentFlags()
	g.zk.AddFlags(pf)
	pf.StringVar(&g.group, "group", g.group, "cluster group name")
	tf := &temporalFlags{conn: connect.DefaultTemporal()}
	tf.add(root)
	flagenv.Document(root.PersistentFlags(), "BATON")
	root.AddCommand(clusterCmd(g), taskCmd(g), crawlCmd(g, tf), demoSiteCmd())
	root.AddCommand(jobCmds(g, tf)...)
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	if err == nil {
		return 0
	}
	fmt.Fprintf(os.Stderr, "baton: %v\n", err)
	var ee exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	var ue usageError
	if errors.As(err, &ue) || isFlagError(err) {
		fmt.Fprintf(os.Stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
		return 2
	}
	return 1
}

func isFlagError(err error) bool {
	s := err.Error()
	for _, p := range []string{"unknown flag", "unknown command", "unknown shorthand", "invalid argument", "flag needs an argument", "accepts ", "requires at least"} {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}
