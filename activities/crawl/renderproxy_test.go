package crawl

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/batoncrawl/baton/activities/crawl/demosite"
	"github.com/batoncrawl/baton/roles"
)

// connectProxy is a forward proxy of CONNECT tunnels that counts them by
// target and dials the targets it knows (a name the test's resolver
// does not know) at their real addresses.
type connectProxy struct {
	hosts map[string]string // target host:port → address dialled
	mu    sync.Mutex
	seen  map[string]int
}

func (p *connectProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodConnect {
		http.Error(w, "CONNECT only", http.StatusMethodNotAllowed)
		return
	}
	p.mu.Lock()
	p.seen[r.Host]++
	addr, ok := p.hosts[r.Host]
	p.mu.Unlock()
	if !ok {
		http.Error(w, "unknown host", http.StatusBadGateway)
		return
	}
	up, err := net.Dial("tcp", addr)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer up.Close()
	c, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer c.Close()
	if _, err := c.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
		return
	}
	go func() { _, _ = io.Copy(up, buf); up.(*net.TCPConn).CloseWrite() }()
	_, _ = io.Copy(c, up)
}

func (p *connectProxy) tunnels(host string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seen[host]
}

// A rendered page's every request goes through the job's --proxy: the
// site's host name resolves nowhere but at the proxy, and the page
// renders with the data its script fetched. Under the worker's
// --deny-private, the job's proxy on a private address is refused, for a
// rendered page as for a plain fetch, and the proxy is never reached.
func TestRenderThroughJobProxy(t *testing.T) {
	e, _ := renderEngine(t)
	site := demosite.NewJS(demosite.DefaultJSConfig())
	srv := httptest.NewServer(site)
	t.Cleanup(srv.Close)
	const host = "shop.baton-test.invalid:80"
	px := &connectProxy{hosts: map[string]string{host: srv.Listener.Addr().String()}, seen: map[string]int{}}
	psrv := httptest.NewServer(px)
	t.Cleanup(psrv.Close)

	opts := Options{Proxy: psrv.URL, IgnoreRobots: true, Selectors: map[string]string{"price": "span.price"},
		RenderOptions: RenderOptions{Render: RenderAlways, RenderWait: "selector:span.price"}}
	compiled, err := opts.Compile()
	if err != nil {
		t.Fatal(err)
	}
	p := e.Fetch(context.Background(), roles.Request{URL: "http://shop.baton-test.invalid/js/item/3.html"}, Auth{}, 0, compiled)
	if p.Error != "" || !p.Rendered {
		t.Fatalf("rendered %v, error %q; tunnels %v; item %d data %d", p.Rendered, p.Error, px.seen, site.Hits("/js/item/3.html"), site.Hits("/js/data/3.json"))
	}
	if got := p.Fields["price"]; len(got) != 1 || got[0] != demosite.ItemPrice(3) {
		t.Errorf("price %q, want the one the script fetched through the proxy", got)
	}
	if px.tunnels(host) == 0 || site.Hits("/js/data/3.json") != 1 {
		t.Errorf("%d tunnels through the proxy, data fetched %d times", px.tunnels(host), site.Hits("/js/data/3.json"))
	}

	e.Policy = Policy{DenyPrivate: true}
	before := px.tunnels(host)
	var errs []string
	for _, mode := range []string{RenderNever, RenderAlways} {
		opts.Render = mode
		compiled, err := opts.Compile()
		if err != nil {
			t.Fatal(err)
		}
		p := e.Fetch(context.Background(), roles.Request{URL: "http://shop.baton-test.invalid/js/item/4.html"}, Auth{}, 0, compiled)
		if !strings.Contains(p.Error, "127.0.0.1") || !strings.Contains(p.Error, "private") {
			t.Errorf("--render %s: error %q, want the proxy's private address refused", mode, p.Error)
		}
		errs = append(errs, p.Error)
	}
	t.Logf("refusals: %q", errs)
	if n := px.tunnels(host) - before; n != 0 {
		t.Errorf("the refused proxy was reached %d times", n)
	}
}
