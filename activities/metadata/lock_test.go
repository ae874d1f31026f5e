package metadata

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/roles"
)

// eventually polls cond until it holds or waitLimit passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v: %s", waitLimit, what)
		}
		time.Sleep(5 * time.Millisecond) // polling interval, not synchronisation
	}
}

func lockKids(t *testing.T, s Store, dir string) []string {
	t.Helper()
	kids, err := s.Children(context.Background(), dir)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	require.NoError(t, err)
	return kids
}

// testLock is the lock recipe's contract on any Store.
func testLock(t *testing.T, s Store) {
	ctx := context.Background()

	t.Run("MutualExclusion", func(t *testing.T) {
		dir := freshPath(t)
		const goroutines, rounds = 8, 5
		var inside, maxInside, counter atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, goroutines)
		for g := 0; g < goroutines; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for r := 0; r < rounds; r++ {
					l := NewLock(s, dir)
					if err := l.Acquire(ctx); err != nil {
						errs <- err
						return
					}
					n := inside.Add(1)
					for {
						m := maxInside.Load()
						if n <= m || maxInside.CompareAndSwap(m, n) {
							break
						}
					}
					// read-modify-write with a gap: loses updates unless exclusive
					v := counter.Load()
					runtime.Gosched()
					counter.Store(v + 1)
					inside.Add(-1)
					l.Release()
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		assert.Equal(t, int64(1), maxInside.Load(), "never two holders at once")
		assert.Equal(t, int64(goroutines*rounds), counter.Load(), "no lost update")
		assert.Empty(t, lockKids(t, s, dir), "every lock znode was removed")
	})

	t.Run("WaitersInOrder", func(t *testing.T) {
		dir := freshPath(t)
		a := NewLock(s, dir)
		require.NoError(t, a.Acquire(ctx))
		got := make(chan string, 2)
		b, c := NewLock(s, dir), NewLock(s, dir)
		acquire := func(l *Lock, name string) {
			if err := l.Acquire(ctx); err != nil {
				name += " failed: " + err.Error()
			}
			got <- name
		}
		go acquire(b, "b")
		eventually(t, "b queued", func() bool { return len(lockKids(t, s, dir)) == 2 })
		go acquire(c, "c")
		eventually(t, "c queued", func() bool { return len(lockKids(t, s, dir)) == 3 })
		select {
		case w := <-got:
			t.Fatalf("%s acquired a held lock", w)
		default:
		}
		a.Release()
		assert.Equal(t, "b", recvString(t, got), "the oldest waiter goes first")
		assert.Len(t, lockKids(t, s, dir), 2)
		select {
		case w := <-got:
			t.Fatalf("%s acquired while b holds the lock", w)
		default:
		}
		b.Release()
		assert.Equal(t, "c", recvString(t, got))
		c.Release()
		assert.Empty(t, lockKids(t, s, dir))
	})

	t.Run("AcquireHonoursContext", func(t *testing.T) {
		dir := freshPath(t)
		a := NewLock(s, dir)
		require.NoError(t, a.Acquire(ctx))
		cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		err := NewLock(s, dir).Acquire(cctx)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Contains(t, err.Error(), dir)
		assert.Len(t, lockKids(t, s, dir), 1, "the waiter removed its znode when it gave up")
		a.Release()
		b := NewLock(s, dir)
		require.NoError(t, b.Acquire(ctx), "the lock is free again")
		b.Release()
	})

	t.Run("ReleaseTwiceIsHarmless", func(t *testing.T) {
		dir := freshPath(t)
		a := NewLock(s, dir)
		require.NoError(t, a.Acquire(ctx))
		a.Release()
		b := NewLock(s, dir)
		require.NoError(t, b.Acquire(ctx))
		a.Release() // must not delete b's znode
		assert.Len(t, lockKids(t, s, dir), 1)
		b.Release()
	})

	t.Run("UpdateGroupNoLostUpdates", func(t *testing.T) {
		c := NewCluster(s, freshPath(t), "g")
		const goroutines, rounds = 8, 4
		var inside, maxInside atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, goroutines*rounds)
		for g := 0; g < goroutines; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for r := 0; r < rounds; r++ {
					_, err := c.UpdateGroup(ctx, func(gs *roles.GroupState) error {
						n := inside.Add(1)
						defer inside.Add(-1)
						for {
							m := maxInside.Load()
							if n <= m || maxInside.CompareAndSwap(m, n) {
								break
							}
						}
						runtime.Gosched()
						gs.TotalCrawler++
						return nil
					})
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		g, v, err := c.GetGroup(ctx)
		require.NoError(t, err)
		assert.Equal(t, goroutines*rounds, g.TotalCrawler, "no lost update")
		assert.Equal(t, int32(goroutines*rounds-1), v, "one create and then one write per update: no retries were needed under the lock")
		assert.Equal(t, int64(1), maxInside.Load(), "update functions never ran concurrently")
		assert.Empty(t, lockKids(t, s, c.LockPath()))
	})
}

func recvString(t *testing.T, ch <-chan string) string {
	t.Helper()
	select {
	case s := <-ch:
		return s
	case <-time.After(waitLimit):
		t.Fatalf("nothing received within %v", waitLimit)
		return ""
	}
}

func TestMemoryLock(t *testing.T) { testLock(t, NewMemory()) }

// A waiter whose lock znode vanished with its session must not believe it
// holds the lock without a znode: it queues again.
func TestLockWaiterSurvivesSessionExpiry(t *testing.T) {
	m := NewMemory()
	ctx := context.Background()
	dir := "/locks/x"
	a := NewLock(m, dir)
	require.NoError(t, a.Acquire(ctx))
	done := make(chan error, 1)
	b := NewLock(m, dir)
	go func() { done <- b.Acquire(ctx) }()
	eventually(t, "b queued", func() bool { return len(lockKids(t, m, dir)) == 2 })
	m.ExpireSession() // both lock znodes vanish; b's watch fires
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(waitLimit):
		t.Fatal("b did not get the lock")
	}
	kids := lockKids(t, m, dir)
	require.Len(t, kids, 1, "b holds the lock through a znode of its own")
	assert.True(t, strings.HasPrefix(kids[0], "lock-"))
	// A newcomer must wait for b.
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, NewLock(m, dir).Acquire(cctx), context.DeadlineExceeded)
	b.Release()
	assert.Empty(t, lockKids(t, m, dir))
}

// testLockAcross checks the lock excludes across two stores (sessions).
func testLockAcross(t *testing.T, a, b Store) {
	ctx := context.Background()
	dir := freshPath(t)
	la := NewLock(a, dir)
	require.NoError(t, la.Acquire(ctx))
	got := make(chan error, 1)
	lb := NewLock(b, dir)
	go func() { got <- lb.Acquire(ctx) }()
	eventually(t, "b queued", func() bool { return len(lockKids(t, a, dir)) == 2 })
	select {
	case err := <-got:
		t.Fatalf("acquired a lock held by another session (err %v)", err)
	default:
	}
	la.Release()
	select {
	case err := <-got:
		require.NoError(t, err)
	case <-time.After(waitLimit):
		t.Fatal("waiter in the other session not woken")
	}
	lb.Release()
}
