package testsuite_test

import (
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/testsuite"
)

// The hosts harness itself: each host reaches the bridge and its own
// loopback, a process started in a host's namespace has the host's
// address, a partitioned host reaches nothing and nothing reaches it while
// the others carry on, a healed one is back, and everything is removed
// when the test ends.
func TestHostsArePartitionedAndHealed(t *testing.T) {
	var made *testsuite.Hosts
	t.Run("hosts", func(t *testing.T) {
		start := time.Now()
		h := testsuite.NewHosts(t, 2)
		made = h
		t.Logf("2 hosts made in %v", time.Since(start).Round(time.Millisecond))
		h1, h2 := h.Host(1), h.Host(2)
		require.True(t, h.Subnet().Contains(net.ParseIP(h1.IP)))
		_, bench, _ := net.ParseCIDR("198.18.0.0/15")
		require.True(t, bench.Contains(net.ParseIP(h.ServerIP())), "a benchmarking address: %s", h.ServerIP())

		p := testsuite.StartProcess(t, testsuite.ProcessSpec{Name: "ip-in-host-2", Path: "ip",
			Args: []string{"-o", "-4", "addr", "show"}, Netns: h2.Netns})
		require.NoError(t, p.Wait(10*time.Second), p.Logs())
		assert.Contains(t, p.Logs(), " "+h2.IP+"/24", "the process runs on host 2")
		assert.Contains(t, p.Logs(), " 127.0.0.1/8", "with its loopback up")
		assert.NotContains(t, p.Logs(), h.ServerIP()+"/", "and not on the bridge")

		srv := h.Listen()
		t.Cleanup(func() { srv.Close() })
		go serveAndClose(srv)
		// A listener of host 1's, on its address.
		var onHost1 net.Listener
		require.NoError(t, h1.Do(func() error {
			var err error
			onHost1, err = net.Listen("tcp", net.JoinHostPort(h1.IP, "0"))
			return err
		}))
		t.Cleanup(func() { onHost1.Close() })
		go serveAndClose(onHost1)

		dial := func(addr string) error {
			c, err := net.DialTimeout("tcp", addr, 300*time.Millisecond)
			if err == nil {
				c.Close()
			}
			return err
		}
		require.NoError(t, h1.Dial(srv.Addr().String(), time.Second), "host 1 reaches the bridge")
		require.NoError(t, h2.Dial(onHost1.Addr().String(), time.Second), "host 2 reaches host 1")
		require.NoError(t, dial(onHost1.Addr().String()), "the servers' side reaches host 1")

		h.Partition(1)
		assert.True(t, h1.Cut())
		assert.Error(t, h1.Dial(srv.Addr().String(), 300*time.Millisecond), "partitioned host 1 reaches the bridge")
		assert.Error(t, dial(onHost1.Addr().String()), "host 1 is reached while partitioned")
		assert.Error(t, h2.Dial(onHost1.Addr().String(), 300*time.Millisecond), "host 2 reaches partitioned host 1")
		assert.NoError(t, h2.Dial(srv.Addr().String(), time.Second), "host 2 is not cut off")

		healed := h.Heal(1)
		assert.False(t, h1.Cut())
		testsuite.EventuallyEvery(t, 10*time.Second, 10*time.Millisecond, "host 1 to reach the bridge again", func() (bool, error) {
			err := h1.Dial(srv.Addr().String(), 300*time.Millisecond)
			return err == nil, err
		})
		t.Logf("host 1 reaches the bridge %v after the heal", time.Since(healed).Round(time.Millisecond))
		require.NoError(t, dial(onHost1.Addr().String()), "host 1 is reached again")
	})
	if made == nil {
		t.Skip("no hosts (see above)")
	}
	// Removed when the test (here: the subtest) ended.
	out, err := exec.Command("ip", "-o", "link", "show").CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.NotContains(t, string(out), made.Bridge(), "the bridge is removed")
	for i := 1; i <= made.Len(); i++ {
		assert.NotContains(t, string(out), made.Host(i).Link, "host %d's link is removed", i)
	}
	out, err = exec.Command("ip", "netns", "list").CombinedOutput()
	require.NoError(t, err, "%s", out)
	var namespaces []string
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			namespaces = append(namespaces, f[0])
		}
	}
	for i := 1; i <= made.Len(); i++ {
		assert.NotContains(t, namespaces, made.Host(i).Netns, "host %d's namespace is removed", i)
	}
}

func serveAndClose(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		c.Close()
	}
}
