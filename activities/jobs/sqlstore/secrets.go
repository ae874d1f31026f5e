package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/batoncrawl/baton/activities/jobs"
)

// secretStore keeps a job's sealed secrets (baton_secrets).
type secretStore struct{ *core }

// PutSecrets keeps a job's sealed secrets (see jobs.Store); the same
// again is a no-op, other ones for a stored job are refused.
func (s *secretStore) PutSecrets(ctx context.Context, job, keyID string, sealed []byte) error {
	if err := jobs.ValidID(job); err != nil {
		return err
	}
	return s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, s.q(`INSERT INTO baton_secrets (job, key_id, sealed) VALUES (?, ?, ?) ON CONFLICT (job) DO NOTHING`),
			job, keyID, sealed)
		if err != nil {
			return fmt.Errorf("job %s: store its secrets: %w", job, err)
		}
		if k, _ := res.RowsAffected(); k == 1 {
			return nil
		}
		var had []byte
		if err := tx.QueryRowContext(ctx, s.q(`SELECT sealed FROM baton_secrets WHERE job = ?`), job).Scan(&had); err != nil {
			return err
		}
		if string(had) != string(sealed) {
			return fmt.Errorf("job %s has other secrets in %s: %w", job, s.id, jobs.ErrJobExists)
		}
		return nil
	})
}

// Secrets returns a job's sealed secrets and the ID of the key that sealed
// them, or jobs.ErrNoSecrets.
func (s *secretStore) Secrets(ctx context.Context, job string) (keyID string, sealed []byte, err error) {
	err = s.read(ctx, func() error {
		return s.db.QueryRowContext(ctx, s.q(`SELECT key_id, sealed FROM baton_secrets WHERE job = ?`), job).Scan(&keyID, &sealed)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil, fmt.Errorf("job %s in %s: %w", job, s.id, jobs.ErrNoSecrets)
	}
	if err != nil {
		return "", nil, fmt.Errorf("job %s: secrets: %w", job, err)
	}
	return keyID, sealed, nil
}

// ReplaceSecrets swaps a job's sealed secrets for those of another key
// (a key rotation), if they are still those of the key from; else
// jobs.ErrNoSecrets.
func (s *secretStore) ReplaceSecrets(ctx context.Context, job, from, to string, sealed []byte) error {
	return s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, s.q(`UPDATE baton_secrets SET key_id = ?, sealed = ? WHERE job = ? AND key_id = ?`),
			to, sealed, job, from)
		if err != nil {
			return fmt.Errorf("job %s: replace its secrets: %w", job, err)
		}
		if k, _ := res.RowsAffected(); k != 1 {
			return fmt.Errorf("job %s has no secrets sealed for key %s in %s: %w", job, from, s.id, jobs.ErrNoSecrets)
		}
		return nil
	})
}
