package testsuite

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"
)

func TestFreePort(t *testing.T) {
	port := FreePort(t)
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		t.Fatalf("listen on free port %d: %v", port, err)
	}
	l.Close()
}

func TestEventually(t *testing.T) {
	calls := 0
	Eventually(t, 5*time.Second, "third call", func() (bool, error) {
		calls++
		if calls < 3 {
			return false, fmt.Errorf("call %d", calls)
		}
		return true, nil
	})
	if calls != 3 {
		t.Fatalf("cond called %d times, want 3", calls)
	}

	err := poll(200*time.Millisecond, pollInterval, func() (bool, error) { return false, errors.New("never") })
	if err == nil || !strings.Contains(err.Error(), "never") {
		t.Fatalf("poll timeout error = %v, want one mentioning the last error", err)
	}
}

// processState returns the state letter from /proc/<pid>/stat ("" if the
// process is gone).
func processState(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2 : i+3]
	}
	return ""
}

func TestProcessLogsSignalWait(t *testing.T) {
	p := StartProcess(t, ProcessSpec{
		Name: "sh",
		Path: "/bin/sh",
		Args: []string{"-c", `echo "out $GREETING"; echo err >&2; exec sleep 300`},
		Env:  []string{"GREETING=hello"},
	})
	p.WaitForLog(t, 10*time.Second, "out hello")
	p.WaitForLog(t, 10*time.Second, "err")
	if err := p.Wait(100 * time.Millisecond); !errors.Is(err, ErrWaitTimeout) {
		t.Fatalf("Wait on running process = %v, want ErrWaitTimeout", err)
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(10 * time.Second); err == nil || errors.Is(err, ErrWaitTimeout) {
		t.Fatalf("Wait after SIGTERM = %v, want exit error", err)
	}
	if !p.Exited() || p.ExitCode() != -1 {
		t.Fatalf("Exited=%v ExitCode=%d, want true, -1 (signalled)", p.Exited(), p.ExitCode())
	}
}

func TestProcessKillKillsGroup(t *testing.T) {
	p := StartProcess(t, ProcessSpec{
		Path: "/bin/sh",
		Args: []string{"-c", `sleep 300 & echo "child=$!"; wait`},
	})
	p.WaitForLog(t, 10*time.Second, "child=")
	var child int
	for _, line := range strings.Split(p.Logs(), "\n") {
		if v, ok := strings.CutPrefix(line, "child="); ok {
			child, _ = strconv.Atoi(v)
		}
	}
	if child == 0 {
		t.Fatalf("no child pid in logs %q", p.Logs())
	}
	p.Kill()
	if !p.Exited() {
		t.Fatal("process still running after Kill")
	}
	// The orphaned grandchild may linger as a zombie until reaped.
	Eventually(t, 10*time.Second, "grandchild killed", func() (bool, error) {
		st := processState(child)
		return st == "" || st == "Z", fmt.Errorf("grandchild %d state %q", child, st)
	})
}

func zkConnect(t *testing.T, addr string) *zk.Conn {
	t.Helper()
	conn, _, err := zk.Connect([]string{addr}, 5*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatalf("connect to zookeeper %s: %v", addr, err)
	}
	t.Cleanup(conn.Close)
	return conn
}

func TestZooKeeper(t *testing.T) {
	t.Parallel()
	server := StartZooKeeper(t)
	if !strings.HasPrefix(server.Addr(), "127.0.0.1:") {
		t.Fatalf("Addr() = %q, want loopback", server.Addr())
	}
	conn := zkConnect(t, server.Addr())
	if _, err := conn.Create("/baton", []byte("hello"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("create /baton: %v", err)
	}
	data, _, err := conn.Get("/baton")
	if err != nil {
		t.Fatalf("get /baton: %v", err)
	}
	if string(data) != "hello" {
		t.Fatalf("get /baton = %q, want hello", data)
	}
	out, err := FourLetterWord(server.Addr(), "mntr")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "zk_server_state\tstandalone") {
		t.Fatalf("mntr output lacks standalone state:\n%s", out)
	}
}

func TestZooKeeperKillRestart(t *testing.T) {
	t.Parallel()
	server := StartZooKeeper(t)
	addr := server.Addr()
	conn := zkConnect(t, addr)
	if _, err := conn.Create("/kept", []byte("v1"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("create /kept: %v", err)
	}
	conn.Close()

	server.Kill()
	if _, err := FourLetterWord(addr, "ruok"); err == nil {
		t.Fatal("ruok answered after Kill")
	}
	server.Restart(t)
	if server.Addr() != addr {
		t.Fatalf("Addr() after restart = %q, want %q", server.Addr(), addr)
	}
	conn = zkConnect(t, addr)
	data, _, err := conn.Get("/kept")
	if err != nil {
		t.Fatalf("get /kept after kill+restart: %v", err)
	}
	if string(data) != "v1" {
		t.Fatalf("get /kept after kill+restart = %q, want v1", data)
	}
	if _, err := conn.Set("/kept", []byte("v2"), -1); err != nil {
		t.Fatalf("set /kept: %v", err)
	}
	conn.Close()

	// Graceful restart keeps data too.
	server.Restart(t)
	conn = zkConnect(t, addr)
	data, _, err = conn.Get("/kept")
	if err != nil {
		t.Fatalf("get /kept after restart: %v", err)
	}
	if string(data) != "v2" {
		t.Fatalf("get /kept after restart = %q, want v2", data)
	}
}

func TestTemporal(t *testing.T) {
	t.Parallel()
	server := StartTemporal(t)
	if server.Namespace() != "default" {
		t.Fatalf("Namespace() = %q, want default", server.Namespace())
	}
	if server.UIAddress() != "" {
		t.Fatalf("UIAddress() = %q, want headless", server.UIAddress())
	}
	c := server.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
		t.Fatalf("check health: %v", err)
	}
	resp, err := c.OperatorService().ListSearchAttributes(ctx,
		&operatorservice.ListSearchAttributesRequest{Namespace: server.Namespace()})
	if err != nil {
		t.Fatalf("list search attributes: %v", err)
	}
	for _, name := range SearchAttributes {
		if typ, ok := resp.GetCustomAttributes()[name]; !ok || typ != enums.INDEXED_VALUE_TYPE_KEYWORD {
			t.Errorf("search attribute %s: registered=%v type=%v, want Keyword", name, ok, typ)
		}
	}
}
