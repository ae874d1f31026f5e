package connect

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/cmdline/exitcode"
	"github.com/batoncrawl/baton/activities/connect/security"
	"github.com/batoncrawl/baton/activities/metadata"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestFlagsAndDefaults(t *testing.T) {
	z, tc := DefaultZooKeeper(), DefaultTemporal()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	z.AddFlags(fs)
	tc.AddFlags(fs)
	for name, def := range map[string]string{
		"zk-hosts": "127.0.0.1:2181", "zk-root": metadata.DefaultRoot, security.FlagZKAuthFile: "",
		"temporal-address": "127.0.0.1:7233", "temporal-namespace": "default", security.FlagTemporalAPIKeyFile: "",
	} {
		f := fs.Lookup(name)
		require.NotNil(t, f, name)
		assert.Equal(t, def, f.DefValue, name)
	}
	require.NoError(t, fs.Parse([]string{"--zk-hosts", "a:1,b:2", "--zk-root", "/r", "--temporal-address", "t:7", "--temporal-namespace", "ns"}))
	assert.Equal(t, ZooKeeper{Hosts: "a:1,b:2", Root: "/r"}, z)
	assert.Equal(t, Temporal{Address: "t:7", Namespace: "ns"}, tc)
}

func TestZooKeeperConfig(t *testing.T) {
	t.Setenv(security.EnvZKAuth, "")
	log := quiet()
	cfg, err := ZooKeeper{Hosts: "a:1,b:2"}.Config(log)
	require.NoError(t, err)
	assert.Equal(t, []string{"a:1", "b:2"}, cfg.Hosts)
	assert.Equal(t, metadata.DefaultZooKeeperConfig().SessionTimeout, cfg.SessionTimeout)
	assert.Same(t, log, cfg.Logger)
	assert.Empty(t, cfg.Auth)

	t.Setenv(security.EnvZKAuth, "baton:s3cret")
	cfg, err = ZooKeeper{Hosts: "a:1"}.Config(log)
	require.NoError(t, err)
	assert.Equal(t, "baton:s3cret", cfg.Auth)

	t.Setenv(security.EnvZKAuth, "no-colon")
	_, err = ZooKeeper{Hosts: "a:1"}.Config(log)
	require.EqualError(t, err, "$BATON_ZK_AUTH: want user:password with a non-empty user and password")
}

func TestTemporalOptions(t *testing.T) {
	t.Setenv(security.EnvTemporalAPIKey, "")
	o, err := Temporal{Address: "t:7", Namespace: "ns"}.Options(quiet())
	require.NoError(t, err)
	assert.Equal(t, "t:7", o.HostPort)
	assert.Equal(t, "ns", o.Namespace)
	assert.NotNil(t, o.Logger)
	assert.Nil(t, o.ConnectionOptions.TLS)
	assert.Nil(t, o.Credentials)

	key := filepath.Join(t.TempDir(), "key")
	require.NoError(t, os.WriteFile(key, []byte("k\n"), 0o600))
	o, err = Temporal{Address: "t:7", Security: security.Temporal{TLS: true, APIKeyFile: key}}.Options(quiet())
	require.NoError(t, err)
	assert.NotNil(t, o.ConnectionOptions.TLS)
	assert.NotNil(t, o.Credentials)

	_, err = Temporal{Address: "t:7", Security: security.Temporal{KeyFile: "/k"}}.Options(quiet())
	require.EqualError(t, err, "--temporal-tls-key-file /k: needs --temporal-tls-cert-file (mutual TLS takes a certificate and its key)")
}

func TestUnreachableHintsFitTheAddress(t *testing.T) {
	cause := errors.New("connection refused")
	local := DefaultZooKeeper().Unreachable(cause, time.Second)
	assert.Equal(t, exitcode.Unavailable, exitcode.Of(local))
	assert.ErrorIs(t, local, cause)
	assert.Contains(t, local.Error(), "ZooKeeper at 127.0.0.1:2181 did not answer within 1s")
	assert.Contains(t, local.Error(), "make stack-up")
	prod := ZooKeeper{Hosts: "zk1:2181,zk2:2181"}.Unreachable(cause, time.Second)
	assert.NotContains(t, prod.Error(), "make stack-up", "no local-stack advice for a production ensemble")
	assert.Contains(t, prod.Error(), "--zk-hosts (BATON_ZK_HOSTS)")

	assert.Contains(t, DefaultTemporal().Unreachable(cause, time.Second).Error(), "make stack-up")
	prodT := Temporal{Address: "temporal.example:7233"}.Unreachable(cause, 2*time.Second)
	assert.Equal(t, exitcode.Unavailable, exitcode.Of(prodT))
	assert.NotContains(t, prodT.Error(), "make stack-up")
	assert.Contains(t, prodT.Error(), "Temporal at temporal.example:7233 did not answer within 2s")
}

// A malformed address is bad input, refused before any dial (the CLI's
// exit code 2), naming the flag; a well-formed one passes.
func TestAddressesAreHostPort(t *testing.T) {
	for _, hosts := range []string{"notaport", "127.0.0.1:x", "127.0.0.1:0", "a:2181,b", ":2181", "a:2181,"} {
		z := ZooKeeper{Hosts: hosts, Root: "/baton"}
		err := z.Validate()
		require.Error(t, err, hosts)
		assert.Contains(t, err.Error(), "--zk-hosts "+`"`+hosts+`"`)
		_, err = z.Config(slog.New(slog.NewTextHandler(io.Discard, nil)))
		assert.Error(t, err, hosts)
	}
	for _, hosts := range []string{"127.0.0.1:2181", "zk-0.zk:2181,zk-1.zk:2181", "[::1]:2181"} {
		assert.NoError(t, ZooKeeper{Hosts: hosts}.Validate(), hosts)
	}
	for _, addr := range []string{"notaport", "temporal:port", ""} {
		err := Temporal{Address: addr}.Validate()
		require.Error(t, err, addr)
		assert.Contains(t, err.Error(), "--temporal-address")
	}
	for _, addr := range []string{"127.0.0.1:7233", "temporal.example.com:443", "dns:///temporal:7233"} {
		assert.NoError(t, Temporal{Address: addr}.Validate(), addr)
	}
}
