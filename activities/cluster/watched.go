package cluster

import (
	"context"
	"errors"

	"github.com/batoncrawl/baton/activities/metadata"
)

// watched caches what a read returned until the one-shot watch armed by
// that read fires (a change, a deletion, or a session event), so a loop
// reads again only after a change. A failed read (other than a missing
// znode, whose watch fires at its creation) is retried at the next call.
// It is used by one goroutine.
type watched[T any] struct {
	changed <-chan struct{}
	val     T
	err     error
}

func (w *watched[T]) get(read func() (T, <-chan struct{}, error)) (T, error) {
	if w.changed != nil {
		select {
		case <-w.changed:
		default:
			return w.val, w.err
		}
	}
	w.val, w.changed, w.err = read()
	if w.err != nil && !errors.Is(w.err, metadata.ErrNotFound) {
		w.changed = nil
	}
	return w.val, w.err
}

// Changed is the watch armed by the last read: it fires when what was
// read changes. It is nil (never fires) before the first read and after a
// failed one.
func (w *watched[T]) Changed() <-chan struct{} { return w.changed }

// WatchedZnode caches a znode's content (GetW). Its zero value is ready;
// it is used by one goroutine.
type WatchedZnode struct{ watched[[]byte] }

// Get returns the znode's content, reading it again only after a change.
func (w *WatchedZnode) Get(ctx context.Context, s metadata.Store, path string) ([]byte, error) {
	return w.get(func() ([]byte, <-chan struct{}, error) {
		data, _, ch, err := s.GetW(ctx, path)
		return data, ch, err
	})
}

// WatchedChildren caches a znode's children (ChildrenW). Its zero value is
// ready; it is used by one goroutine.
type WatchedChildren struct{ watched[[]string] }

// Get returns the znode's children, listing them again only after a change.
func (w *WatchedChildren) Get(ctx context.Context, s metadata.Store, path string) ([]string, error) {
	return w.get(func() ([]string, <-chan struct{}, error) { return s.ChildrenW(ctx, path) })
}

// DecodeWith decodes data read from path, turning a decoding error into a
// CorruptError that names the znode.
func DecodeWith[T any](data []byte, err error, path string, dec func([]byte) (T, error)) (T, error) {
	var zero T
	if err != nil {
		return zero, err
	}
	v, err := dec(data)
	if err != nil {
		return v, &metadata.CorruptError{Path: path, Err: err}
	}
	return v, nil
}
