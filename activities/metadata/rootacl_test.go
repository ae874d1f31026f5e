package metadata_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/metadata"
	"github.com/batoncrawl/baton/roles"
	"github.com/batoncrawl/baton/testsuite"
)

// TestZooKeeperRefusesOpenRoot: with digest credentials, a root znode
// that exists with an ACL letting world:anyone change it is refused,
// naming the root and the fixes (never the password); a root that does
// not exist, one Baton made with its ACL, one world may only read, and
// an open one once its ACL is set are accepted. Without credentials
// nothing is refused.
func TestZooKeeperRefusesOpenRoot(t *testing.T) {
	server := testsuite.StartZooKeeper(t)
	ctx := context.Background()
	store := dialZKAuth(t, server.Addr(), aclAuth, 10*time.Second)
	anon := rawZK(t, server.Addr(), "")

	_, err := anon.Create("/open", nil, 0, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)
	err = store.CheckRoot(ctx, "/open")
	var open *metadata.OpenRootError
	require.True(t, errors.As(err, &open), "%v", err)
	assert.Equal(t, "/open", open.Root)
	assert.Equal(t, "cdrwa", open.Perms)
	for _, want := range []string{"zookeeper root /open has an open ACL (world:anyone:cdrwa)", "setAcl -R /open digest:" + aclUser + ":",
		"deleteall /open", "--zk-root"} {
		assert.Contains(t, err.Error(), want)
	}
	assert.NotContains(t, err.Error(), aclPassword)

	// Write without read is open too; read alone is not.
	_, err = anon.Create("/writable", nil, 0, zk.WorldACL(zk.PermWrite|zk.PermRead))
	require.NoError(t, err)
	require.ErrorAs(t, store.CheckRoot(ctx, "/writable"), &open)
	assert.Equal(t, "rw", open.Perms)
	_, err = anon.Create("/readable", nil, 0, append(zk.WorldACL(zk.PermRead), zk.DigestACL(zk.PermAll, aclUser, aclPassword)...))
	require.NoError(t, err)
	require.NoError(t, store.CheckRoot(ctx, "/readable"))

	// A root that does not exist yet, then as Baton makes it.
	require.NoError(t, store.CheckRoot(ctx, "/fresh"))
	c := metadata.NewCluster(store, "/fresh", "g")
	_, err = c.Put(ctx, c.TaskPath("sc-crawler_1"), roles.EmptyTask(), metadata.AnyVersion)
	require.NoError(t, err)
	require.NoError(t, store.CheckRoot(ctx, "/fresh"))

	// The fix the message gives: the open root given Baton's ACL.
	_, err = anon.SetACL("/open", zk.DigestACL(zk.PermAll, aclUser, aclPassword), -1)
	require.NoError(t, err)
	require.NoError(t, store.CheckRoot(ctx, "/open"))

	// Without credentials there is no ACL to protect: nothing refused.
	plain := dialZK(t, server.Addr(), 10*time.Second)
	require.NoError(t, plain.CheckRoot(ctx, "/writable"))
}

// TestZooKeeperEnforcedAuth: on a server that refuses unauthenticated
// sessions (the local stack's and Compose's zoo.cfg), a store without
// credentials fails CheckRoot with ErrAuthRequired, which says how to
// give them (the server then closes the session: later requests may fail
// as a lost connection instead, hence the check at start); with
// credentials it works.
func TestZooKeeperEnforcedAuth(t *testing.T) {
	server := testsuite.StartZooKeeperWith(t, testsuite.ZooKeeperEnforceAuth...)
	ctx := context.Background()

	plain := dialZK(t, server.Addr(), 10*time.Second)
	err := plain.CheckRoot(ctx, metadata.DefaultRoot)
	require.ErrorIs(t, err, metadata.ErrAuthRequired)
	assert.Contains(t, err.Error(), "--zk-auth-file or $BATON_ZK_AUTH")
	_, err = plain.Create(ctx, "/x", nil, metadata.Persistent)
	require.Error(t, err)

	store := dialZKAuth(t, server.Addr(), aclAuth, 10*time.Second)
	require.NoError(t, store.CheckRoot(ctx, metadata.DefaultRoot))
	c := metadata.NewCluster(store, "", "g")
	_, err = c.Put(ctx, c.TaskPath("sc-crawler_1"), roles.EmptyTask(), metadata.AnyVersion)
	require.NoError(t, err)
	require.NoError(t, store.CheckRoot(ctx, ""))
	acl, _, err := rawZK(t, server.Addr(), aclAuth).GetACL(metadata.DefaultRoot)
	require.NoError(t, err)
	assert.Equal(t, zk.DigestACL(zk.PermAll, aclUser, aclPassword), acl)
}
