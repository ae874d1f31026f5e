package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
)

// This file readies a job's run on a worker: its spec read once, the
// operator's limits applied, its secrets opened, its options compiled.

// job returns the job's run on this worker, readied once (run) from its
// spec in the store and kept.
func (r *BatchRunner) job(ctx context.Context, job string, log *slog.Logger) (*jobRun, error) {
	if v, ok := r.specs.Load(job); ok {
		return v.(*jobRun), nil
	}
	s, err := r.Store.Spec(ctx, job)
	if err != nil {
		return nil, err
	}
	jr, err := r.run(ctx, s, nil, false, log)
	if err != nil {
		return nil, err
	}
	if v, loaded := r.specs.LoadOrStore(job, jr); loaded {
		return v.(*jobRun), nil
	}
	return jr, nil
}

// run readies a job's run on this worker from its spec s. Its robots.txt
// files are kept in the store once stored is closed (nil: the job is
// stored already). A warm-up's run (Warm) fetches the files it claimed
// (it does not wait for its own claims).
func (r *BatchRunner) run(ctx context.Context, s Spec, stored <-chan struct{}, warm bool, log *slog.Logger) (*jobRun, error) {
	// The operator's limits first: a job above them is refused before
	// its secrets are opened or anything fetched (its bodies directory
	// resolved under the bodies root).
	s, bodiesRoot, err := r.Limits.apply(s)
	if err != nil {
		return nil, err
	}
	if len(s.Secrets) > 0 {
		if s, err = r.openSecrets(ctx, s); err != nil {
			return nil, err
		}
	}
	// Compiled once per job: the defaults, the validation and the
	// selectors are not worked out again for every page.
	if s.Options, err = s.Options.Compile(); err != nil {
		return nil, fmt.Errorf("%w: options: %w", ErrBadSpec, err)
	}
	// The job's robots.txt files are kept in the store: a host's is
	// fetched once for the job, whichever Runners crawl it.
	s.Options.Robots = jobRobots{store: r.Store, job: s.ID, stored: stored, warm: warm}
	jr := &jobRun{spec: s, bodiesRoot: bodiesRoot, client: r.crawlerClient(s.Options.DenyPrivate)}
	if br, ok := r.Store.(BaselineBatchReader); ok && s.Baseline != "" {
		jr.baselines = &baselineReads{store: br, job: s.Baseline}
	}
	if jr.crawler, jr.options, err = r.crawlerFor(s); err != nil {
		return nil, err
	}
	if err := jr.start(ctx, log); err != nil {
		return nil, err // retried with the activity; not kept
	}
	return jr, nil
}

// openSecrets puts the job's sealed secrets into its spec (in memory
// only). A job whose secrets this worker cannot open cannot run: its
// batch fails, saying why (never with a value).
func (r *BatchRunner) openSecrets(ctx context.Context, s Spec) (Spec, error) {
	keyID, sealed, err := r.Store.Secrets(ctx, s.ID)
	if errors.Is(err, ErrNoSecrets) {
		return s, fmt.Errorf("%w: its secrets (%s) are not in the store", ErrBadSpec, strings.Join(s.Secrets, ", "))
	}
	if err != nil {
		return s, err
	}
	if r.Sealer == nil {
		return s, fmt.Errorf("%w: it has secrets and this worker has no secrets key (--secrets-key-file)", ErrBadSpec)
	}
	if keyID != r.Sealer.KeyID() {
		return s, fmt.Errorf("%w: its secrets were sealed for key %s, this worker has key %s: give every worker of the group the group's --secrets-key-file (after baton store rotate-key, the new one)",
			ErrBadSpec, keyID, r.Sealer.KeyID())
	}
	sec, err := r.Sealer.Open(s.ID, sealed)
	if err != nil {
		return s, fmt.Errorf("%w: %w", ErrBadSpec, err)
	}
	return sec.Apply(s), nil
}
