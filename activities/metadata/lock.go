package metadata

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Lock is ZooKeeper's lock recipe on any Store: each contender creates an
// ephemeral sequential znode under dir and holds the lock when its znode is
// the smallest; otherwise it watches only its predecessor (no herd effect).
// The lock is advisory: writes made under it still use compare-and-set, so
// a holder that lost its session cannot overwrite a newer state.
//
// A Lock is used by one goroutine at a time.
type Lock struct {
	s    Store
	dir  string
	node string
}

// NewLock returns a lock rooted at dir.
func NewLock(s Store, dir string) *Lock { return &Lock{s: s, dir: dir} }

// Acquire blocks until the lock is held or ctx ends.
func (l *Lock) Acquire(ctx context.Context) error {
	if err := l.enqueue(ctx); err != nil {
		return err
	}
	for {
		kids, err := l.s.Children(ctx, l.dir)
		if err != nil {
			l.release()
			return fmt.Errorf("acquire lock %s: %w", l.dir, err)
		}
		sort.Slice(kids, func(i, j int) bool { return seqOf(kids[i]) < seqOf(kids[j]) })
		pred, queued := "", false
		for _, k := range kids {
			if k == l.node {
				queued = true
				break
			}
			pred = k
		}
		if !queued {
			// Our znode vanished with an expired session: queue again
			// rather than hold the lock without a znode.
			l.node = ""
			if err := l.enqueue(ctx); err != nil {
				return err
			}
			continue
		}
		if pred == "" {
			return nil
		}
		_, _, ch, err := l.s.GetW(ctx, l.dir+"/"+pred)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			l.release()
			return fmt.Errorf("acquire lock %s: %w", l.dir, err)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			l.release()
			return fmt.Errorf("acquire lock %s: %w", l.dir, ctx.Err())
		}
	}
}

// enqueue creates the contender's ephemeral sequential znode.
func (l *Lock) enqueue(ctx context.Context) error {
	created, err := l.s.Create(ctx, l.dir+"/lock-", nil, EphemeralSequential)
	if err != nil {
		return fmt.Errorf("acquire lock %s: %w", l.dir, err)
	}
	l.node = created[strings.LastIndex(created, "/")+1:]
	return nil
}

func seqOf(name string) string {
	if i := strings.LastIndex(name, "-"); i >= 0 {
		return name[i+1:]
	}
	return name
}

func (l *Lock) release() {
	if l.node != "" {
		_ = l.s.Delete(context.Background(), l.dir+"/"+l.node, AnyVersion)
		l.node = ""
	}
}

// Release gives the lock up.
func (l *Lock) Release() { l.release() }
