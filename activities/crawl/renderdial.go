package crawl

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"time"

	xproxy "golang.org/x/net/proxy"

	"github.com/batoncrawl/baton/activities/render"
)

// renderDial returns the dialler of a rendered page's connections (every
// request of the browser goes through it, see render.Request.Dial).
// Without a job proxy it dials under the Engine's Policy, private
// addresses refused too under the job's DenyPrivate, each address checked
// as it is dialled (a typed IP seed's own host:port under the Policy
// only, as its first plain fetch). With a job proxy it tunnels through
// the proxy (CONNECT, or SOCKS5), dialling the proxy as the job's
// fetches do; the proxy dials the targets, so their host names are
// checked instead.
func (e *Engine) renderDial(pr prepared) (render.DialFunc, error) {
	guard := pr.opts.DenyPrivate
	if pr.opts.Proxy != "" {
		tr, err := e.transport(guard, pr.opts.Proxy)
		if err != nil {
			return nil, err
		}
		u, err := url.Parse(pr.opts.Proxy)
		if err != nil {
			return nil, fmt.Errorf("proxy: %v", err)
		}
		return func(ctx context.Context, _, addr string) (net.Conn, error) {
			host, _, _ := net.SplitHostPort(addr)
			if guard || e.Policy.Active() {
				if err := e.checkHost(ctx, host, guard); err != nil {
					return nil, err
				}
			}
			return dialVia(ctx, tr.DialContext, u, addr)
		}, nil
	}
	pol := e.Policy
	pol.DenyPrivate = pol.DenyPrivate || guard
	typed := ""
	if pr.typed {
		port := pr.b.url.Port()
		if port == "" {
			port = map[string]string{"http": "80", "https": "443"}[pr.b.url.Scheme]
		}
		typed = net.JoinHostPort(pr.b.url.Hostname(), port)
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if addr == typed {
			return e.Policy.DialContext(ctx, network, addr)
		}
		return pol.DialContext(ctx, network, addr)
	}, nil
}

type dialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

func (d dialFunc) Dial(network, addr string) (net.Conn, error) {
	return d(context.Background(), network, addr)
}

func (d dialFunc) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return d(ctx, network, addr)
}

// dialVia opens a connection to addr through proxy (http, https or
// socks5), dialling the proxy with dial.
func dialVia(ctx context.Context, dial dialFunc, proxy *url.URL, addr string) (net.Conn, error) {
	if proxy.Scheme == "socks5" || proxy.Scheme == "socks5h" {
		d, err := xproxy.FromURL(proxy, dial)
		if err != nil {
			return nil, err
		}
		if cd, ok := d.(xproxy.ContextDialer); ok {
			return cd.DialContext(ctx, "tcp", addr)
		}
		return d.Dial("tcp", addr)
	}
	port := proxy.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[proxy.Scheme]
	}
	c, err := dial(ctx, "tcp", net.JoinHostPort(proxy.Hostname(), port))
	if err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	} else {
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	}
	if proxy.Scheme == "https" {
		tc := tls.Client(c, &tls.Config{ServerName: proxy.Hostname()})
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = c.Close()
			return nil, fmt.Errorf("proxy %s: %w", proxyName(proxy), err)
		}
		c = tc
	}
	req := &http.Request{Method: http.MethodConnect, URL: &url.URL{Opaque: addr}, Host: addr, Header: http.Header{}}
	if u := proxy.User; u != nil {
		pass, _ := u.Password()
		req.Header.Set("Proxy-Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(u.Username()+":"+pass)))
	}
	br := bufio.NewReader(c)
	err = req.Write(c)
	var resp *http.Response
	if err == nil {
		resp, err = http.ReadResponse(br, req)
	}
	if err == nil {
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("CONNECT %s: %s", addr, resp.Status)
		}
	}
	if err == nil && br.Buffered() > 0 {
		err = fmt.Errorf("CONNECT %s: data before the tunnel", addr)
	}
	if err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("proxy %s: %w", proxyName(proxy), err)
	}
	_ = c.SetDeadline(time.Time{})
	return c, nil
}
