package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/batoncrawl/baton/activities/jobs"
)

// rotateStore is the job store as `baton store rotate-key` holds it.
type rotateStore interface {
	jobs.RotateStore
	io.Closer
}

func (s *storeFlags) openRotate(ctx context.Context, g *globals) (rotateStore, error) {
	js, err := s.openWith(ctx, g, true)
	if err != nil {
		return nil, err
	}
	return js, nil
}

// rotateKeyCmd is `baton store rotate-key`: the group's secrets key
// replaced, every job's data key re-wrapped for the new one.
func rotateKeyCmd(g *globals, tf *temporalFlags) *cobra.Command {
	var sf secretFlags
	var newKey string
	cmd := &cobra.Command{
		Use:   "rotate-key",
		Short: "Replace the group's secrets key: every job's data key is re-wrapped for the new key, its sealed secrets left as they are",
		Long: `Re-wraps the data key of every job of the group whose secrets are sealed for the
current key (--secrets-key-file, the workers' private key) for the new key
(--new-key-file, made 0600 when it does not exist), and records the new key as
the group's in ZooKeeper (its ID and its public key, which submitters seal
with). Secrets of the earlier format, sealed directly with the group's key,
are sealed again under a data key of their own. Run it again after an
interruption: it finishes the rest. Then give every worker the new key file
and restart them: a worker with the old key can no longer open the jobs'
secrets.`,
		Example: `  baton store rotate-key --secrets-key-file /run/secrets/baton-secrets.key --new-key-file /run/secrets/baton-secrets.key.new`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if newKey == "" {
				return usage("--new-key-file: the file of the new key (made when it does not exist)")
			}
			from, err := jobs.LoadSecretsKey(sf.keyPath(&tf.st))
			if err != nil {
				return usage("--secrets-key-file: %v", err)
			}
			to, _, err := jobs.EnsureSecretsKey(newKey)
			if err != nil {
				return usage("--new-key-file: %v", err)
			}
			if to.KeyID() == from.KeyID() {
				return usage("--new-key-file holds the current key %s: give a new one", from.KeyID())
			}
			c, closeZK, err := g.dial(cmd.Context())
			if err != nil {
				return err
			}
			defer closeZK()
			p := jobs.SecretsKeyPath(g.zk.Root, g.group)
			cur, v, err := c.Store.Get(cmd.Context(), p)
			if err != nil {
				return fmt.Errorf("the group's secrets key in %s: %w", p, err)
			}
			if string(cur) != from.KeyID() && string(cur) != to.KeyID() {
				return usage("group %s seals with key %s, --secrets-key-file is key %s: give the group's key", g.group, cur, from.KeyID())
			}
			js, err := tf.st.openRotate(cmd.Context(), g)
			if err != nil {
				return err
			}
			defer js.Close()
			done, err := jobs.RotateSecrets(cmd.Context(), js, g.group, from, to)
			if err != nil {
				return err
			}
			if string(cur) != to.KeyID() {
				if _, err := c.Store.Set(cmd.Context(), p, []byte(to.KeyID()), v); err != nil {
					return fmt.Errorf("record the new key as the group's in %s: %w", p, err)
				}
			}
			if err := jobs.PublishSecretsKey(cmd.Context(), c.Store, g.zk.Root, g.group, to); err != nil {
				return err
			}
			return printRotated(cmd.OutOrStdout(), done, from, to)
		},
	}
	cmd.Flags().StringVar(&sf.keyFile, "secrets-key-file", "", "the group's current secrets key (default <data-dir>/secrets.key)")
	cmd.Flags().StringVar(&newKey, "new-key-file", "", "the new secrets key: a file made by this command (0600) or by openssl rand -hex 32")
	return cmd
}

func printRotated(w io.Writer, done jobs.Rotated, from, to *jobs.Sealer) error {
	_, err := fmt.Fprintf(w, "secrets key %s replaced by %s: %d jobs' data keys re-wrapped, %d jobs of the earlier format sealed again\n",
		from.KeyID(), to.KeyID(), done.Rewrapped, done.Resealed)
	if err == nil && len(done.Skipped) > 0 {
		_, err = fmt.Fprintf(w, "left as they are, sealed for neither key: %s\n", strings.Join(done.Skipped, ", "))
	}
	if err == nil {
		_, err = fmt.Fprintln(w, "now give every worker the new key file (--secrets-key-file) and restart them")
	}
	return err
}
