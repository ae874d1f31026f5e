package metadata_test

import (
	"context"
	"io"
	"log/slog"
	"runtime"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/metadata"
	"github.com/batoncrawl/baton/testsuite"
)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func dialZK(t *testing.T, addr string, sessionTimeout time.Duration) *metadata.ZooKeeper {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	z, err := metadata.DialZooKeeper(ctx, metadata.ZooKeeperConfig{Hosts: []string{addr}, SessionTimeout: sessionTimeout, Logger: quietLogger()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = z.Close() })
	return z
}

func TestZooKeeperStore(t *testing.T) {
	server := testsuite.StartZooKeeper(t)
	z := dialZK(t, server.Addr(), 10*time.Second)
	t.Run("Contract", func(t *testing.T) { metadata.ContractStore(t, z) })
	t.Run("Lock", func(t *testing.T) { metadata.ContractLock(t, z) })
	t.Run("Cluster", func(t *testing.T) { metadata.ContractCluster(t, z) })
	t.Run("LockAcrossSessions", func(t *testing.T) {
		// Two stores are two sessions: the lock excludes across processes.
		other := dialZK(t, server.Addr(), 10*time.Second)
		metadata.LockAcross(t, z, other)
	})
	t.Run("Closed", func(t *testing.T) { metadata.ContractClosed(t, dialZK(t, server.Addr(), 10*time.Second)) })
}

// TestZooKeeperGetWKeepsOneWatchPerPath: a loop that re-reads a quiet
// znode with GetW on a timer (as WaitTask and JobAwait do) must not pile
// up watches: each would hold a goroutine and a client watcher until the
// node changes, for hours in a long crawl.
func TestZooKeeperGetWKeepsOneWatchPerPath(t *testing.T) {
	server := testsuite.StartZooKeeper(t)
	z := dialZK(t, server.Addr(), 10*time.Second)
	ctx := context.Background()
	base := metadata.FreshPath(t)
	p, missing := base+"/quiet", base+"/missing"
	_, err := z.Create(ctx, p, []byte("v1"), metadata.Persistent)
	require.NoError(t, err)

	_, _, first, err := z.GetW(ctx, p)
	require.NoError(t, err)
	_, _, firstMissing, err := z.GetW(ctx, missing)
	require.ErrorIs(t, err, metadata.ErrNotFound)
	before := runtime.NumGoroutine()
	for i := 0; i < 500; i++ {
		data, _, ch, err := z.GetW(ctx, p)
		require.NoError(t, err)
		require.Equal(t, "v1", string(data))
		require.Equal(t, first, ch, "read %d armed a second watch on a quiet znode", i)
		_, _, ch, err = z.GetW(ctx, missing)
		require.ErrorIs(t, err, metadata.ErrNotFound)
		require.Equal(t, firstMissing, ch, "read %d armed a second watch on a missing znode", i)
	}
	assert.LessOrEqual(t, runtime.NumGoroutine(), before+5, "goroutines grew with re-reads")

	// A change fires the shared watch; the next read arms a new one and
	// sees the new data.
	_, err = z.Set(ctx, p, []byte("v2"), metadata.AnyVersion)
	require.NoError(t, err)
	select {
	case <-first:
	case <-time.After(10 * time.Second):
		t.Fatal("the watch did not fire on a change")
	}
	data, _, ch, err := z.GetW(ctx, p)
	require.NoError(t, err)
	assert.Equal(t, "v2", string(data))
	assert.NotEqual(t, first, ch, "a fired watch was handed out again")
	_, err = z.Create(ctx, missing, []byte("m"), metadata.Persistent)
	require.NoError(t, err)
	select {
	case <-firstMissing:
	case <-time.After(10 * time.Second):
		t.Fatal("the watch on a missing znode did not fire when it was created")
	}
	data, _, _, err = z.GetW(ctx, missing)
	require.NoError(t, err)
	assert.Equal(t, "m", string(data))
}

// TestZooKeeperSessionExpiry partitions a store from the server for longer
// than its session timeout, so the server expires the session. When the
// store reaches the server again it gets a new session: Session() changes,
// the ephemeral znodes it created are there again (with their latest data)
// and watches armed in the old session have fired.
func TestZooKeeperSessionExpiry(t *testing.T) {
	server := testsuite.StartZooKeeper(t)
	ctx := context.Background()
	px := testsuite.StartProxy(t, server.Addr())
	z := dialZK(t, px.Addr(), 2*time.Second)

	observer, _, err := zk.Connect([]string{server.Addr()}, 10*time.Second, zk.WithLogInfo(false))
	require.NoError(t, err)
	t.Cleanup(observer.Close)
	exists := func(p string) bool {
		ok, _, err := observer.Exists(p)
		return err == nil && ok
	}

	base := metadata.FreshPath(t)
	alive := base + "/node/a_1/alive"
	_, err = z.Create(ctx, alive, []byte("v1"), metadata.Ephemeral)
	require.NoError(t, err)
	_, err = z.Set(ctx, alive, []byte("v2"), metadata.AnyVersion)
	require.NoError(t, err)
	// An ephemeral whose delete was refused is still ours.
	kept := base + "/node/a_1/kept"
	_, err = z.Create(ctx, kept, []byte("k"), metadata.Ephemeral)
	require.NoError(t, err)
	require.ErrorIs(t, z.Delete(ctx, kept, 7), metadata.ErrBadVersion)
	seq, err := z.Create(ctx, base+"/lock/lock-", nil, metadata.EphemeralSequential)
	require.NoError(t, err)
	_, err = z.Create(ctx, base+"/watched", []byte("x"), metadata.Persistent)
	require.NoError(t, err)
	_, _, watch, err := z.GetW(ctx, base+"/watched")
	require.NoError(t, err)
	metadata.WaitFor(t, "observer sees the ephemeral znode", func() bool { return exists(alive) })
	session := z.Session()
	zkSession := z.Conn().SessionID()

	px.Cut()
	metadata.WaitFor(t, "server expires the partitioned session", func() bool { return !exists(alive) })
	assert.False(t, exists(seq), "the lock znode went with the session")
	assert.Equal(t, session, z.Session(), "no new session while partitioned")
	px.Restore()

	metadata.WaitFor(t, "store establishes a new session", func() bool { return z.Session() == session+1 })
	assert.NotEqual(t, zkSession, z.Conn().SessionID())
	metadata.WaitFor(t, "ephemeral znode re-created", func() bool { return exists(alive) })
	data, _, err := observer.Get(alive)
	require.NoError(t, err)
	assert.Equal(t, "v2", string(data), "re-created with its latest data")
	_, st, err := observer.Get(alive)
	require.NoError(t, err)
	assert.Equal(t, z.Conn().SessionID(), st.EphemeralOwner, "owned by the new session")
	assert.False(t, exists(seq), "sequential ephemerals (lock contenders) are not re-created")
	metadata.WaitFor(t, "ephemeral whose delete was refused re-created", func() bool { return exists(kept) })
	metadata.RequireFires(t, watch, "a watch of the lost session")

	// The store works in its new session.
	_, err = z.Set(ctx, base+"/watched", []byte("y"), metadata.AnyVersion)
	require.NoError(t, err)
	got, _, err := z.Get(ctx, base+"/watched")
	require.NoError(t, err)
	assert.Equal(t, "y", string(got))

	// A deleted ephemeral is not re-created by a later expiry; a live one is.
	require.NoError(t, z.Delete(ctx, alive, metadata.AnyVersion))
	probe := base + "/node/a_1/probe"
	_, err = z.Create(ctx, probe, nil, metadata.Ephemeral)
	require.NoError(t, err)
	metadata.WaitFor(t, "observer sees the probe", func() bool { return exists(probe) })
	px.Cut()
	metadata.WaitFor(t, "server expires the second session", func() bool { return !exists(probe) })
	px.Restore()
	metadata.WaitFor(t, "third session", func() bool { return z.Session() == session+2 })
	metadata.WaitFor(t, "probe re-created", func() bool { return exists(probe) })
	assert.False(t, exists(alive), "a deleted ephemeral stays deleted")
}

func TestZooKeeperConfigValidate(t *testing.T) {
	require.NoError(t, metadata.DefaultZooKeeperConfig().Validate())
	for _, tc := range []struct {
		cfg  metadata.ZooKeeperConfig
		want string
	}{
		{metadata.ZooKeeperConfig{SessionTimeout: 10 * time.Second}, "hosts"},
		{metadata.ZooKeeperConfig{Hosts: []string{"127.0.0.1:2181", "zk2"}, SessionTimeout: 10 * time.Second}, "hosts[1]"},
		{metadata.ZooKeeperConfig{Hosts: []string{"127.0.0.1:2181"}, SessionTimeout: 500 * time.Millisecond}, "session_timeout"},
	} {
		err := tc.cfg.Validate()
		require.Error(t, err)
		assert.Contains(t, err.Error(), tc.want)
	}
	_, err := metadata.DialZooKeeper(context.Background(), metadata.ZooKeeperConfig{})
	require.Error(t, err, "an invalid config is refused before dialing")
}
