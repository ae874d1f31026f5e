package crawl

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"syscall"
	"time"
)

// Policy is the operator's rule for the addresses a worker dials on a
// job's behalf: pages, redirects, robots.txt, sitemaps, the job's proxy,
// a crawler's Start hook, sinks and the client crawler code gets
// (Client). It is checked on the address actually dialled, after
// resolution, so that neither a redirect nor a DNS answer that changes
// between a check and the connection gets round it. A browser's request
// interceptor calls CheckAddr (or dials through DialContext) to follow
// the same rule. The zero Policy allows every address.
type Policy struct {
	// DenyPrivate refuses private, loopback, link-local and other
	// non-public addresses (the worker's --deny-private).
	DenyPrivate bool
	// Allow are ranges DenyPrivate does not refuse (an internal site or
	// proxy the operator means to reach).
	Allow []netip.Prefix
	// Deny are ranges always refused, whatever DenyPrivate and Allow say.
	Deny []netip.Prefix

	// private judges the addresses DenyPrivate refuses (isPrivate when
	// nil); a test may replace it.
	private func(netip.Addr) bool
}

// Active reports whether the policy refuses any address.
func (p Policy) Active() bool { return p.DenyPrivate || len(p.Deny) > 0 }

// CheckAddr refuses an address the policy does not let a worker dial.
func (p Policy) CheckAddr(a netip.Addr) error { return p.check(a, false) }

// check is CheckAddr with private addresses refused also when
// denyPrivate (a job's own --deny-private).
func (p Policy) check(a netip.Addr, denyPrivate bool) error {
	a = a.Unmap()
	for _, d := range p.Deny {
		if d.Contains(a) {
			return &privateAddrError{addr: a.String(), rule: "denied by the operator (" + d.String() + ")"}
		}
	}
	if !p.DenyPrivate && !denyPrivate {
		return nil
	}
	for _, al := range p.Allow {
		if al.Contains(a) {
			return nil
		}
	}
	private := p.private
	if private == nil {
		private = isPrivate
	}
	if private(a) {
		return &privateAddrError{addr: a.String()}
	}
	return nil
}

// checkHost refuses a host name that is, or resolves to, an address the
// policy refuses (with private addresses refused when denyPrivate). The
// dialler checks again; this check makes the usual case fail early, and
// is all there is for the targets of a proxy, which dials them itself.
func (p Policy) checkHost(ctx context.Context, hostname string, denyPrivate bool) error {
	hostname = strings.Trim(hostname, "[]")
	if a, err := netip.ParseAddr(hostname); err == nil {
		return p.check(a, denyPrivate)
	}
	if !p.Active() && !denyPrivate {
		return nil
	}
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", hostname)
	if err != nil {
		return nil // the fetch reports the resolution error
	}
	for _, a := range addrs {
		if err := p.check(a, denyPrivate); err != nil {
			pe := err.(*privateAddrError)
			pe.addr = fmt.Sprintf("%s (%s)", pe.addr, hostname)
			return pe
		}
	}
	return nil
}

// control is a net.Dialer's Control that refuses what check refuses.
func control(check func(netip.Addr) error) func(network, address string, _ syscall.RawConn) error {
	return func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return &privateAddrError{addr: address}
		}
		return check(ap.Addr())
	}
}

// DialContext dials address (host:port) under the policy: every address
// the host resolves to is checked as it is dialled.
func (p Policy) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: control(p.CheckAddr)}
	return d.DialContext(ctx, network, address)
}

// Transport returns a transport that dials under the policy and uses no
// proxy (HTTP_PROXY and the like are not honoured: a proxy would dial for
// it, out of the policy's sight).
func (p Policy) Transport() *http.Transport {
	t := newTransport(nil, nil)
	t.Proxy = nil
	t.DialContext = p.DialContext
	return t
}

// Client returns a client that dials under the policy (every redirect
// hop's address is checked as it is dialled) and gives up after timeout
// (0: none, the context's deadline only).
func (p Policy) Client(timeout time.Duration) *http.Client {
	return &http.Client{Transport: p.Transport(), Timeout: timeout}
}

// ParsePrefixes reads address ranges given as CIDR prefixes or single
// addresses ("10.0.0.0/8", "fd00::/8", "192.0.2.7").
func ParsePrefixes(ss []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range ss {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if a, err := netip.ParseAddr(s); err == nil {
			out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		pfx, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("address range %q: want an address or CIDR prefix (10.0.0.0/8)", s)
		}
		out = append(out, pfx.Masked())
	}
	return out, nil
}

// CrawlerClientTimeout bounds one request of the client crawler code gets
// (Engine.Client).
const CrawlerClientTimeout = time.Minute

// Client returns the HTTP client for crawler code (a Start hook's log-in,
// a handler's own requests, a sink's delivery): it dials under the
// Engine's Policy, private addresses refused too when denyPrivate (a
// job's own --deny-private), every redirect hop's address checked as it
// is dialled; it honours no proxy from the environment. Its connection
// pool is shared; set the Policy before the first call.
func (e *Engine) Client(denyPrivate bool) *http.Client {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.clients[b2i(denyPrivate)] == nil {
		p := e.Policy
		p.DenyPrivate = p.DenyPrivate || denyPrivate
		e.clients[b2i(denyPrivate)] = p.Client(CrawlerClientTimeout)
	}
	return e.clients[b2i(denyPrivate)]
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
