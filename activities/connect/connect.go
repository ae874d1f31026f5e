// Package connect holds the connection settings that Baton's two binaries
// share, baton-worker (./worker) and baton (./starter): where ZooKeeper and
// Temporal are, with their flags, and how each becomes the configuration
// of a ZooKeeper session or of a Temporal client. Its subpackage security
// holds the secrets of those connections (ZooKeeper credentials, Temporal
// TLS and API key).
//
// Dialling stays with the callers (each binary has its own time limits);
// Unreachable gives both the same error, with a hint that fits the address,
// when a server does not answer (exit code 5, exitcode.Unavailable). The
// command-line conventions of both binaries that are not connections live
// in activities/cmdline: exitcode (the exit codes), flagenv (the
// BATON_<FLAG> environment variables of the global flags) and version
// (--version).
package connect

import (
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

	"github.com/batoncrawl/baton/activities/connect/security"
	"github.com/batoncrawl/baton/activities/metadata"
)

// Defaults of the flags: a local stack.
const (
	DefaultZKHosts           = "127.0.0.1:2181"
	DefaultTemporalAddress   = "127.0.0.1:7233"
	DefaultTemporalNamespace = "default"
)

// ZooKeeper is where Baton's metadata is: the ensemble, the root znode
// and the credentials.
type ZooKeeper struct {
	// Hosts are the ensemble's addresses, comma-separated host:port.
	Hosts string
	// Root is the root znode of Baton's metadata.
	Root string
	// Auth says where the digest credentials are (never the credentials).
	Auth security.ZooKeeper
}

// DefaultZooKeeper returns the setting of a local stack.
func DefaultZooKeeper() ZooKeeper {
	return ZooKeeper{Hosts: DefaultZKHosts, Root: metadata.DefaultRoot}
}

// AddFlags registers --zk-hosts, --zk-root and --zk-auth-file on fs, with
// z's values as defaults.
func (z *ZooKeeper) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&z.Hosts, "zk-hosts", z.Hosts, "ZooKeeper hosts, comma-separated host:port")
	fs.StringVar(&z.Root, "zk-root", z.Root, "root znode of Baton's metadata")
	z.Auth.AddFlags(fs)
}

// Validate checks the hosts: each host:port with a port number, named
// with the flag (--zk-hosts) when not. A bad address is bad input (exit
// code 2), not a server that does not answer.
func (z ZooKeeper) Validate() error {
	for _, h := range strings.Split(z.Hosts, ",") {
		if err := checkHostPort(h); err != nil {
			return fmt.Errorf("--zk-hosts %q: %v (want comma-separated host:port, e.g. %s)", z.Hosts, err, DefaultZKHosts)
		}
	}
	return nil
}

// checkHostPort accepts host:port with a port from 1 to 65535.
func checkHostPort(hp string) error {
	hp = strings.TrimSpace(hp)
	if hp == "" {
		return fmt.Errorf("an empty address")
	}
	host, port, err := net.SplitHostPort(hp)
	if err != nil {
		return fmt.Errorf("%q is not host:port", hp)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("%q: port %q is not a number from 1 to 65535", hp, port)
	}
	if host == "" {
		return fmt.Errorf("%q has no host", hp)
	}
	return nil
}

// Config returns the configuration of a ZooKeeper session: the hosts, the
// credentials read from their file or the environment, log for connection
// events, and metadata.DefaultZooKeeperConfig's other fields. Its error is
// Validate's, or security.ZooKeeper.Auth's, which names the flag or the
// variable.
func (z ZooKeeper) Config(log *slog.Logger) (metadata.ZooKeeperConfig, error) {
	if err := z.Validate(); err != nil {
		return metadata.ZooKeeperConfig{}, err
	}
	cfg := metadata.DefaultZooKeeperConfig()
	cfg.Hosts = strings.Split(z.Hosts, ",")
	cfg.Logger = log
	auth, err := z.Auth.Auth()
	if err != nil {
		return metadata.ZooKeeperConfig{}, err
	}
	cfg.Auth = auth
	return cfg, nil
}

// Temporal is where Temporal is: the frontend, the namespace, and the TLS
// and API key setting.
type Temporal struct {
	// Address is the frontend's host:port.
	Address string
	// Namespace is the Temporal namespace.
	Namespace string
	// Security is TLS, mTLS and the API key (where the secrets are).
	Security security.Temporal
	// PayloadKeyFile, when set, encrypts every payload of Baton's
	// workflows and activities (PayloadCodec) with the key in this file;
	// every worker and CLI of the group needs the same file.
	PayloadKeyFile string
}

type clientOptions = client.Options

// DefaultTemporal returns the setting of a local stack.
func DefaultTemporal() Temporal {
	return Temporal{Address: DefaultTemporalAddress, Namespace: DefaultTemporalNamespace}
}

// AddFlags registers --temporal-address, --temporal-namespace and the
// security flags (--temporal-tls*, --temporal-api-key-file) on fs, with
// t's values as defaults.
func (t *Temporal) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&t.Address, "temporal-address", t.Address, "Temporal frontend host:port")
	fs.StringVar(&t.Namespace, "temporal-namespace", t.Namespace, "Temporal namespace")
	t.Security.AddFlags(fs)
	fs.StringVar(&t.PayloadKeyFile, "payload-key-file", t.PayloadKeyFile,
		"encrypt every Temporal payload (inputs, results, failures) with the AES-256 key in this file (64 hex digits, mode 0600); every worker and CLI of the group needs it, and the Web UI needs the codec server of baton codec-server")
}

// PayloadCodec returns the codec of --payload-key-file.
func (t Temporal) PayloadCodec() (*PayloadCodec, error) {
	key, err := LoadPayloadKey(t.PayloadKeyFile)
	if err != nil {
		return nil, fmt.Errorf("--payload-key-file: %w", err)
	}
	return NewPayloadCodec(key)
}

// Validate checks the address: host:port with a port number, or a gRPC
// target with a scheme (dns:///host:port), named with the flag when not.
func (t Temporal) Validate() error {
	if strings.Contains(t.Address, "://") {
		return nil // a gRPC target (dns:///…): the client parses it
	}
	if err := checkHostPort(t.Address); err != nil {
		return fmt.Errorf("--temporal-address %q: %v (want host:port, e.g. %s)", t.Address, err, DefaultTemporalAddress)
	}
	return nil
}

// Options returns the options of a Temporal client: the address, the
// namespace, log (through the SDK's structured logger), TLS and the API
// key. Its error is Validate's, or security.Temporal.Apply's, which names
// the flag and the file.
func (t Temporal) Options(log *slog.Logger) (client.Options, error) {
	if err := t.Validate(); err != nil {
		return client.Options{}, err
	}
	opts := client.Options{HostPort: t.Address, Namespace: t.Namespace, Logger: tlog.NewStructuredLogger(log)}
	if err := t.Security.Apply(&opts); err != nil {
		return client.Options{}, err
	}
	if t.PayloadKeyFile != "" {
		codec, err := t.PayloadCodec()
		if err != nil {
			return client.Options{}, err
		}
		applyCodec(&opts, codec)
	}
	return opts, nil
}
