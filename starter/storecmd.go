package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/batoncrawl/baton/activities/jobs"
)

// schemaStore is the job store as `baton store migrate` holds it.
type schemaStore interface {
	Identity() jobs.Identity
	// Migrate sets up or upgrades the schema and returns the version it
	// had when it was opened (0: none).
	Migrate(ctx context.Context) (from int, err error)
	// SchemaVersion is the schema version this Baton sets up.
	SchemaVersion() int
	io.Closer
}

// openSchema opens the store, creating or upgrading its schema (see
// openWith).
func (s *storeFlags) openSchema(ctx context.Context, g *globals) (schemaStore, error) {
	js, err := s.openWith(ctx, g, false)
	if err != nil {
		return nil, err
	}
	return js, nil
}

// storeCmd is `baton store migrate`: the job store's schema set up or
// upgraded once, by an operator with the rights for it, so that neither the
// CLI nor every worker start runs DDL.
func storeCmd(g *globals, tf *temporalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "store",
		Short: "Manage the job store",
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "migrate",
		Short: "Set up or upgrade the job store's schema (a worker of a new version does it too when it starts)",
		Long: `Creates Baton's tables in the job store, or upgrades those of an older
version, and records the schema version. It runs once per version: a
store already at this version is left as it is. Run it with a database
role that may create tables; workers and the CLI can then run with roles
that may only read and write rows (the CLI's read commands: only read).`,
		Example: `  baton store migrate --store postgres://admin@db.internal:5432/baton`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			js, err := tf.st.openSchema(cmd.Context(), g)
			if err != nil {
				return err
			}
			defer js.Close()
			from, err := js.Migrate(cmd.Context())
			if err != nil {
				return err
			}
			v := js.SchemaVersion()
			switch {
			case from == v:
				fmt.Printf("%s: schema version %d, nothing to do\n", js.Identity(), v)
			case from == 0:
				fmt.Printf("%s: schema version %d created\n", js.Identity(), v)
			default:
				fmt.Printf("%s: schema upgraded from version %d to %d\n", js.Identity(), from, v)
			}
			return nil
		},
	})
	cmd.AddCommand(rotateKeyCmd(g, tf))
	return cmd
}
