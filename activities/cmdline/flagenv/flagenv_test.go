package flagenv

import (
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOnlyDocumentedFlagsAreBound(t *testing.T) {
	global := pflag.NewFlagSet("global", pflag.ContinueOnError)
	hosts := global.String("zk-hosts", "127.0.0.1:2181", "ZooKeeper hosts")
	group := global.String("group", "g", "group")
	Document(global, "BATON")
	assert.Equal(t, "ZooKeeper hosts (env BATON_ZK_HOSTS)", global.Lookup("zk-hosts").Usage)

	// A command's flag set: the global flags and its own.
	cmd := pflag.NewFlagSet("crawl", pflag.ContinueOnError)
	cmd.AddFlagSet(global)
	id := cmd.String("id", "", "job ID")
	t.Setenv("BATON_ZK_HOSTS", "zk:1")
	t.Setenv("BATON_GROUP", "from-env")
	t.Setenv("BATON_ID", "stray")
	require.NoError(t, cmd.Parse([]string{"--group", "from-flag"}))
	require.NoError(t, Bind(cmd))
	assert.Equal(t, "zk:1", *hosts, "a global setting from the environment")
	assert.Equal(t, "from-flag", *group, "the command line wins")
	assert.Equal(t, "", *id, "a command's own flag is never read from the environment")
	assert.Equal(t, "", Variable(cmd.Lookup("id")))
	assert.NotContains(t, cmd.Lookup("id").Usage, "env")
}

func TestBadValueNamesVariableAndFlag(t *testing.T) {
	fs := pflag.NewFlagSet("w", pflag.ContinueOnError)
	fs.Int("runner", 2, "runners")
	Document(fs, "BATON")
	t.Setenv("BATON_RUNNER", "two")
	require.NoError(t, fs.Parse(nil))
	err := Bind(fs)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `environment variable BATON_RUNNER="two" (for --runner)`)
}
