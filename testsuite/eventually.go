package testsuite

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// pollInterval is how often Eventually and the readiness checks re-evaluate
// their condition.
const pollInterval = 50 * time.Millisecond

// Eventually calls cond every 50ms until it returns true or timeout passes.
// An error from cond does not stop the polling; it is remembered and
// reported if the deadline is reached. On timeout Eventually fails the test
// with t.Fatalf naming what was awaited, so like t.Fatal it must be called
// from the goroutine running the test.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	EventuallyEvery(t, timeout, pollInterval, what, cond)
}

// EventuallyEvery is Eventually polling every interval, for measurements
// that need a finer grain than the default.
func EventuallyEvery(t testing.TB, timeout, interval time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	if err := poll(timeout, interval, cond); err != nil {
		t.Fatalf("testsuite: waiting for %s: %v", what, err)
	}
}

// errPermanent marks a condition error that should end polling at once.
type errPermanent struct{ err error }

func (e errPermanent) Error() string { return e.err.Error() }

func (e errPermanent) Unwrap() error { return e.err }

// poll is Eventually without the testing.TB: it returns an error describing
// the timeout (and the last error cond returned) instead of failing. A cond
// error wrapped in errPermanent stops polling immediately.
func poll(timeout, interval time.Duration, cond func() (bool, error)) error {
	start := time.Now()
	deadline := start.Add(timeout)
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	var lastErr error
	attempts := 0
	for {
		attempts++
		ok, err := cond()
		if ok {
			return nil
		}
		if err != nil {
			var perm errPermanent
			if errors.As(err, &perm) {
				return perm.err
			}
			lastErr = err
		}
		if time.Now().After(deadline) {
			if lastErr != nil {
				return fmt.Errorf("condition not met within %v (%d attempts); last error: %w",
					timeout, attempts, lastErr)
			}
			return fmt.Errorf("condition not met within %v (%d attempts)", timeout, attempts)
		}
		<-ticker.C
	}
}
