package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/batoncrawl/baton/activities/jobs"
)

// This file holds what a hand-out reads and locks before it looks at the
// host leases (hosts.go): the job's politeness policy, whose budget it
// keeps, and the locks of the job and of the group's leases.

// hostPolicy is what a job's leases keep (jobs.Spec.Politeness and
// PolitenessScope), read once per job from its spec.
type hostPolicy struct {
	parallelism int
	delayMS     int64
	robots      bool
	ttlMS       int64
	// shared: the job keeps the group's budget, whose release rows are
	// those of job '' (pool); else the job's own.
	shared bool
	pool   string
}

// sharedFlag is the shared column of the policy's leases.
func (p hostPolicy) sharedFlag() int {
	if p.shared {
		return 1
	}
	return 0
}

func (s *core) policy(ctx context.Context, q querier, job string) (hostPolicy, error) {
	if v, ok := s.policies.Load(job); ok {
		return v.(hostPolicy), nil
	}
	var data string
	err := q.QueryRowContext(ctx, s.q(`SELECT spec FROM baton_jobs WHERE id = ?`), job).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
		return hostPolicy{}, fmt.Errorf("job %s in %s: %w", job, s.id, jobs.ErrNoJob)
	}
	if err != nil {
		return hostPolicy{}, err
	}
	spec, err := jobs.DecodeSpec([]byte(data))
	if err != nil {
		return hostPolicy{}, fmt.Errorf("job %s in %s: %w", job, s.id, err)
	}
	p, delay, robots := spec.Politeness()
	pol := hostPolicy{parallelism: p, delayMS: delay.Milliseconds(), robots: robots, ttlMS: jobs.LeaseTTL(spec.Timers).Milliseconds(),
		shared: !spec.PerJobPoliteness(), pool: job}
	if pol.shared {
		pol.pool = ""
	}
	s.policies.Store(job, pol)
	return pol, nil
}

// lockJobNow takes the job's row lock up to the commit (PostgreSQL: the
// job's hand-outs and lease writes run one at a time; SQLite has one
// writer at a time already), and the group's lease lock after it when
// the job keeps the group's budget (shared), and returns nowMS, in one
// statement on PostgreSQL: the locks are taken, and the clock read, in
// nested queries whose rows come only out of the locking subquery
// (PostgreSQL never pulls a subquery with FOR UPDATE, or one calling a
// volatile function, up into its parent), so after the locks are
// granted, as a second statement would read it.
func (s *core) lockJobNow(ctx context.Context, tx dbtx, job string, shared bool) (int64, error) {
	if s.d.forUpdate == "" {
		return s.nowMS(ctx, tx)
	}
	var now int64
	err := tx.QueryRowContext(ctx, s.lockJobNowQuery(shared), job).Scan(&now)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("job %s in %s: %w", job, s.id, jobs.ErrNoJob)
	}
	if err != nil {
		return 0, fmt.Errorf("job %s: lock the job: %w", job, err)
	}
	return now, nil
}

// lockJobNowQuery is lockJobNow's statement on PostgreSQL: job.
func (s *core) lockJobNowQuery(shared bool) string {
	locked := `(SELECT id FROM baton_jobs WHERE id = ?` + s.d.forUpdate + `) AS locked`
	if shared && s.d.lockHosts != "" {
		locked = `(SELECT ` + s.d.lockHosts + ` FROM ` + locked + ` OFFSET 0) AS pooled`
	}
	return s.q(`SELECT ` + s.d.nowMS + ` FROM ` + locked)
}

func (s *core) nowMS(ctx context.Context, q querier) (int64, error) {
	var now int64
	err := q.QueryRowContext(ctx, `SELECT `+s.d.nowMS).Scan(&now)
	return now, err
}
