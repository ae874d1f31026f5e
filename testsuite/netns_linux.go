package testsuite

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// netnsRunDir is where `ip netns add` mounts its namespaces.
const netnsRunDir = "/var/run/netns"

// hostsSeq numbers the Hosts of this test process (part of their names).
var hostsSeq atomic.Int64

// NewHosts makes n hosts (see Hosts) and removes them when the test ends.
// It skips the test where the machine cannot make them (not Linux, not
// root, no ip, no bridge or veth driver), saying why; under -short too.
func NewHosts(t testing.TB, n int) *Hosts {
	t.Helper()
	skipIfShort(t, "network namespaces")
	if n < 1 || n > 250 {
		t.Fatalf("testsuite: hosts: %d hosts, want 1..250", n)
	}
	if uid := os.Geteuid(); uid != 0 {
		cannotMakeHosts(t, "network namespaces, veth pairs and a bridge need root (running as uid %d)", uid)
	}
	if _, err := exec.LookPath("ip"); err != nil {
		cannotMakeHosts(t, "iproute2's ip is not installed: %v", err)
	}
	start := time.Now()
	sweepStaleHosts(t)
	subnet, err := freeHostsSubnet()
	if err != nil {
		t.Fatalf("testsuite: hosts: %v", err)
	}
	base := subnet.IP.To4()
	addr := func(last int) string { return net.IPv4(base[0], base[1], base[2], byte(last)).String() }
	seq := hostsSeq.Add(1) & 0xff
	pid := os.Getpid()
	h := &Hosts{t: t, bridge: fmt.Sprintf("btb%06x%02x", pid, seq), serverIP: addr(1), subnet: subnet}
	for i := 1; i <= n; i++ {
		h.hosts = append(h.hosts, &Host{Index: i, IP: addr(i + 1),
			Netns: fmt.Sprintf("baton-%d-%d-%d", pid, seq, i),
			Link:  fmt.Sprintf("btv%06x%02x%02x", pid, seq, i)})
	}
	t.Cleanup(h.remove)

	// The first privileged steps say whether the machine can do it at all.
	if out, err := ipCmd("link", "add", h.bridge, "type", "bridge"); err != nil {
		cannotMakeHosts(t, "cannot create a bridge (ip link add %s type bridge: %v: %s); "+
			"the kernel's bridge driver is needed", h.bridge, err, out)
	}
	if out, err := ipCmd("netns", "add", h.hosts[0].Netns); err != nil {
		cannotMakeHosts(t, "ip netns add: %v: %s", err, out)
	}
	steps := [][]string{
		{"addr", "add", h.serverIP + "/24", "dev", h.bridge},
		{"link", "set", h.bridge, "up"},
	}
	for _, hs := range h.hosts {
		if hs.Index > 1 {
			steps = append(steps, []string{"netns", "add", hs.Netns})
		}
		steps = append(steps,
			[]string{"link", "add", hs.Link, "type", "veth", "peer", "name", "eth0", "netns", hs.Netns},
			[]string{"link", "set", hs.Link, "master", h.bridge},
			[]string{"link", "set", hs.Link, "up"},
			[]string{"-n", hs.Netns, "link", "set", "lo", "up"},
			[]string{"-n", hs.Netns, "addr", "add", hs.IP + "/24", "dev", "eth0"},
			[]string{"-n", hs.Netns, "link", "set", "eth0", "up"},
		)
	}
	for i, s := range steps {
		if out, err := ipCmd(s...); err != nil {
			if i == 2 && strings.Contains(string(out), "veth") {
				cannotMakeHosts(t, "cannot create a veth pair (ip %s: %v: %s)", strings.Join(s, " "), err, out)
			}
			t.Fatalf("testsuite: hosts: ip %s: %v: %s", strings.Join(s, " "), err, out)
		}
	}
	// Every host reaches the bridge and its own loopback.
	ln := h.Listen()
	defer ln.Close()
	go acceptAndClose(ln)
	for _, hs := range h.hosts {
		err := poll(5*time.Second, 10*time.Millisecond, func() (bool, error) {
			if err := hs.Dial(ln.Addr().String(), time.Second); err != nil {
				return false, err
			}
			return true, nil
		})
		if err != nil {
			t.Fatalf("testsuite: hosts: host %d (%s, %s) does not reach the bridge at %s: %v",
				hs.Index, hs.Netns, hs.IP, ln.Addr(), err)
		}
		if err := hs.Do(func() error {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return err
			}
			defer l.Close()
			go acceptAndClose(l)
			c, err := net.DialTimeout("tcp", l.Addr().String(), time.Second)
			if err != nil {
				return err
			}
			return c.Close()
		}); err != nil {
			t.Fatalf("testsuite: hosts: host %d (%s): loopback: %v", hs.Index, hs.Netns, err)
		}
	}
	t.Logf("testsuite: hosts: %d hosts %s..%s on bridge %s (%s) in %v", n, h.hosts[0].IP,
		h.hosts[n-1].IP, h.bridge, h.serverIP, time.Since(start).Round(time.Millisecond))
	return h
}

func acceptAndClose(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		_ = c.Close()
	}
}

// Partition cuts host i off: its link to the bridge goes down. Its
// packets, and those sent to it, are dropped from then on.
func (h *Hosts) Partition(i int) time.Time {
	h.t.Helper()
	return h.setLink(i, "down")
}

// Heal brings host i's link to the bridge back up.
func (h *Hosts) Heal(i int) time.Time {
	h.t.Helper()
	return h.setLink(i, "up")
}

func (h *Hosts) setLink(i int, state string) time.Time {
	h.t.Helper()
	hs := h.Host(i)
	if out, err := ipCmd("link", "set", hs.Link, state); err != nil {
		h.t.Fatalf("testsuite: hosts: host %d: ip link set %s %s: %v: %s", i, hs.Link, state, err, out)
	}
	at := time.Now()
	hs.mu.Lock()
	hs.cut = state == "down"
	hs.mu.Unlock()
	return at
}

// Dial opens (and closes) a TCP connection to addr from the host, within
// timeout: whether the host reaches it.
func (hs *Host) Dial(addr string, timeout time.Duration) error {
	return hs.Do(func() error {
		c, err := net.DialTimeout("tcp", addr, timeout)
		if err != nil {
			return err
		}
		return c.Close()
	})
}

// Do runs fn on a thread of this process moved into the host's network
// namespace: sockets fn opens (without starting goroutines) are the
// host's, and stay so.
func (hs *Host) Do(fn func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// A thread that cannot go back stays locked: it ends with the
		// goroutine instead of running others in the host's namespace.
		self, err := os.Open(fmt.Sprintf("/proc/%d/task/%d/ns/net", os.Getpid(), unix.Gettid()))
		if err != nil {
			done <- err
			return
		}
		defer self.Close()
		ns, err := os.Open(filepath.Join(netnsRunDir, hs.Netns))
		if err != nil {
			done <- err
			return
		}
		defer ns.Close()
		if err := setns(ns); err != nil {
			done <- fmt.Errorf("enter %s: %w", hs.Netns, err)
			return
		}
		err = fn()
		if rerr := setns(self); rerr != nil {
			done <- errors.Join(err, fmt.Errorf("leave %s: %w", hs.Netns, rerr))
			return
		}
		runtime.UnlockOSThread()
		done <- err
	}()
	return <-done
}

func setns(f *os.File) error { return unix.Setns(int(f.Fd()), unix.CLONE_NEWNET) }

// remove deletes the hosts' links, namespaces and bridge (whatever of them
// exists); the processes in the namespaces are gone by then (their
// cleanups ran first).
func (h *Hosts) remove() {
	var errs []string
	gone := func(out []byte) bool {
		s := string(out)
		return strings.Contains(s, "Cannot find device") || strings.Contains(s, "No such file")
	}
	for _, hs := range h.hosts {
		if out, err := ipCmd("link", "del", hs.Link); err != nil && !gone(out) {
			errs = append(errs, fmt.Sprintf("ip link del %s: %v: %s", hs.Link, err, out))
		}
		if out, err := ipCmd("netns", "del", hs.Netns); err != nil && !gone(out) {
			errs = append(errs, fmt.Sprintf("ip netns del %s: %v: %s", hs.Netns, err, out))
		}
	}
	if out, err := ipCmd("link", "del", h.bridge); err != nil && !gone(out) {
		errs = append(errs, fmt.Sprintf("ip link del %s: %v: %s", h.bridge, err, out))
	}
	if len(errs) > 0 {
		h.t.Errorf("testsuite: hosts: removing them: %s", strings.Join(errs, "; "))
	}
}

// ipCmd runs ip with args and returns its output.
func ipCmd(args ...string) ([]byte, error) {
	out, err := exec.Command("ip", args...).CombinedOutput()
	return bytes.TrimSpace(out), err
}

// sweepStaleHosts removes the namespaces, bridges and links of test
// processes that no longer run (killed before their cleanups ran).
func sweepStaleHosts(t testing.TB) {
	dead := func(pid int) bool {
		err := syscall.Kill(pid, 0)
		return pid > 0 && pid != os.Getpid() && errors.Is(err, syscall.ESRCH)
	}
	if out, err := exec.Command("ip", "netns", "list").Output(); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) == 0 || !strings.HasPrefix(f[0], "baton-") {
				continue
			}
			parts := strings.Split(f[0], "-")
			if pid, err := strconv.Atoi(parts[1]); err == nil && len(parts) == 4 && dead(pid) {
				if out, err := ipCmd("netns", "del", f[0]); err != nil {
					t.Logf("testsuite: hosts: remove stale namespace %s: %v: %s", f[0], err, out)
				}
			}
		}
	}
	if out, err := exec.Command("ip", "-o", "link", "show").Output(); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			// "7: btv00123401@if6: <...> ..."
			f := strings.SplitN(sc.Text(), ": ", 3)
			if len(f) < 2 {
				continue
			}
			name, _, _ := strings.Cut(f[1], "@")
			if len(name) < 9 || (!strings.HasPrefix(name, "btb") && !strings.HasPrefix(name, "btv")) {
				continue
			}
			if pid, err := strconv.ParseInt(name[3:9], 16, 32); err == nil && dead(int(pid)) {
				if out, err := ipCmd("link", "del", name); err != nil {
					t.Logf("testsuite: hosts: remove stale link %s: %v: %s", name, err, out)
				}
			}
		}
	}
}

// freeHostsSubnet picks a /24 of 198.18.0.0/15 that no interface of this
// namespace has an address in.
func freeHostsSubnet() (*net.IPNet, error) {
	_, bench, _ := net.ParseCIDR("198.18.0.0/15")
	used := map[int]bool{}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("list addresses: %w", err)
	}
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		if ip := ipn.IP.To4(); ip != nil && bench.Contains(ip) {
			used[int(ip[1]-18)<<8|int(ip[2])] = true
		}
	}
	if len(used) >= 512 {
		return nil, errors.New("every /24 of 198.18.0.0/15 is in use")
	}
	k := rand.IntN(512)
	for used[k] {
		k = (k + 1) % 512
	}
	return &net.IPNet{IP: net.IPv4(198, byte(18+k>>8), byte(k&0xff), 0).To4(), Mask: net.CIDRMask(24, 32)}, nil
}
