package jobs

import (
	"context"
	"errors"
	"fmt"
)

// RotateStore is the store as a key rotation holds it.
type RotateStore interface {
	Jobs(ctx context.Context) ([]JobInfo, error)
	Secrets(ctx context.Context, job string) (keyID string, sealed []byte, err error)
	ReplaceSecrets(ctx context.Context, job, from, to string, sealed []byte) error
}

// Rotated counts what RotateSecrets did.
type Rotated struct {
	// Rewrapped jobs had their data key wrapped again, their sealed data
	// unchanged; Resealed were of the earlier format (sealed directly
	// with the group's key) and are now in an envelope.
	Rewrapped, Resealed int
	// Skipped jobs are sealed for neither key (another group's, or a key
	// before from): left as they are.
	Skipped []string
}

// RotateSecrets re-wraps for to the data keys of every job of group
// sealed for from. A job already of to is left (a rotation run again
// after an interruption finishes the rest).
func RotateSecrets(ctx context.Context, st RotateStore, group string, from, to *Sealer) (Rotated, error) {
	var out Rotated
	all, err := st.Jobs(ctx)
	if err != nil {
		return out, err
	}
	for _, j := range all {
		if j.Group != group {
			continue
		}
		keyID, sealed, err := st.Secrets(ctx, j.ID)
		if errors.Is(err, ErrNoSecrets) {
			continue
		}
		if err != nil {
			return out, err
		}
		switch keyID {
		case to.KeyID():
			continue
		case from.KeyID():
		default:
			out.Skipped = append(out.Skipped, j.ID)
			continue
		}
		_, _, isEnvelope, _ := envelope(sealed)
		moved, err := from.Rewrap(j.ID, sealed, to)
		if err != nil {
			return out, fmt.Errorf("rotate the secrets key: %w", err)
		}
		if err := st.ReplaceSecrets(ctx, j.ID, from.KeyID(), to.KeyID(), moved); err != nil {
			return out, fmt.Errorf("rotate the secrets key: %w", err)
		}
		if isEnvelope {
			out.Rewrapped++
		} else {
			out.Resealed++
		}
	}
	return out, nil
}
