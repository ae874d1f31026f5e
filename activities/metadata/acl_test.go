package metadata_test

import (
	"context"
	"path"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/metadata"
	"github.com/batoncrawl/baton/roles"
	"github.com/batoncrawl/baton/testsuite"
)

const (
	aclUser     = "baton"
	aclPassword = "s3cret:with-colon" // ZooKeeper splits user:password at the first colon
	aclAuth     = aclUser + ":" + aclPassword
)

func dialZKAuth(t *testing.T, addr, auth string, sessionTimeout time.Duration) *metadata.ZooKeeper {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	z, err := metadata.DialZooKeeper(ctx, metadata.ZooKeeperConfig{Hosts: []string{addr},
		SessionTimeout: sessionTimeout, Logger: quietLogger(), Auth: auth})
	require.NoError(t, err)
	t.Cleanup(func() { _ = z.Close() })
	return z
}

// rawZK is a plain go-zookeeper client, authenticated with auth unless it
// is empty.
func rawZK(t *testing.T, addr, auth string) *zk.Conn {
	t.Helper()
	c, _, err := zk.Connect([]string{addr}, 10*time.Second, zk.WithLogInfo(false), zk.WithLogger(zkQuiet{}))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	if auth != "" {
		require.NoError(t, c.AddAuth("digest", []byte(auth)))
	}
	return c
}

type zkQuiet struct{}

func (zkQuiet) Printf(string, ...any) {}

// walk lists root and every znode below it.
func walk(t *testing.T, c *zk.Conn, root string) []string {
	t.Helper()
	out := []string{root}
	kids, _, err := c.Children(root)
	require.NoError(t, err, "children of %s", root)
	sort.Strings(kids)
	for _, k := range kids {
		out = append(out, walk(t, c, path.Join(root, k))...)
	}
	return out
}

// TestZooKeeperACL: a store with digest credentials creates a Cluster's
// znodes (group state under the lock recipe, NodeState, Task, Heartbeat,
// the ephemeral alive znode, a Multi create) with a digest ACL for its user
// only; clients without the credentials, or with wrong ones, get
// zk.ErrNoAuth on every read and write; the right credentials work.
func TestZooKeeperACL(t *testing.T) {
	server := testsuite.StartZooKeeper(t)
	ctx := context.Background()
	store := dialZKAuth(t, server.Addr(), aclAuth, 10*time.Second)

	const root, name = "/baton-acl", "sc-crawler_1"
	c := metadata.NewCluster(store, root, "g")
	_, err := c.UpdateGroup(ctx, func(g *roles.GroupState) error {
		g.TotalRunner, g.TotalCrawler = 1, 1
		g.CurrentCrawler = roles.Add(g.CurrentCrawler, name)
		return nil
	})
	require.NoError(t, err, "GroupState under the group lock")
	_, err = c.Put(ctx, c.NodePath(name), roles.NodeState{Group: "g", Role: roles.RoleInitial}, metadata.AnyVersion)
	require.NoError(t, err)
	_, err = c.Put(ctx, c.TaskPath(name), roles.EmptyTask(), metadata.AnyVersion)
	require.NoError(t, err)
	_, err = c.Put(ctx, c.HeartbeatPath(name), roles.NewHeartbeat(time.Now(), roles.FastTimers()), metadata.AnyVersion)
	require.NoError(t, err)
	_, err = store.Create(ctx, c.AlivePath(name), []byte(name), metadata.Ephemeral)
	require.NoError(t, err)
	multi := path.Join(root, "node", name, "multi")
	require.NoError(t, store.Multi(ctx, metadata.CreateOp(multi, []byte("m")), metadata.CheckOp(c.TaskPath(name), metadata.AnyVersion)))
	// The store reads and writes its own znodes.
	g, _, err := c.GetGroup(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{name}, g.CurrentCrawler)
	_, err = c.Put(ctx, c.TaskPath(name), roles.EmptyTask(), metadata.AnyVersion)
	require.NoError(t, err)

	good := rawZK(t, server.Addr(), aclAuth)
	all := walk(t, good, root)
	for _, p := range []string{root, c.GroupPath(), c.LockPath(), c.NodePath(name), c.TaskPath(name),
		c.HeartbeatPath(name), c.AlivePath(name), multi} {
		assert.Contains(t, all, p)
	}
	want := zk.DigestACL(zk.PermAll, aclUser, aclPassword)
	for _, p := range all {
		acl, _, err := good.GetACL(p)
		require.NoError(t, err, p)
		assert.Equal(t, want, acl, "ACL of %s", p)
	}

	for _, tc := range []struct{ name, auth string }{
		{"NoCredentials", ""},
		{"WrongPassword", aclUser + ":wrong"},
		{"WrongUser", "mallory:" + aclPassword},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := rawZK(t, server.Addr(), tc.auth)
			for _, p := range all {
				_, _, err := bad.Get(p)
				assert.ErrorIs(t, err, zk.ErrNoAuth, "get %s", p)
				_, err = bad.Set(p, []byte("x"), -1)
				assert.ErrorIs(t, err, zk.ErrNoAuth, "set %s", p)
				_, _, err = bad.Children(p)
				assert.ErrorIs(t, err, zk.ErrNoAuth, "children %s", p)
			}
			_, err := bad.Create(path.Join(root, "node", "intruder"), nil, 0, zk.WorldACL(zk.PermAll))
			assert.ErrorIs(t, err, zk.ErrNoAuth, "create under %s", root)
			assert.ErrorIs(t, bad.Delete(c.AlivePath(name), -1), zk.ErrNoAuth, "delete")
			_, err = bad.SetACL(c.TaskPath(name), zk.WorldACL(zk.PermAll), -1)
			assert.ErrorIs(t, err, zk.ErrNoAuth, "set ACL")
		})
	}

	t.Run("RightCredentials", func(t *testing.T) {
		data, _, err := good.Get(c.TaskPath(name))
		require.NoError(t, err)
		_, err = roles.DecodeTask(data)
		require.NoError(t, err)
		_, err = good.Set(multi, []byte("n"), -1)
		require.NoError(t, err)
		// A second store with the same credentials is a second member.
		other := metadata.NewCluster(dialZKAuth(t, server.Addr(), aclAuth, 10*time.Second), root, "g")
		_, err = other.UpdateGroup(ctx, func(g *roles.GroupState) error {
			g.CurrentCrawler = roles.Add(g.CurrentCrawler, "sc-crawler_2")
			return nil
		})
		require.NoError(t, err)
	})

	t.Run("StoreWithoutCredentials", func(t *testing.T) {
		plain := metadata.NewCluster(dialZK(t, server.Addr(), 10*time.Second), root, "g")
		_, _, err := plain.GetGroup(ctx)
		require.ErrorIs(t, err, zk.ErrNoAuth)
		assert.Contains(t, err.Error(), "credentials")
		// The lock recipe refuses at once rather than waiting forever.
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		err = metadata.NewLock(plain.Store, c.LockPath()).Acquire(lctx)
		require.ErrorIs(t, err, zk.ErrNoAuth)
		_, err = plain.Put(ctx, c.HeartbeatPath(name), roles.NewHeartbeat(time.Now(), roles.FastTimers()), metadata.AnyVersion)
		require.ErrorIs(t, err, zk.ErrNoAuth)
	})
}

// TestZooKeeperACLContracts runs the store, lock and cluster contracts on a
// store whose znodes all carry a digest ACL.
func TestZooKeeperACLContracts(t *testing.T) {
	server := testsuite.StartZooKeeper(t)
	z := dialZKAuth(t, server.Addr(), aclAuth, 10*time.Second)
	t.Run("Contract", func(t *testing.T) { metadata.ContractStore(t, z) })
	t.Run("Lock", func(t *testing.T) { metadata.ContractLock(t, z) })
	t.Run("Cluster", func(t *testing.T) { metadata.ContractCluster(t, z) })
	t.Run("LockAcrossSessions", func(t *testing.T) {
		metadata.LockAcross(t, z, dialZKAuth(t, server.Addr(), aclAuth, 10*time.Second))
	})
}

// TestZooKeeperACLSessionExpiry checks go-zookeeper re-sends the
// credentials itself: after a reconnect in the same session and after a
// session expiry, the store still reads and writes its ACL'd znodes, and
// the ephemeral it re-creates in the new session carries the digest ACL.
func TestZooKeeperACLSessionExpiry(t *testing.T) {
	server := testsuite.StartZooKeeper(t)
	ctx := context.Background()
	px := testsuite.StartProxy(t, server.Addr())
	z := dialZKAuth(t, px.Addr(), aclAuth, 2*time.Second)
	good := rawZK(t, server.Addr(), aclAuth)
	anon := rawZK(t, server.Addr(), "")
	exists := func(p string) bool {
		ok, _, err := good.Exists(p)
		return err == nil && ok
	}

	base := "/acl-expiry"
	alive := base + "/node/a_1/alive"
	data := base + "/node/a_1/task"
	_, err := z.Create(ctx, alive, []byte("v1"), metadata.Ephemeral)
	require.NoError(t, err)
	_, err = z.Create(ctx, data, []byte("t1"), metadata.Persistent)
	require.NoError(t, err)
	readWrite := func(v string) {
		t.Helper()
		metadata.WaitFor(t, "store writes "+v+" after the reconnect", func() bool {
			_, err := z.Set(ctx, data, []byte(v), metadata.AnyVersion)
			return err == nil
		})
		got, _, err := z.Get(ctx, data)
		require.NoError(t, err)
		assert.Equal(t, v, string(got))
	}

	// A reconnect within the session: the connection is cut and restored
	// before the session times out.
	session := z.Session()
	px.Cut()
	time.Sleep(300 * time.Millisecond)
	px.Restore()
	readWrite("t2")
	assert.Equal(t, session, z.Session(), "same session")

	// A session expiry: a new session, authenticated again by the client.
	px.Cut()
	metadata.WaitFor(t, "server expires the partitioned session", func() bool { return !exists(alive) })
	px.Restore()
	metadata.WaitFor(t, "store establishes a new session", func() bool { return z.Session() == session+1 })
	readWrite("t3")
	metadata.WaitFor(t, "ephemeral re-created", func() bool { return exists(alive) })
	acl, st, err := good.GetACL(alive)
	require.NoError(t, err)
	assert.Equal(t, zk.DigestACL(zk.PermAll, aclUser, aclPassword), acl)
	assert.Equal(t, z.Conn().SessionID(), st.EphemeralOwner, "owned by the new session")
	_, _, err = anon.Get(alive)
	assert.ErrorIs(t, err, zk.ErrNoAuth)
}

func TestZooKeeperConfigAuth(t *testing.T) {
	cfg := metadata.DefaultZooKeeperConfig()
	cfg.Auth = aclAuth
	require.NoError(t, cfg.Validate())
	for _, bad := range []string{"nocolon-secret", ":password-secret", "someone-secret:"} {
		cfg.Auth = bad
		err := cfg.Validate()
		require.Error(t, err, bad)
		assert.Contains(t, err.Error(), "auth")
		assert.NotContains(t, err.Error(), strings.TrimPrefix(strings.TrimSuffix(bad, ":"), ":"), "the secret is not in the error")
	}
}
