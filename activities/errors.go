package activities

import (
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"
)

// Error types that workflows tell apart; they are not retried.
const (
	ErrTypeFenced   = "BatonFenced"
	ErrTypeLost     = "BatonClaimLost"
	ErrTypeCorrupt  = "BatonCorrupt"
	ErrTypeNotReady = "BatonNotReady"
)

var errFenced = errors.New("fenced: this instance no longer holds the task")

func fenced(format string, args ...any) error {
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf(format, args...), ErrTypeFenced, errFenced)
}

func lost(format string, args ...any) error {
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf(format, args...), ErrTypeLost, nil)
}

// IsFenced reports whether err (from an activity) is a fencing error.
func IsFenced(err error) bool { return hasType(err, ErrTypeFenced) }

// IsLost reports whether err (from an activity) is a lost claim.
func IsLost(err error) bool { return hasType(err, ErrTypeLost) }

func hasType(err error, t string) bool {
	var ae *temporal.ApplicationError
	return errors.As(err, &ae) && ae.Type() == t
}
