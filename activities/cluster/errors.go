package cluster

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/batoncrawl/baton/activities/metadata"
	"github.com/batoncrawl/baton/roles"
)

// Error types of the activities' failures (temporal.ApplicationError).
//
// A corrupted znode has none of them: it is a *metadata.CorruptError,
// logged with the znode and the field at fault, and retried like any
// other error, so the activity goes on once an operator has repaired the
// znode (see Deps.Corrupt).
const (
	// ErrTypeFenced: this instance no longer holds the Task (not retried).
	ErrTypeFenced = "BatonFenced"
	// ErrTypeLost: another instance holds the claim (not retried).
	ErrTypeLost = "BatonClaimLost"
	// ErrTypeBadMember: the member cannot join its group, because its name
	// is invalid or its NodeState belongs to another group under the same
	// ZooKeeper root. It is the instance's configuration that is wrong
	// (--name, --group, --zk-root), so it is not retried.
	ErrTypeBadMember = "BatonBadMember"
	// ErrTypeNotReady: a rejoining member must wait until another
	// instance has handed over or finished its old Task (retried).
	ErrTypeNotReady = "BatonNotReady"
)

var errFenced = errors.New("fenced: this instance no longer holds the task")

// Fenced returns a fencing error (ErrTypeFenced, not retried).
func Fenced(format string, args ...any) error {
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf(format, args...), ErrTypeFenced, errFenced)
}

// Lost returns a lost claim (ErrTypeLost, not retried).
func Lost(format string, args ...any) error {
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf(format, args...), ErrTypeLost, nil)
}

// BadMember returns err as a member that cannot join its group
// (ErrTypeBadMember, not retried).
func BadMember(err error) error {
	return temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeBadMember, err)
}

// IsFenced reports whether err (from an activity) is a fencing error.
func IsFenced(err error) bool { return hasType(err, ErrTypeFenced) }

// IsLost reports whether err (from an activity) is a lost claim.
func IsLost(err error) bool { return hasType(err, ErrTypeLost) }

func hasType(err error, t string) bool {
	var ae *temporal.ApplicationError
	return errors.As(err, &ae) && ae.Type() == t
}

// Corrupt logs a corrupted-znode error (a *metadata.CorruptError in err's
// chain) with the znode and the field at fault, so that an operator can
// repair it, and returns err unchanged; other errors are not logged.
//
// The error stays retryable on purpose: an operator can repair the znode
// while the workflow waits, and the activity's next attempt then goes on
// (logging the znode again at each attempt until it is repaired). Callers
// that can do without the znode (a NodeState or Task replaced on Register,
// a heartbeat counted as missed) log it and go on instead. Only errors that
// no repair of a znode fixes are non-retryable (ErrTypeBadMember).
func (d *Deps) Corrupt(ctx context.Context, err error) error {
	var ce *metadata.CorruptError
	if errors.As(err, &ce) {
		field := "(unknown)"
		var fe *roles.FieldError
		if errors.As(ce.Err, &fe) {
			field = fe.Object + "." + fe.Field
		}
		d.Logger(ctx).Error("corrupted metadata", "znode", ce.Path, "field", field, "err", ce.Err)
	}
	return err
}

// IsCorrupt reports whether err is a corrupted znode (a
// *metadata.CorruptError in its chain).
func IsCorrupt(err error) bool {
	var ce *metadata.CorruptError
	return errors.As(err, &ce)
}
