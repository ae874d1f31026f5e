package testsuite

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	// ensembleReadyTimeout bounds how long a member may take, once every
	// member has been started, to join a quorum (leader or follower).
	ensembleReadyTimeout = 60 * time.Second
	// ensembleInitLimit and ensembleSyncLimit are in ticks (tickTime 500ms):
	// a follower that hears nothing from its leader for syncLimit ticks
	// (2.5s) drops it and a new election starts.
	ensembleInitLimit = 10
	ensembleSyncLimit = 5
)

// Ensemble is a ZooKeeper ensemble of n servers (quorum mode) on 127.0.0.1,
// started by StartEnsemble. Members are indexed 0..n-1 (myid i+1); each keeps
// its ports and data directory across Kill and Restart. The servers have the
// settings of StartZooKeeper's (tickTime 500ms, sessions 1s..60s, 4lw ruok,
// stat, srvr, mntr, wchs and cons), with initLimit 10 and syncLimit 5 ticks.
//
// Methods must be called from the test goroutine.
type Ensemble struct {
	t       testing.TB
	members []*ZooKeeper
}

// StartEnsemble starts an ensemble of n ZooKeeper servers on free loopback
// ports (a client, a quorum and an election port each) and waits until every
// member answers srvr with Mode leader or follower. The servers are killed
// when the test ends. Like StartZooKeeper it skips under -short and fails
// (or skips with BATON_ALLOW_SKIP=1) when ZooKeeper or Java is missing.
// Use an odd n: the ensemble survives the loss of (n-1)/2 members.
func StartEnsemble(t testing.TB, n int) *Ensemble {
	t.Helper()
	skipIfShort(t, "ZooKeeper ensemble")
	if n < 1 {
		t.Fatalf("testsuite: ensemble: need at least 1 server, got %d", n)
	}
	java, classpath, err := zooKeeperInstall()
	if err != nil {
		missingDependency(t, "ZooKeeper", err)
	}
	e := &Ensemble{t: t}
	root := t.TempDir()
	for i := 0; i < n; i++ {
		id := i + 1
		zk, err := newZooKeeperServer(t, fmt.Sprintf("zookeeper%d", id),
			filepath.Join(root, fmt.Sprintf("zk%d", id)), java, classpath)
		if err != nil {
			t.Fatalf("testsuite: ensemble: %v", err)
		}
		if err := os.WriteFile(filepath.Join(zk.DataDir(), "myid"), []byte(strconv.Itoa(id)+"\n"), 0o644); err != nil {
			t.Fatalf("testsuite: ensemble: %v", err)
		}
		zk.ready = zkQuorumServing
		t.Cleanup(zk.cleanup)
		e.members = append(e.members, zk)
	}

	var lastErr error
	for attempt := 1; attempt <= zkStartAttempts; attempt++ {
		if err := e.configure(); err != nil {
			t.Fatalf("testsuite: ensemble: %v", err)
		}
		lastErr = e.launchAll()
		if lastErr == nil {
			return e
		}
		conflict := false
		for _, zk := range e.members {
			if p := zk.Process(); p != nil {
				_ = p.kill()
			}
			conflict = conflict || zk.portConflict()
		}
		if !conflict {
			break
		}
		t.Logf("testsuite: ensemble: a port was taken, retrying with other ports: %v", lastErr)
	}
	t.Fatalf("testsuite: ensemble: %v (server output is logged below)", lastErr)
	return nil
}

// configure picks 3 distinct free ports per member and writes every
// member's zoo.cfg.
func (e *Ensemble) configure() error {
	seen := map[int]bool{}
	pick := func() (int, error) {
		for {
			p, err := freePort()
			if err != nil {
				return 0, err
			}
			if !seen[p] {
				seen[p] = true
				return p, nil
			}
		}
	}
	var servers []string
	for i, zk := range e.members {
		client, err := pick()
		if err != nil {
			return err
		}
		quorum, err := pick()
		if err != nil {
			return err
		}
		election, err := pick()
		if err != nil {
			return err
		}
		zk.port = client
		servers = append(servers, fmt.Sprintf("server.%d=127.0.0.1:%d:%d", i+1, quorum, election))
	}
	for _, zk := range e.members {
		zk.quorum = append([]string{
			"initLimit=" + strconv.Itoa(ensembleInitLimit),
			"syncLimit=" + strconv.Itoa(ensembleSyncLimit),
		}, servers...)
		if err := zk.writeConfig(); err != nil {
			return err
		}
	}
	return nil
}

// launchAll starts every member, then waits until each serves in a quorum
// (no member can be ready before a majority runs).
func (e *Ensemble) launchAll() error {
	var procs []*Process
	for _, zk := range e.members {
		p, err := zk.start()
		if err != nil {
			return fmt.Errorf("%s: %w", zk.label, err)
		}
		procs = append(procs, p)
	}
	for i, zk := range e.members {
		if err := zk.awaitReady(procs[i], ensembleReadyTimeout); err != nil {
			return fmt.Errorf("%s: %w", zk.label, err)
		}
	}
	return nil
}

// Size returns the number of members.
func (e *Ensemble) Size() int { return len(e.members) }

// Member returns member i (0-based), e.g. for its Addr or Process.
func (e *Ensemble) Member(i int) *ZooKeeper {
	e.t.Helper()
	if i < 0 || i >= len(e.members) {
		e.t.Fatalf("testsuite: ensemble: no member %d (size %d)", i, len(e.members))
	}
	return e.members[i]
}

// Addrs returns the members' client addresses, in member order.
func (e *Ensemble) Addrs() []string {
	out := make([]string, len(e.members))
	for i, zk := range e.members {
		out[i] = zk.Addr()
	}
	return out
}

// Hosts returns the client addresses comma-separated, the form of the
// workers' and the CLI's --zk-hosts.
func (e *Ensemble) Hosts() string { return strings.Join(e.Addrs(), ",") }

// Kill SIGKILLs member i (a crash) and waits for it to exit.
func (e *Ensemble) Kill(i int) {
	e.t.Helper()
	e.Member(i).Kill()
}

// Restart starts member i again (stopping it first if it runs) with the
// same ports and data, and waits until it has rejoined the quorum as leader
// or follower. It fails t if it does not.
func (e *Ensemble) Restart(t testing.TB, i int) {
	t.Helper()
	e.Member(i).Restart(t)
}

// Mode returns what member i answers to srvr: "leader", "follower" (or
// "standalone"), or "" when it is down or not serving (e.g. during an
// election).
func (e *Ensemble) Mode(i int) string {
	zk := e.Member(i)
	if p := zk.Process(); p == nil || p.Exited() {
		return ""
	}
	mode, err := zkMode(zk.Addr())
	if err != nil {
		return ""
	}
	return mode
}

// Leader returns the index of the member that currently is the leader, or
// -1 if none is (an election is under way, or no quorum).
func (e *Ensemble) Leader() int {
	for i := range e.members {
		if e.Mode(i) == "leader" {
			return i
		}
	}
	return -1
}

// WaitLeader waits until some member is the leader and returns its index.
func (e *Ensemble) WaitLeader(t testing.TB, timeout time.Duration) int {
	t.Helper()
	leader := -1
	Eventually(t, timeout, "a ZooKeeper leader", func() (bool, error) {
		leader = e.Leader()
		return leader >= 0, nil
	})
	return leader
}

// zkMode asks the server at addr for its mode (srvr's "Mode:" line).
func zkMode(addr string) (string, error) {
	out, err := FourLetterWord(addr, "srvr")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(out, "\n") {
		if mode, ok := strings.CutPrefix(line, "Mode:"); ok {
			return strings.TrimSpace(mode), nil
		}
	}
	return "", fmt.Errorf("srvr answered %q", strings.TrimSpace(out))
}

// zkQuorumServing checks that the server at addr answers ruok and serves as
// leader or follower of a quorum.
func zkQuorumServing(addr string) error {
	out, err := FourLetterWord(addr, "ruok")
	if err != nil {
		return err
	}
	if out != "imok" {
		return fmt.Errorf("ruok answered %q, want imok", out)
	}
	mode, err := zkMode(addr)
	if err != nil {
		return err
	}
	if mode != "leader" && mode != "follower" {
		return errors.New("mode " + mode + ", want leader or follower")
	}
	return nil
}
