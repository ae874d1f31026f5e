package metadata

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// waitLimit bounds every wait for an asynchronous condition in this package.
const waitLimit = 10 * time.Second

var pathSeq atomic.Int64

// freshPath returns a znode path no other test uses.
func freshPath(t *testing.T) string {
	name := regexp.MustCompile(`[^A-Za-z0-9]+`).ReplaceAllString(t.Name(), "_")
	return fmt.Sprintf("/contract/%s_%d", name, pathSeq.Add(1))
}

func fired(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// requireFires waits (bounded) until ch is closed.
func requireFires(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(waitLimit):
		t.Fatalf("watch did not fire within %v: %s", waitLimit, what)
	}
}

// requireNotFired checks that ch has not fired. Watch events of one store
// are delivered in order, so a watch on a sentinel znode that is changed
// now and fires first proves that an event for ch, had there been one,
// was delivered already.
func requireNotFired(t *testing.T, s Store, ch <-chan struct{}, what string) {
	t.Helper()
	ctx := context.Background()
	sentinel := freshPath(t) + "_sentinel"
	_, err := s.Create(ctx, sentinel, nil, Persistent)
	require.NoError(t, err)
	_, _, sch, err := s.GetW(ctx, sentinel)
	require.NoError(t, err)
	_, err = s.Set(ctx, sentinel, []byte("x"), AnyVersion)
	require.NoError(t, err)
	requireFires(t, sch, "sentinel")
	assert.False(t, fired(ch), "watch fired although nothing changed: %s", what)
}

// testStore is the contract every Store implementation satisfies.
func testStore(t *testing.T, s Store) {
	ctx := context.Background()

	t.Run("CreateGetWithParents", func(t *testing.T) {
		base := freshPath(t)
		p := base + "/a/b/c"
		created, err := s.Create(ctx, p, []byte("hello"), Persistent)
		require.NoError(t, err)
		assert.Equal(t, p, created)
		data, v, err := s.Get(ctx, p)
		require.NoError(t, err)
		assert.Equal(t, "hello", string(data))
		assert.Equal(t, int32(0), v)
		for _, parent := range []string{base, base + "/a", base + "/a/b"} {
			d, v, err := s.Get(ctx, parent)
			require.NoError(t, err, "parent %s created", parent)
			assert.Empty(t, d)
			assert.Equal(t, int32(0), v)
		}
		kids, err := s.Children(ctx, base+"/a/b")
		require.NoError(t, err)
		assert.Equal(t, []string{"c"}, kids, "children are names, not paths")
	})

	t.Run("CreateExisting", func(t *testing.T) {
		p := freshPath(t)
		_, err := s.Create(ctx, p, []byte("1"), Persistent)
		require.NoError(t, err)
		_, err = s.Create(ctx, p, []byte("2"), Persistent)
		require.ErrorIs(t, err, ErrExists)
		assert.True(t, IsConflict(err))
		data, _, err := s.Get(ctx, p)
		require.NoError(t, err)
		assert.Equal(t, "1", string(data), "a refused create changes nothing")
		_, err = s.Create(ctx, p, nil, Ephemeral)
		require.ErrorIs(t, err, ErrExists)
	})

	t.Run("NotFound", func(t *testing.T) {
		p := freshPath(t) + "/missing"
		_, _, err := s.Get(ctx, p)
		require.ErrorIs(t, err, ErrNotFound)
		assert.Contains(t, err.Error(), p, "the error names the znode")
		_, err = s.Set(ctx, p, []byte("x"), AnyVersion)
		require.ErrorIs(t, err, ErrNotFound)
		err = s.Delete(ctx, p, AnyVersion)
		require.ErrorIs(t, err, ErrNotFound)
		_, err = s.Children(ctx, p)
		require.ErrorIs(t, err, ErrNotFound)
		_, _, err = s.Get(ctx, p)
		require.ErrorIs(t, err, ErrNotFound, "reads do not create anything")
	})

	t.Run("VersionsAndCompareAndSet", func(t *testing.T) {
		p := freshPath(t)
		_, err := s.Create(ctx, p, []byte("v0"), Persistent)
		require.NoError(t, err)
		v, err := s.Set(ctx, p, []byte("v1"), 0)
		require.NoError(t, err)
		assert.Equal(t, int32(1), v)
		_, err = s.Set(ctx, p, []byte("stale"), 0)
		require.ErrorIs(t, err, ErrBadVersion)
		assert.True(t, IsConflict(err))
		data, v, err := s.Get(ctx, p)
		require.NoError(t, err)
		assert.Equal(t, "v1", string(data), "a lost compare-and-set writes nothing")
		assert.Equal(t, int32(1), v)
		v, err = s.Set(ctx, p, []byte("v2"), AnyVersion)
		require.NoError(t, err)
		assert.Equal(t, int32(2), v)
		v, err = s.Set(ctx, p, []byte("v3"), 2)
		require.NoError(t, err)
		assert.Equal(t, int32(3), v)
		// Setting the same data still bumps the version.
		v, err = s.Set(ctx, p, []byte("v3"), 3)
		require.NoError(t, err)
		assert.Equal(t, int32(4), v)
		_, err = s.Set(ctx, p, []byte("future"), 9)
		require.ErrorIs(t, err, ErrBadVersion)
	})

	t.Run("Delete", func(t *testing.T) {
		p := freshPath(t)
		_, err := s.Create(ctx, p+"/child", nil, Persistent)
		require.NoError(t, err)
		require.ErrorIs(t, s.Delete(ctx, p, AnyVersion), ErrNotEmpty)
		require.ErrorIs(t, s.Delete(ctx, p+"/child", 5), ErrBadVersion)
		require.NoError(t, s.Delete(ctx, p+"/child", 0))
		require.NoError(t, s.Delete(ctx, p, AnyVersion))
		_, _, err = s.Get(ctx, p)
		require.ErrorIs(t, err, ErrNotFound)
		// Re-created znodes start at version 0 again.
		_, err = s.Create(ctx, p, []byte("again"), Persistent)
		require.NoError(t, err)
		_, v, err := s.Get(ctx, p)
		require.NoError(t, err)
		assert.Equal(t, int32(0), v)
	})

	t.Run("Children", func(t *testing.T) {
		p := freshPath(t)
		_, err := s.Create(ctx, p, nil, Persistent)
		require.NoError(t, err)
		kids, err := s.Children(ctx, p)
		require.NoError(t, err)
		assert.Empty(t, kids)
		for _, k := range []string{"b", "a", "c"} {
			_, err := s.Create(ctx, p+"/"+k, nil, Persistent)
			require.NoError(t, err)
		}
		_, err = s.Create(ctx, p+"/a/grandchild", nil, Persistent)
		require.NoError(t, err)
		_, err = s.Create(ctx, p+"/e", nil, Ephemeral)
		require.NoError(t, err)
		kids, err = s.Children(ctx, p)
		require.NoError(t, err)
		assert.ElementsMatch(t, []string{"a", "b", "c", "e"}, kids, "direct children only")
		// A znode whose name extends another's is not its child.
		_, err = s.Create(ctx, p+"x/y", nil, Persistent)
		require.NoError(t, err)
		kids, err = s.Children(ctx, p)
		require.NoError(t, err)
		assert.Len(t, kids, 4)
	})

	t.Run("EphemeralSequentialNaming", func(t *testing.T) {
		dir := freshPath(t) + "/lock"
		var names []string
		for i := 0; i < 12; i++ {
			created, err := s.Create(ctx, dir+"/lock-", []byte(fmt.Sprint(i)), EphemeralSequential)
			require.NoError(t, err)
			require.True(t, strings.HasPrefix(created, dir+"/lock-"), "created %s", created)
			seq := strings.TrimPrefix(created, dir+"/lock-")
			assert.Regexp(t, `^\d{10}$`, seq, "ten-digit sequence number")
			names = append(names, created[len(dir)+1:])
			data, _, err := s.Get(ctx, created)
			require.NoError(t, err)
			assert.Equal(t, fmt.Sprint(i), string(data))
		}
		assert.True(t, sort.StringsAreSorted(names), "sequence numbers increase in creation order: %v", names)
		for i := 1; i < len(names); i++ {
			assert.NotEqual(t, names[i-1], names[i])
		}
		// Another prefix in the same directory shares the counter, still increasing.
		other, err := s.Create(ctx, dir+"/other-", nil, EphemeralSequential)
		require.NoError(t, err)
		assert.Greater(t, other[len(dir+"/other-"):], names[len(names)-1][len("lock-"):])
		kids, err := s.Children(ctx, dir)
		require.NoError(t, err)
		assert.ElementsMatch(t, append(names, other[len(dir)+1:]), kids)
		// Deleting one does not reuse its number.
		require.NoError(t, s.Delete(ctx, dir+"/"+names[len(names)-1], AnyVersion))
		again, err := s.Create(ctx, dir+"/lock-", nil, EphemeralSequential)
		require.NoError(t, err)
		assert.Greater(t, again[len(dir)+1:], names[len(names)-1])
	})

	t.Run("WatchFiresOnSetOnce", func(t *testing.T) {
		p := freshPath(t)
		_, err := s.Create(ctx, p, []byte("v0"), Persistent)
		require.NoError(t, err)
		data, v, ch, err := s.GetW(ctx, p)
		require.NoError(t, err)
		assert.Equal(t, "v0", string(data))
		assert.Equal(t, int32(0), v)
		requireNotFired(t, s, ch, "before any change")
		_, err = s.Set(ctx, p, []byte("v1"), AnyVersion)
		require.NoError(t, err)
		requireFires(t, ch, "set")
		// One-shot: a second change neither panics nor needs the old watch;
		// a new watch must be armed and it does not fire for past changes.
		_, err = s.Set(ctx, p, []byte("v2"), AnyVersion)
		require.NoError(t, err)
		data, v, ch2, err := s.GetW(ctx, p)
		require.NoError(t, err)
		assert.Equal(t, "v2", string(data))
		assert.Equal(t, int32(2), v)
		requireNotFired(t, s, ch2, "re-armed watch after past changes")
		_, err = s.Set(ctx, p, []byte("v3"), 2)
		require.NoError(t, err)
		requireFires(t, ch2, "second set")
	})

	t.Run("WatchIgnoresOtherZnodes", func(t *testing.T) {
		p := freshPath(t)
		_, err := s.Create(ctx, p, nil, Persistent)
		require.NoError(t, err)
		_, err = s.Create(ctx, p+"-sibling", nil, Persistent)
		require.NoError(t, err)
		_, _, ch, err := s.GetW(ctx, p)
		require.NoError(t, err)
		_, err = s.Set(ctx, p+"-sibling", []byte("x"), AnyVersion)
		require.NoError(t, err)
		_, err = s.Create(ctx, p+"/child", nil, Persistent)
		require.NoError(t, err)
		requireNotFired(t, s, ch, "sibling changed, child created")
		_, err = s.Set(ctx, p, []byte("x"), AnyVersion)
		require.NoError(t, err)
		requireFires(t, ch, "own change")
	})

	t.Run("WatchFiresOnDelete", func(t *testing.T) {
		p := freshPath(t)
		_, err := s.Create(ctx, p, []byte("x"), Persistent)
		require.NoError(t, err)
		_, _, ch, err := s.GetW(ctx, p)
		require.NoError(t, err)
		require.NoError(t, s.Delete(ctx, p, AnyVersion))
		requireFires(t, ch, "delete")
	})

	t.Run("WatchOnMissingFiresOnCreate", func(t *testing.T) {
		p := freshPath(t) + "/later"
		_, _, ch, err := s.GetW(ctx, p)
		require.ErrorIs(t, err, ErrNotFound)
		require.NotNil(t, ch, "a watch is armed on a missing znode")
		requireNotFired(t, s, ch, "nothing created yet")
		_, _, err = s.Get(ctx, p)
		require.ErrorIs(t, err, ErrNotFound, "the watch does not make the znode exist")
		kids, err := s.Children(ctx, path0(p))
		if err == nil {
			assert.NotContains(t, kids, "later")
		}
		_, err = s.Create(ctx, p, []byte("now"), Persistent)
		require.NoError(t, err)
		requireFires(t, ch, "create")
		data, v, err := s.Get(ctx, p)
		require.NoError(t, err)
		assert.Equal(t, "now", string(data))
		assert.Equal(t, int32(0), v)
	})

	t.Run("ChildrenWatch", func(t *testing.T) {
		dir := freshPath(t)
		_, ch, err := s.ChildrenW(ctx, dir)
		require.ErrorIs(t, err, ErrNotFound)
		require.NotNil(t, ch, "a children watch is armed on a missing znode")
		_, err = s.Create(ctx, dir, nil, Persistent)
		require.NoError(t, err)
		requireFires(t, ch, "the directory created")

		kids, ch, err := s.ChildrenW(ctx, dir)
		require.NoError(t, err)
		assert.Empty(t, kids)
		_, err = s.Create(ctx, dir+"/a", nil, Persistent)
		require.NoError(t, err)
		requireFires(t, ch, "a child created")

		kids, ch, err = s.ChildrenW(ctx, dir)
		require.NoError(t, err)
		assert.Equal(t, []string{"a"}, kids)
		_, err = s.Set(ctx, dir+"/a", []byte("x"), AnyVersion)
		require.NoError(t, err)
		_, err = s.Set(ctx, dir, []byte("x"), AnyVersion)
		require.NoError(t, err)
		requireNotFired(t, s, ch, "a child's or the directory's data changed, not its children")
		_, ch2, err := s.ChildrenW(ctx, dir)
		require.NoError(t, err)
		require.NoError(t, s.Delete(ctx, dir+"/a", AnyVersion))
		requireFires(t, ch, "a child deleted")
		requireFires(t, ch2, "a child deleted (second reader)")

		_, ch, err = s.ChildrenW(ctx, dir)
		require.NoError(t, err)
		require.NoError(t, s.Delete(ctx, dir, AnyVersion))
		requireFires(t, ch, "the directory deleted")
	})

	t.Run("ManyWatchersAllFire", func(t *testing.T) {
		p := freshPath(t)
		_, err := s.Create(ctx, p, nil, Persistent)
		require.NoError(t, err)
		var chans []<-chan struct{}
		for i := 0; i < 5; i++ {
			_, _, ch, err := s.GetW(ctx, p)
			require.NoError(t, err)
			chans = append(chans, ch)
		}
		_, err = s.Set(ctx, p, []byte("x"), AnyVersion)
		require.NoError(t, err)
		for i, ch := range chans {
			requireFires(t, ch, fmt.Sprint("watcher ", i))
		}
	})

	t.Run("MultiAppliesAll", func(t *testing.T) {
		p := freshPath(t)
		_, err := s.Create(ctx, p+"/a", []byte("a0"), Persistent)
		require.NoError(t, err)
		_, err = s.Create(ctx, p+"/b", []byte("b0"), Persistent)
		require.NoError(t, err)
		_, _, ch, err := s.GetW(ctx, p+"/b")
		require.NoError(t, err)
		require.NoError(t, s.Multi(ctx,
			CheckOp(p+"/a", 0),
			SetOp(p+"/b", []byte("b1"), 0),
			CreateOp(p+"/c", []byte("c0")),
		))
		data, v, err := s.Get(ctx, p+"/a")
		require.NoError(t, err)
		assert.Equal(t, "a0", string(data))
		assert.Equal(t, int32(0), v, "a check does not change the version")
		data, v, err = s.Get(ctx, p+"/b")
		require.NoError(t, err)
		assert.Equal(t, "b1", string(data))
		assert.Equal(t, int32(1), v)
		data, _, err = s.Get(ctx, p+"/c")
		require.NoError(t, err)
		assert.Equal(t, "c0", string(data))
		requireFires(t, ch, "multi set fires watches")
		// AnyVersion works in a Multi too.
		require.NoError(t, s.Multi(ctx, CheckOp(p+"/b", AnyVersion), SetOp(p+"/a", []byte("a1"), AnyVersion)))
		data, _, err = s.Get(ctx, p+"/a")
		require.NoError(t, err)
		assert.Equal(t, "a1", string(data))
	})

	t.Run("MultiIsAtomic", func(t *testing.T) {
		p := freshPath(t)
		_, err := s.Create(ctx, p+"/a", []byte("a0"), Persistent)
		require.NoError(t, err)
		_, err = s.Create(ctx, p+"/b", []byte("b0"), Persistent)
		require.NoError(t, err)
		unchanged := func(what string) {
			t.Helper()
			data, v, err := s.Get(ctx, p+"/a")
			require.NoError(t, err)
			assert.Equal(t, "a0", string(data), what)
			assert.Equal(t, int32(0), v, what)
			data, v, err = s.Get(ctx, p+"/b")
			require.NoError(t, err)
			assert.Equal(t, "b0", string(data), what)
			assert.Equal(t, int32(0), v, what)
			_, _, err = s.Get(ctx, p+"/new")
			require.ErrorIs(t, err, ErrNotFound, what)
		}
		// A failing check after a set and a create.
		err = s.Multi(ctx, SetOp(p+"/a", []byte("a1"), 0), CreateOp(p+"/new", nil), CheckOp(p+"/b", 3))
		require.ErrorIs(t, err, ErrBadVersion)
		assert.Contains(t, err.Error(), p+"/b", "the error names the failing op's znode")
		unchanged("failing check")
		// A failing set first.
		err = s.Multi(ctx, SetOp(p+"/a", []byte("a1"), 7), SetOp(p+"/b", []byte("b1"), 0))
		require.ErrorIs(t, err, ErrBadVersion)
		unchanged("failing first set")
		// A create of an existing znode.
		err = s.Multi(ctx, SetOp(p+"/a", []byte("a1"), 0), CreateOp(p+"/b", nil))
		require.ErrorIs(t, err, ErrExists)
		unchanged("create of existing")
		// A set of a missing znode.
		err = s.Multi(ctx, SetOp(p+"/a", []byte("a1"), 0), SetOp(p+"/missing", nil, AnyVersion))
		require.ErrorIs(t, err, ErrNotFound)
		unchanged("set of missing")
		// A check of a missing znode.
		err = s.Multi(ctx, CheckOp(p+"/missing", AnyVersion), SetOp(p+"/a", []byte("a1"), 0))
		require.ErrorIs(t, err, ErrNotFound)
		unchanged("check of missing")
		// A create whose parent is missing (Multi does not create parents).
		err = s.Multi(ctx, SetOp(p+"/a", []byte("a1"), 0), CreateOp(p+"/nope/child", nil))
		require.ErrorIs(t, err, ErrNotFound)
		unchanged("create without parent")
		// A delete of a znode that has children.
		_, err = s.Create(ctx, p+"/b/child", nil, Persistent)
		require.NoError(t, err)
		err = s.Multi(ctx, SetOp(p+"/a", []byte("a1"), 0), Op{Kind: OpDelete, Path: p + "/b", Version: AnyVersion})
		require.ErrorIs(t, err, ErrNotEmpty)
		unchanged("delete of a znode with children")
		// A delete at a stale version.
		err = s.Multi(ctx, SetOp(p+"/a", []byte("a1"), 0), Op{Kind: OpDelete, Path: p + "/b/child", Version: 4})
		require.ErrorIs(t, err, ErrBadVersion)
		unchanged("delete at a stale version")
		_, _, err = s.Get(ctx, p+"/b/child")
		require.NoError(t, err)
		// Deleting the child first, then its parent, in one transaction works.
		require.NoError(t, s.Multi(ctx, Op{Kind: OpDelete, Path: p + "/b/child", Version: 0}, Op{Kind: OpDelete, Path: p + "/b", Version: 0}))
		_, _, err = s.Get(ctx, p+"/b")
		require.ErrorIs(t, err, ErrNotFound)
		_, err = s.Create(ctx, p+"/b", []byte("b0"), Persistent)
		require.NoError(t, err)
		// Two sets of the same znode at the same version: the second one loses.
		err = s.Multi(ctx, SetOp(p+"/a", []byte("a1"), 0), SetOp(p+"/a", []byte("a2"), 0))
		require.ErrorIs(t, err, ErrBadVersion)
		unchanged("second set at a stale version")
		// ... but at the version the first one produced it wins.
		require.NoError(t, s.Multi(ctx, SetOp(p+"/a", []byte("a1"), 0), SetOp(p+"/a", []byte("a2"), 1)))
		data, v, err := s.Get(ctx, p+"/a")
		require.NoError(t, err)
		assert.Equal(t, "a2", string(data))
		assert.Equal(t, int32(2), v)
	})

	t.Run("EphemeralLivesInTheSession", func(t *testing.T) {
		p := freshPath(t) + "/alive"
		created, err := s.Create(ctx, p, []byte("me"), Ephemeral)
		require.NoError(t, err)
		assert.Equal(t, p, created)
		data, _, err := s.Get(ctx, p)
		require.NoError(t, err)
		assert.Equal(t, "me", string(data))
		_, err = s.Create(ctx, p+"/child", nil, Persistent)
		require.Error(t, err, "ephemeral znodes cannot have children")
	})

	t.Run("Session", func(t *testing.T) {
		s1 := s.Session()
		assert.NotZero(t, s1)
		assert.Equal(t, s1, s.Session(), "stable while the session lives")
	})

	t.Run("ConcurrentCompareAndSet", func(t *testing.T) {
		// N writers increment a counter with read + compare-and-set, retrying
		// on conflict: no update is lost.
		p := freshPath(t)
		_, err := s.Create(ctx, p, []byte("0"), Persistent)
		require.NoError(t, err)
		const writers, each = 8, 10
		errs := make(chan error, writers)
		for w := 0; w < writers; w++ {
			go func() {
				for i := 0; i < each; i++ {
					for {
						data, v, err := s.Get(ctx, p)
						if err != nil {
							errs <- err
							return
						}
						var n int
						fmt.Sscan(string(data), &n)
						_, err = s.Set(ctx, p, []byte(fmt.Sprint(n+1)), v)
						if errors.Is(err, ErrBadVersion) {
							continue
						}
						if err != nil {
							errs <- err
							return
						}
						break
					}
				}
				errs <- nil
			}()
		}
		for w := 0; w < writers; w++ {
			require.NoError(t, <-errs)
		}
		data, v, err := s.Get(ctx, p)
		require.NoError(t, err)
		assert.Equal(t, fmt.Sprint(writers*each), string(data))
		assert.Equal(t, int32(writers*each), v)
	})
}

// path0 is path.Dir without importing path twice in tests.
func path0(p string) string { return p[:strings.LastIndex(p, "/")] }

// testClosed checks a closed store refuses work with ErrClosed.
func testClosed(t *testing.T, s Store) {
	ctx := context.Background()
	p := freshPath(t)
	_, err := s.Create(ctx, p, nil, Persistent)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	_, _, err = s.Get(ctx, p)
	require.ErrorIs(t, err, ErrClosed)
	_, err = s.Set(ctx, p, nil, AnyVersion)
	require.ErrorIs(t, err, ErrClosed)
	_, err = s.Create(ctx, p+"/x", nil, Persistent)
	require.ErrorIs(t, err, ErrClosed)
	require.NoError(t, s.Close(), "closing twice is harmless")
}

func TestMemoryStore(t *testing.T) {
	testStore(t, NewMemory())
}

func TestMemoryClosed(t *testing.T) {
	m := NewMemory()
	testClosed(t, m)
	_, _, _, err := m.GetW(context.Background(), "/x")
	require.ErrorIs(t, err, ErrClosed)
	require.ErrorIs(t, m.Delete(context.Background(), "/x", AnyVersion), ErrClosed)
	require.ErrorIs(t, m.Multi(context.Background(), CheckOp("/", AnyVersion)), ErrClosed)
}
