package testsuite

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"
)

// Hosts is a set of "machines" on one Linux host: each is a network
// namespace of its own with its own address, joined by a veth pair to a
// bridge in the test's namespace. The servers (ZooKeeper, Temporal,
// PostgreSQL, the test site) listen on the bridge's address, ServerIP
// (Temporal's dev server on 0.0.0.0, see WithTemporalIP); the
// workers run in the namespaces (WithHosts). Partition takes a machine's
// link down: it loses ZooKeeper, Temporal, PostgreSQL and the site at once,
// its TCP connections hang as on a real network (no reset, no refusal), and
// its processes run on; Heal brings the link back up.
//
// Addresses come from 198.18.0.0/15 (RFC 2544, set aside for benchmarking
// networks): each Hosts takes a /24 no other interface uses, the bridge is
// .1, host i is .(i+1). Names carry the test process's pid (the bridge
// btb<pid><seq>, the links btv<pid><seq><i>, the namespaces
// baton-<pid>-<seq>-<i>): the test removes its own when it ends, even when
// it fails, and removes those of a test process that no longer runs (one
// killed by go test's -timeout) when it starts.
//
// It needs Linux, root (CAP_NET_ADMIN and CAP_SYS_ADMIN), iproute2's ip and
// the kernel's bridge and veth drivers; where one is missing, NewHosts skips
// the test and says why (with BATON_REQUIRE_NETNS=1 it fails it instead).
type Hosts struct {
	t        testing.TB
	bridge   string
	serverIP string
	subnet   *net.IPNet
	hosts    []*Host
}

// Host is one machine of Hosts.
type Host struct {
	// Index is the host's number, from 1 (the instance number of the
	// worker a Cluster with WithHosts starts on it).
	Index int
	// Netns is the network namespace (`ip netns exec Netns ...`).
	Netns string
	// IP is the host's address, on the bridge's network.
	IP string
	// Link is the test's end of the host's veth pair, on the bridge.
	Link string

	mu  sync.Mutex
	cut bool
}

// EnvRequireNetns, when "1", makes NewHosts fail the test where it would
// skip it (CI that must run the partition tests).
const EnvRequireNetns = "BATON_REQUIRE_NETNS"

// ServerIP is the bridge's address, where the servers listen.
func (h *Hosts) ServerIP() string { return h.serverIP }

// Bridge is the bridge's name.
func (h *Hosts) Bridge() string { return h.bridge }

// Subnet is the hosts' network (a /24 of 198.18.0.0/15).
func (h *Hosts) Subnet() *net.IPNet { return h.subnet }

// Len is the number of hosts.
func (h *Hosts) Len() int { return len(h.hosts) }

// Host returns host i, from 1.
func (h *Hosts) Host(i int) *Host {
	if i < 1 || i > len(h.hosts) {
		h.t.Fatalf("testsuite: hosts: no host %d (have 1..%d)", i, len(h.hosts))
	}
	return h.hosts[i-1]
}

// Cut reports whether the host is partitioned.
func (hs *Host) Cut() bool {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return hs.cut
}

// Listen listens on a free port of the bridge's address.
func (h *Hosts) Listen() net.Listener {
	h.t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(h.serverIP, "0"))
	if err != nil {
		h.t.Fatalf("testsuite: hosts: listen on %s: %v", h.serverIP, err)
	}
	return ln
}

// NewServer serves handler on a free port of the bridge's address (the
// test site the hosts' workers crawl) until the test ends.
func (h *Hosts) NewServer(handler http.Handler) *httptest.Server {
	h.t.Helper()
	srv := httptest.NewUnstartedServer(handler)
	_ = srv.Listener.Close()
	srv.Listener = h.Listen()
	srv.Start()
	h.t.Cleanup(srv.Close)
	return srv
}

// WithHosts runs the cluster's workers on hosts: instance i in the network
// namespace of host i, ZooKeeper and Temporal on the bridge's address. Give
// the job store too (WithPostgres of a StartPostgresOn(t, h.ServerIP())),
// and the test site (Hosts.NewServer). There must be a host per instance
// started.
func WithHosts(h *Hosts) ClusterOption {
	return func(c *Cluster) {
		c.Hosts = h
		c.temporalOpts = append(c.temporalOpts, WithTemporalIP(h.ServerIP()))
	}
}

// serverIP is where the cluster's servers listen: the bridge of its Hosts,
// else "" (127.0.0.1).
func (c *Cluster) serverIP() string {
	if c.Hosts == nil {
		return ""
	}
	return c.Hosts.ServerIP()
}

// netns is the network namespace of instance i: its host's, else "".
func (c *Cluster) netns(i int) string {
	if c.Hosts == nil {
		return ""
	}
	return c.Hosts.Host(i).Netns
}

// Partition cuts instance i's host off (see Hosts.Partition).
func (c *Cluster) Partition(i int) time.Time {
	c.T.Helper()
	if c.Hosts == nil {
		c.T.Fatalf("testsuite: Partition needs a cluster on hosts (WithHosts)")
	}
	return c.Hosts.Partition(i)
}

// Heal reconnects instance i's host (see Hosts.Heal).
func (c *Cluster) Heal(i int) time.Time {
	c.T.Helper()
	if c.Hosts == nil {
		c.T.Fatalf("testsuite: Heal needs a cluster on hosts (WithHosts)")
	}
	return c.Hosts.Heal(i)
}

// cannotMakeHosts skips the test (or fails it, with BATON_REQUIRE_NETNS=1)
// because the machine cannot make network namespaces.
func cannotMakeHosts(t testing.TB, format string, args ...any) {
	t.Helper()
	why := fmt.Sprintf(format, args...)
	if os.Getenv(EnvRequireNetns) == "1" {
		t.Fatalf("testsuite: hosts: %s (%s=1)", why, EnvRequireNetns)
	}
	t.Skipf("testsuite: hosts: cannot make network namespaces, skipping: %s", why)
}

// appendFile appends s to the file at path (which must exist).
func appendFile(path, s string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("append to %s: %w", path, err)
	}
	if _, err := f.WriteString(s); err != nil {
		f.Close()
		return fmt.Errorf("append to %s: %w", path, err)
	}
	return f.Close()
}
