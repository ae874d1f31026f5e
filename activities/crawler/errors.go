package crawler

import "errors"

// retryError marks a handler error as worth another try.
type retryError struct{ err error }

func (e retryError) Error() string { return e.err.Error() }
func (e retryError) Unwrap() error { return e.err }

// Retry marks err as transient: the page is fetched and handled again,
// after the job's backoff, up to the job's retries; then it fails with
// err. Errors not marked are permanent: the page fails at once. Retry(nil)
// is nil.
func Retry(err error) error {
	if err == nil {
		return nil
	}
	return retryError{err}
}

// IsRetry reports whether err (or an error it wraps) was marked by Retry.
func IsRetry(err error) bool {
	var r retryError
	return errors.As(err, &r)
}

// ErrDrop is what a Pipeline returns to drop an item (it is counted, not
// recorded, and the page does not fail).
var ErrDrop = errors.New("item dropped")

// ErrPageClosed is what a Page's actions return once its handler's time
// is over (Budget) or the handler has returned.
var ErrPageClosed = errors.New("page closed: its handler has returned or ran out of time")
