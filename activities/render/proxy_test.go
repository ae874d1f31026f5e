package render

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestDialRefusesPrivateAddressAtConnect renders a page whose script
// fetches, and opens a WebSocket to, a host name (localhost) that
// resolves to a loopback address the page's dialler refuses: both are
// refused when the connection is dialled, after resolution, and the
// target is never reached; without the dialler it is.
func TestDialRefusesPrivateAddressAtConnect(t *testing.T) {
	p := testPool(t, nil)
	target, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = target.Close() })
	var reached atomic.Int32
	go func() {
		for {
			c, err := target.Accept()
			if err != nil {
				return
			}
			reached.Add(1)
			_ = c.Close()
		}
	}()
	port := target.Addr().(*net.TCPAddr).Port
	page := fmt.Sprintf(`<html><body><p id=done>page</p><script>
fetch("http://localhost:%d/secret").catch(() => {});
try { new WebSocket("ws://localhost:%d/socket"); } catch (e) {}
</script></body></html>`, port, port)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, page)
	}))
	t.Cleanup(srv.Close)

	var mu sync.Mutex
	var refused []string
	// A dialler that checks the address it connects to: the target's
	// port on any loopback address is refused.
	d := &net.Dialer{Timeout: 5 * time.Second, Control: func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err == nil && int(ap.Port()) == port {
			mu.Lock()
			refused = append(refused, address)
			mu.Unlock()
			return fmt.Errorf("refused private address %s", ap.Addr())
		}
		return err
	}}
	res, err := p.Render(context.Background(), Request{URL: srv.URL, Wait: WaitLoad, Dial: d.DialContext})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(refused) >= 2 // the fetch and the WebSocket
	}, "the fetch and the WebSocket refused at dial time")
	if n := reached.Load(); n != 0 {
		t.Errorf("the refused address was reached %d times", n)
	}
	if res.Refused < 1 {
		t.Errorf("Result.Refused = %d, want the refused dials counted", res.Refused)
	}
	mu.Lock()
	if !strings.HasPrefix(refused[0], "127.0.0.1:") && !strings.HasPrefix(refused[0], "[::1]:") {
		t.Errorf("refused %q, want the resolved loopback address", refused[0])
	}
	mu.Unlock()

	// Without the dialler the same page reaches it: the test can fail.
	if _, err := p.Render(context.Background(), Request{URL: srv.URL, Wait: WaitLoad}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, func() bool { return reached.Load() >= 2 }, "the unguarded page reaching the target twice")
}
