package worker

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/cmdline/exitcode"
	"github.com/batoncrawl/baton/testsuite"
)

// A worker given ZooKeeper credentials refuses, before it reaches
// Temporal or writes anything, a root znode anyone may change (exit 2,
// naming the root and the fixes, never the password); and a worker
// without credentials on a server that requires them says so (exit 2).
func TestWorkerRefusesOpenRoot(t *testing.T) {
	const password = "pw-not-in-errors"
	server := testsuite.StartZooKeeper(t)
	anon, _, err := zk.Connect([]string{server.Addr()}, 10*time.Second, zk.WithLogInfo(false))
	require.NoError(t, err)
	defer anon.Close()
	_, err = anon.Create("/open", nil, 0, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)

	data := filepath.Join(t.TempDir(), "data")
	args := []string{"--name", "sc-crawler_1", "--metrics-addr", "", "--connect-timeout", "10s",
		"--temporal-address", testsuite.ClosedPort(t), "--data-dir", data, "--zk-root", "/open"}
	t.Setenv("BATON_ZK_AUTH", "baton:"+password)
	_, errw, code := runWorker(t, append(args, "--zk-hosts", server.Addr())...)
	assert.Equal(t, exitcode.Usage, code, errw)
	assert.Contains(t, errw, "zookeeper root /open has an open ACL (world:anyone:cdrwa)")
	assert.Contains(t, errw, "--zk-root")
	assert.NotContains(t, errw, password)
	_, err = os.Stat(data)
	assert.True(t, os.IsNotExist(err), "nothing created")

	enforcing := testsuite.StartZooKeeperWith(t, testsuite.ZooKeeperEnforceAuth...)
	t.Setenv("BATON_ZK_AUTH", "")
	_, errw, code = runWorker(t, append(args, "--zk-hosts", enforcing.Addr())...)
	assert.Equal(t, exitcode.Usage, code, errw)
	assert.Contains(t, errw, "requires authentication")
	assert.Contains(t, errw, "--zk-auth-file")
}
