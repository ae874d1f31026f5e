package metadata

import (
	"context"
	"time"
)

// WaitAny blocks until one of the watch channels fires (is closed or
// receives), d passes, or ctx ends; only the last is an error. It is how
// an activity waits on several one-shot watches at once (re-arm them after
// it returns). Safe for concurrent use; it leaves no goroutine behind.
func WaitAny(ctx context.Context, d time.Duration, chans ...<-chan struct{}) error {
	merged := make(chan struct{}, 1)
	stop := make(chan struct{})
	defer close(stop)
	for _, ch := range chans {
		go func(ch <-chan struct{}) {
			select {
			case <-ch:
				select {
				case merged <- struct{}{}:
				default:
				}
			case <-stop:
			}
		}(ch)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-merged:
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}
