package testsuite

import (
	"fmt"
	"net"
	"testing"
)

// FreePort returns a TCP port on 127.0.0.1 that was free at the time of the
// call (the kernel picks it; the listener is closed before returning).
// Another process may still grab it before the caller binds it, so servers
// started by this package retry with a fresh port if binding fails.
func FreePort(t testing.TB) int {
	t.Helper()
	port, err := freePort()
	if err != nil {
		t.Fatalf("testsuite: %v", err)
	}
	return port
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find free port: listen on 127.0.0.1:0: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		return 0, fmt.Errorf("find free port: close listener: %w", err)
	}
	return port, nil
}

// ClosedPort returns a loopback address nothing listens on (for a client
// that must find its server unreachable).
func ClosedPort(t testing.TB) string {
	t.Helper()
	port, err := freePort()
	if err != nil {
		t.Fatalf("testsuite: %v", err)
	}
	return fmt.Sprintf("127.0.0.1:%d", port)
}
