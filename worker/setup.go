package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"go.temporal.io/sdk/client"

	"github.com/batoncrawl/baton/activities/cmdline/exitcode"
	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/activities/jobs/sqlstore"
	"github.com/batoncrawl/baton/activities/metadata"
)

// dialMetadata connects to the group's ZooKeeper within dctx and checks
// its root.
func dialMetadata(dctx context.Context, cfg Config, log *slog.Logger) (*metadata.ZooKeeper, error) {
	zc, err := cfg.ZooKeeper(log)
	if err != nil {
		return nil, exitcode.With(exitcode.Usage, err)
	}
	store, err := metadata.DialZooKeeper(dctx, zc)
	if err != nil {
		return nil, cfg.ZK.Unreachable(err, cfg.ConnectTimeout)
	}
	if err := store.CheckRoot(dctx, cfg.ZK.Root); err != nil {
		store.Close()
		return nil, exitcode.With(exitcode.Usage, err)
	}
	if zc.Auth == "" {
		log.Warn("zookeeper without authentication: any client of the ensemble may read and change the group's znodes, "+
			"plain Tasks included; give digest credentials with --zk-auth-file (BATON_ZK_AUTH_FILE)", "root", cfg.ZK.Root)
	}
	return store, nil
}

// dialTemporal connects to Temporal within dctx and registers Baton's
// search attributes.
func dialTemporal(dctx context.Context, cfg Config, log *slog.Logger, metrics *metricsServer) (client.Client, error) {
	topts, err := cfg.TemporalOptions(log.With("component", "temporal"), metrics.Temporal)
	if err != nil {
		return nil, exitcode.With(exitcode.Usage, err)
	}
	tc, err := client.DialContext(dctx, topts)
	if err != nil {
		return nil, cfg.Temporal.Unreachable(err, cfg.ConnectTimeout)
	}
	if err := EnsureSearchAttributes(dctx, tc, cfg.Temporal.Namespace); err != nil {
		log.Warn("could not register Baton's search attributes; register them with `temporal operator search-attribute create`", "err", err)
	}
	return tc, nil
}

// openJobStore opens the job store and binds it to the group: the group's
// crawl data must be in one store, the first worker records it, the
// others check it.
func openJobStore(dctx context.Context, cfg Config, log *slog.Logger, store metadata.Store) (*sqlstore.Store, error) {
	pw, err := cfg.StoreSecurity.Password()
	if err != nil {
		return nil, err
	}
	js, err := sqlstore.Open(dctx, cfg.StoreConfig(pw))
	if errors.Is(err, context.DeadlineExceeded) {
		return nil, exitcode.With(exitcode.Unavailable, fmt.Errorf("job store: did not answer within %v (%w); "+
			"check --store (BATON_STORE) and that the database is reachable from this machine", cfg.ConnectTimeout, err))
	}
	if err != nil {
		return nil, fmt.Errorf("job store: %w", err)
	}
	if err := jobs.BindGroup(dctx, store, cfg.ZK.Root, cfg.Group, js.Identity()); err != nil {
		js.Close()
		return nil, err
	}
	log.Info("job store", "store", js.Identity().String())
	return js, nil
}

// groupKeys opens the secrets key of the group's jobs (made when missing)
// and publishes the worker's operator limits.
func groupKeys(dctx context.Context, cfg Config, log *slog.Logger, store metadata.Store) (*jobs.Sealer, jobs.Limits, error) {
	sealer, created, err := jobs.EnsureSecretsKey(cfg.SecretsKeyPath())
	if err != nil {
		return nil, jobs.Limits{}, exitcode.With(exitcode.Usage, fmt.Errorf("--secrets-key-file: %w", err))
	}
	if err := jobs.BindSecretsKey(dctx, store, cfg.ZK.Root, cfg.Group, sealer.KeyID()); err != nil {
		// Not fatal: a worker with another key still crawls every job
		// without secrets; one with secrets fails here, saying why.
		log.Error("this worker cannot open the secrets of the group's jobs", "err", err)
	} else if err := jobs.PublishSecretsKey(dctx, store, cfg.ZK.Root, cfg.Group, sealer); err != nil {
		log.Error("the group's public secrets key is not published: submitters need the key file", "err", err)
	}
	limits, err := cfg.Limits()
	if err != nil {
		return nil, jobs.Limits{}, exitcode.With(exitcode.Usage, err)
	}
	if err := publishLimits(dctx, log, store, cfg, limits); err != nil {
		return nil, jobs.Limits{}, err
	}
	if created {
		log.Warn("made a new secrets key for crawl jobs' secrets: give every worker and CLI of the group this file (--secrets-key-file)",
			"file", cfg.SecretsKeyPath(), "key_id", sealer.KeyID())
	} else {
		log.Info("secrets key", "file", cfg.SecretsKeyPath(), "key_id", sealer.KeyID())
	}
	return sealer, limits, nil
}

// publishLimits writes the worker's operator limits as its group's (the
// znode the CLI checks a job against before submitting it). A worker
// started with other limits than the group's warns, naming both, and
// writes its own: each Runner enforces its own limits whatever the znode
// says, a difference corrupts nothing, and an operator changing the
// limits restarts the workers one by one (refusing, as a store of another
// group is refused, would stop the first restarted one).
func publishLimits(ctx context.Context, log *slog.Logger, store metadata.Store, cfg Config, l jobs.Limits) error {
	prev, differ, err := jobs.PublishLimits(ctx, store, cfg.ZK.Root, cfg.Group, cfg.Name, l)
	if err != nil {
		return err
	}
	if differ {
		log.Warn("this worker's operator limits differ from the group's: writing its own (the last worker started wins; "+
			"each Runner refuses jobs above its own, the CLI checks the group's); give every worker the same limits",
			"group_limits", prev.Limits.String(), "written_by", prev.Worker, "worker_limits", l.String(),
			"znode", jobs.LimitsPath(cfg.ZK.Root, cfg.Group))
		return nil
	}
	log.Info("operator limits", "limits", l.String(), "max_result_detail", cfg.MaxResultDetail)
	return nil
}
