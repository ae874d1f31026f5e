package testsuite

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Monitor is a ZooKeeper server's `mntr` answer: key → value, e.g.
// zk_packets_received, zk_packets_sent, zk_watch_count,
// zk_num_alive_connections, zk_znode_count.
type Monitor map[string]string

// ReadMonitor sends `mntr` to the server at addr and parses the reply.
func ReadMonitor(addr string) (Monitor, error) {
	out, err := FourLetterWord(addr, "mntr")
	if err != nil {
		return nil, err
	}
	m := Monitor{}
	for _, line := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "\t")
		if ok {
			m[k] = strings.TrimSpace(v)
		}
	}
	if len(m) == 0 {
		return nil, fmt.Errorf("mntr on %s: no key/value lines in %q", addr, out)
	}
	return m, nil
}

// Int returns the numeric value of key.
func (m Monitor) Int(key string) (int64, error) {
	v, ok := m[key]
	if !ok {
		return 0, fmt.Errorf("mntr: no %s", key)
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("mntr: %s: %w", key, err)
	}
	return n, nil
}

// WatchSummary is a ZooKeeper server's `wchs` answer.
type WatchSummary struct {
	Connections int // sessions holding at least one watch
	Paths       int // distinct watched paths
	Watches     int // watches in all
}

var wchsRE = regexp.MustCompile(`(\d+) connections watching (\d+) paths\s+Total watches:\s*(\d+)`)

// ReadWatches sends `wchs` to the server at addr and parses the reply.
func ReadWatches(addr string) (WatchSummary, error) {
	out, err := FourLetterWord(addr, "wchs")
	if err != nil {
		return WatchSummary{}, err
	}
	f := wchsRE.FindStringSubmatch(out)
	if f == nil {
		return WatchSummary{}, fmt.Errorf("wchs on %s: unexpected answer %q", addr, out)
	}
	var w WatchSummary
	w.Connections, _ = strconv.Atoi(f[1])
	w.Paths, _ = strconv.Atoi(f[2])
	w.Watches, _ = strconv.Atoi(f[3])
	return w, nil
}

// Connection is one client session in a ZooKeeper server's `cons` answer.
type Connection struct {
	Session  int64 // session id
	Received int64 // packets received from the client on this connection
	Sent     int64 // packets sent to it
}

var consRE = regexp.MustCompile(`recved=(\d+),sent=(\d+),sid=0x([0-9a-fA-F]+)`)

// ReadConnections sends `cons` to the server at addr and returns its client
// sessions (connections without a session, such as the one asking, are
// left out).
func ReadConnections(addr string) ([]Connection, error) {
	out, err := FourLetterWord(addr, "cons")
	if err != nil {
		return nil, err
	}
	var cs []Connection
	for _, f := range consRE.FindAllStringSubmatch(out, -1) {
		var c Connection
		c.Received, _ = strconv.ParseInt(f[1], 10, 64)
		c.Sent, _ = strconv.ParseInt(f[2], 10, 64)
		u, err := strconv.ParseUint(f[3], 16, 64)
		if err != nil {
			return nil, fmt.Errorf("cons on %s: session id %q: %w", addr, f[3], err)
		}
		c.Session = int64(u)
		cs = append(cs, c)
	}
	return cs, nil
}
