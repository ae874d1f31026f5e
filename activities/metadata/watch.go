package metadata

import (
	"context"
	"time"
)

// WaitAny blocks until one of the watch channels fires (is closed or
// receives), d passes, or ctx ends; only the last is an error, and fired
// says whether a watch fired. It is how an activity waits on several
// one-shot watches at once (re-arm them after a watch fired). Safe for
// concurrent use; it leaves no goroutine behind.
func WaitAny(ctx context.Context, d time.Duration, chans ...<-chan struct{}) (fired bool, err error) {
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
		return true, nil
	case <-t.C:
		return false, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
}
