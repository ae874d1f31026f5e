package activities

import (
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"
)

// Error types of the activities' failures (temporal.ApplicationError).
//
// A corrupted znode has none of them: it is a *metadata.CorruptError,
// logged with the znode and the field at fault, and retried like any
// other error, so the activity goes on once an operator has repaired the
// znode (see Activities.corrupt).
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

func fenced(format string, args ...any) error {
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf(format, args...), ErrTypeFenced, errFenced)
}

func lost(format string, args ...any) error {
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf(format, args...), ErrTypeLost, nil)
}

func badMember(err error) error {
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
