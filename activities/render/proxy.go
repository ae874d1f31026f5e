package render

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"
)

// DialFunc dials a connection of a page (Request.Dial).
type DialFunc func(ctx context.Context, network, address string) (net.Conn, error)

// tabProxy is the forward proxy of a tab: its browser context sends every
// request through it (loopback too), absolute-form HTTP requests and
// CONNECT tunnels (https, WebSocket), and it dials each connection with
// the current page's Request.Dial, so that the address checked is the
// address connected to. Between pages it refuses, and a new page starts
// with none of the last page's connections.
type tabProxy struct {
	ln  net.Listener
	srv *http.Server

	mu    sync.Mutex
	cur   *pageRun
	tr    *http.Transport    // the current page's, for HTTP requests
	conns map[net.Conn]bool  // the browser's connections to the proxy
	tuns  map[io.Closer]bool // the current page's tunnels' ends
}

// hopHeaders are not forwarded.
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authorization", "Proxy-Authenticate", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

func newTabProxy() (*tabProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &tabProxy{ln: ln, conns: map[net.Conn]bool{}, tuns: map[io.Closer]bool{}}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second, ConnState: p.track}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// url is the proxy's address for the browser (--proxy-server).
func (p *tabProxy) url() string { return "http://" + p.ln.Addr().String() }

func (p *tabProxy) track(c net.Conn, s http.ConnState) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch s {
	case http.StateNew:
		p.conns[c] = true
	case http.StateClosed, http.StateHijacked:
		delete(p.conns, c)
	}
}

// setPage makes pr the page whose connections the proxy dials (nil:
// none) and closes every connection of the page before.
func (p *tabProxy) setPage(pr *pageRun) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.Close()
	}
	for c := range p.tuns {
		_ = c.Close()
	}
	clear(p.tuns)
	if p.tr != nil {
		p.tr.CloseIdleConnections()
		p.tr = nil
	}
	p.cur = pr
	if pr != nil {
		p.tr = &http.Transport{DialContext: pr.dial, MaxResponseHeaderBytes: 1 << 20, ResponseHeaderTimeout: time.Minute, DisableCompression: true}
	}
}

func (p *tabProxy) close() {
	p.setPage(nil)
	_ = p.srv.Close()
}

// page returns the current page and its transport; nil: none.
func (p *tabProxy) page() (*pageRun, *http.Transport) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cur, p.tr
}

func (p *tabProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	pr, tr := p.page()
	switch {
	case pr == nil:
		http.Error(w, "no page", http.StatusServiceUnavailable)
	case r.Method == http.MethodConnect:
		p.tunnel(w, r, pr)
	case !r.URL.IsAbs():
		http.Error(w, "not a proxy request", http.StatusBadRequest)
	default:
		forward(w, r, tr)
	}
}

// forward sends an absolute-form HTTP request on; a refused or failed
// connection closes the browser's, which reports a network error.
func forward(w http.ResponseWriter, r *http.Request, tr *http.Transport) {
	out := r.Clone(r.Context())
	out.RequestURI = ""
	for _, h := range hopHeaders {
		out.Header.Del(h)
	}
	resp, err := tr.RoundTrip(out)
	if err != nil {
		abort(w)
		return
	}
	defer resp.Body.Close()
	for _, h := range hopHeaders {
		resp.Header.Del(h)
	}
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

// abort closes the browser's connection without an answer.
func abort(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if c, _, err := hj.Hijack(); err == nil {
			_ = c.Close()
			return
		}
	}
	panic(http.ErrAbortHandler)
}

// tunnel dials r's authority and splices the browser's connection to it.
func (p *tabProxy) tunnel(w http.ResponseWriter, r *http.Request, pr *pageRun) {
	up, err := pr.dial(r.Context(), "tcp", r.Host)
	if err != nil {
		http.Error(w, "refused", http.StatusForbidden)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		_ = up.Close()
		http.Error(w, "no tunnel", http.StatusInternalServerError)
		return
	}
	c, buf, err := hj.Hijack()
	if err != nil {
		_ = up.Close()
		return
	}
	p.mu.Lock()
	if p.cur != pr { // the page ended meanwhile
		p.mu.Unlock()
		_ = c.Close()
		_ = up.Close()
		return
	}
	p.tuns[c], p.tuns[up] = true, true
	p.mu.Unlock()
	if _, err := c.Write([]byte("HTTP/1.1 200 Connection Established\r\n\r\n")); err != nil {
		_ = c.Close()
		_ = up.Close()
		return
	}
	go splice(up, buf.Reader, c)
	go splice(c, up, up)
}

// splice copies from src to dst, then closes both ends' writers.
func splice(dst net.Conn, src io.Reader, srcConn net.Conn) {
	_, _ = io.Copy(dst, src)
	_ = dst.Close()
	_ = srcConn.Close()
}

// dial dials address for the page with its Request.Dial (a plain dialer
// when none), and remembers a refusal of its document's host.
func (pr *pageRun) dial(ctx context.Context, network, address string) (net.Conn, error) {
	d := pr.req.Dial
	if d == nil {
		d = (&net.Dialer{Timeout: 30 * time.Second}).DialContext
	}
	c, err := d(ctx, network, address)
	if err != nil && pr.doc != nil && address == hostPort(pr.doc) {
		pr.mu.Lock()
		if pr.docDialErr == nil {
			pr.docDialErr = err
		}
		pr.mu.Unlock()
	}
	if err != nil {
		pr.dialRefused.Add(1)
		return nil, err
	}
	return c, nil
}

// hostPort is u's host:port, the port of its scheme when it has none.
func hostPort(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	return net.JoinHostPort(u.Hostname(), port)
}
