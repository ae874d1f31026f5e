package testsuite

import (
	"testing"

	"github.com/go-zookeeper/zk"
)

// ReadMonitor and ReadWatches see a client's traffic and its watch.
func TestZooKeeperMonitorAndWatches(t *testing.T) {
	t.Parallel()
	server := StartZooKeeper(t)
	before, err := ReadMonitor(server.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := before.Int("zk_version"); err == nil {
		t.Fatal("Int accepted the non-numeric zk_version")
	}
	if _, err := before.Int("zk_no_such_key"); err == nil {
		t.Fatal("Int accepted a missing key")
	}
	conn := zkConnect(t, server.Addr())
	if _, err := conn.Create("/watched", []byte("v"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("create /watched: %v", err)
	}
	if _, _, _, err := conn.GetW("/watched"); err != nil {
		t.Fatalf("getw /watched: %v", err)
	}
	after, err := ReadMonitor(server.Addr())
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"zk_packets_received", "zk_packets_sent"} {
		b, err := before.Int(key)
		if err != nil {
			t.Fatal(err)
		}
		a, err := after.Int(key)
		if err != nil {
			t.Fatal(err)
		}
		if a < b+2 { // connect, create, getw at least
			t.Fatalf("%s went from %d to %d across three requests", key, b, a)
		}
	}
	cs, err := ReadConnections(server.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 || cs[0].Session != conn.SessionID() || cs[0].Received < 3 {
		t.Fatalf("cons = %+v, want the one session %#x with >= 3 packets", cs, conn.SessionID())
	}
	w, err := ReadWatches(server.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if w.Connections != 1 || w.Paths != 1 || w.Watches != 1 {
		t.Fatalf("wchs = %+v, want 1 connection watching 1 path, 1 watch", w)
	}
}
