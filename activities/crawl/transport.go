package crawl

import (
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/zstd"
)

// MaxResponseHeaderBytes bounds a response's header (net/http's default
// is 10 MiB); a larger one fails the request.
const MaxResponseHeaderBytes = 1 << 20

// newTransport returns a transport of the Engine. With check set, it is
// guarded: it refuses to connect to an address check refuses (checked in
// the dialler's Control, on the address actually dialled after
// resolution, so that neither a redirect nor a DNS answer that changes
// between a check and the connection can get round it). proxy, if not
// nil, is the proxy of every request, and the only address dialled (so
// the one checked); else proxyFunc chooses (nil: none).
func newTransport(check func(netip.Addr) error, proxy *url.URL) *http.Transport {
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	t := &http.Transport{
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           1024,
		MaxIdleConnsPerHost:    64,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    10 * time.Second,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: MaxResponseHeaderBytes,
	}
	if proxy != nil {
		t.Proxy = http.ProxyURL(proxy)
	}
	if check != nil {
		if proxy != nil {
			inner, name := check, proxyName(proxy)
			check = func(a netip.Addr) error {
				err := inner(a)
				if pe, ok := err.(*privateAddrError); ok {
					pe.proxy = name
				}
				return err
			}
		}
		d.Control = control(check)
	}
	t.DialContext = d.DialContext
	return t
}

// proxyName is a proxy's URL without its credentials, for an error.
func proxyName(u *url.URL) string { return u.Scheme + "://" + u.Host }

// firstHop sends the first request of a fetch (the URL the user typed,
// which may be private) through first, and every later one (its
// redirects) through rest, the guarded transport. The two transports keep
// separate connection pools, so that a connection opened for the typed
// URL is never reused by a redirect. One per fetch; not for concurrent use
// (a client sends a redirect chain's requests one after the other).
type firstHop struct {
	first, rest http.RoundTripper
	sent        bool
}

func (f *firstHop) RoundTrip(req *http.Request) (*http.Response, error) {
	if !f.sent {
		f.sent = true
		return f.first.RoundTrip(req)
	}
	return f.rest.RoundTrip(req)
}

// isPrivate reports whether a is private, loopback, link-local,
// unspecified or otherwise not a public unicast address. An IPv6 address
// that embeds an IPv4 address for translation (NAT64 64:ff9b::/96, RFC
// 6052; 6to4 2002::/16, RFC 3056) is judged by the IPv4 address it
// reaches: on an IPv6-only network DNS64 answers every IPv4-only site with
// a 64:ff9b:: address, so refusing the whole prefix would refuse the web,
// while 64:ff9b::127.0.0.1 is the NAT64 gateway's way to loopback.
func isPrivate(a netip.Addr) bool {
	a = a.Unmap()
	if v4, ok := embeddedIPv4(a); ok {
		return isPrivate(v4)
	}
	if a.IsPrivate() || a.IsLoopback() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
		a.IsInterfaceLocalMulticast() || a.IsUnspecified() || a.IsMulticast() {
		return true
	}
	for _, p := range nonPublic {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// embeddedIPv4 returns the IPv4 address a NAT64 (64:ff9b::/96) or 6to4
// (2002::/16) address translates to.
func embeddedIPv4(a netip.Addr) (netip.Addr, bool) {
	if !a.Is6() {
		return netip.Addr{}, false
	}
	b := a.As16()
	switch {
	case nat64.Contains(a):
		return netip.AddrFrom4([4]byte(b[12:16])), true
	case sixToFour.Contains(a):
		return netip.AddrFrom4([4]byte(b[2:6])), true
	}
	return netip.Addr{}, false
}

var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
	// nonPublic are the special-purpose ranges (IANA registries, RFC 6890)
	// that netip's predicates do not cover and no public site uses.
	nonPublic = []netip.Prefix{
		netip.MustParsePrefix("0.0.0.0/8"),       // "this network"
		netip.MustParsePrefix("100.64.0.0/10"),   // carrier-grade NAT
		netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
		netip.MustParsePrefix("192.0.2.0/24"),    // documentation (TEST-NET-1)
		netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
		netip.MustParsePrefix("198.51.100.0/24"), // documentation (TEST-NET-2)
		netip.MustParsePrefix("203.0.113.0/24"),  // documentation (TEST-NET-3)
		netip.MustParsePrefix("240.0.0.0/4"),     // reserved, and the broadcast address
		netip.MustParsePrefix("::/96"),           // IPv4-compatible (deprecated)
		netip.MustParsePrefix("64:ff9b:1::/48"),  // local-use NAT64 (RFC 8215): the operator's own network
		netip.MustParsePrefix("100::/64"),        // discard-only
		netip.MustParsePrefix("2001::/32"),       // Teredo: the IPv4 it reaches is obfuscated
		netip.MustParsePrefix("2001:db8::/32"),   // documentation
	}
)

// privateAddrError refuses an address under a Policy (and a job's own
// --deny-private).
type privateAddrError struct {
	addr  string
	rule  string // "" is deny_private
	proxy string // the proxy whose address it is, if any
}

func (e *privateAddrError) Error() string {
	what := "private address " + e.addr
	if e.proxy != "" {
		what = "proxy " + e.proxy + ": private address " + e.addr
	}
	if e.rule != "" {
		return fmt.Sprintf("refused %s: %s", strings.TrimPrefix(what, "private "), e.rule)
	}
	return fmt.Sprintf("refused %s (deny_private)", what)
}

// checkPrivateHost resolves host and refuses it when any of its addresses
// is private.
func checkPrivateHost(ctx context.Context, hostname string) error {
	return Policy{DenyPrivate: true}.checkHost(ctx, hostname, true)
}

// AcceptEncoding is the Accept-Encoding of a fetch (unless its request
// sets one): the encodings the Engine decodes.
const AcceptEncoding = "gzip, br, zstd"

// boundedTransport wraps the shared transport for one attempt: it asks for
// and decodes gzip, brotli and zstd itself (bounded, unlike Colly's
// decoding, which a small compressed body can blow up) and fails a body
// larger than max instead of letting Colly truncate it silently.
type boundedTransport struct {
	base http.RoundTripper
	max  int64
	read *int64 // bytes of body read, for Page.Bytes on failure
}

type bodyTooLargeError struct{ max int64 }

func (e *bodyTooLargeError) Error() string { return fmt.Sprintf("body exceeds %d bytes", e.max) }

// contentDecoder returns the lazy decoder of a Content-Encoding the Engine
// decodes, or nil; maxBody is the body cap, which bounds the decoder's
// memory.
func contentDecoder(encoding string, maxBody int64) func(io.ReadCloser) io.ReadCloser {
	switch strings.ToLower(strings.TrimSpace(encoding)) {
	case "gzip", "x-gzip":
		return func(raw io.ReadCloser) io.ReadCloser {
			return &lazyBody{raw: raw, open: func(r io.Reader) (io.Reader, error) { return gzip.NewReader(r) }, name: "gzip"}
		}
	case "br":
		// The decoder grows its ring buffer with the output, but by a
		// meta-block's declared length at once, up to the window (104
		// bytes can ask for 16 MiB): a window above MaxDecoderWindow is
		// refused before it is reserved. (Not bounded by the body cap, as
		// zstd's is: common encoders declare 4 MiB whatever the page's
		// size, and the ring never outgrows the window.)
		window := uint64(MaxDecoderWindow)
		return func(raw io.ReadCloser) io.ReadCloser {
			return &lazyBody{raw: raw, name: "brotli", open: func(r io.Reader) (io.Reader, error) {
				br := bufio.NewReaderSize(r, 16)
				if b, err := br.Peek(1); err == nil && brotliWindow(b[0]) > window {
					return nil, &windowError{max: window}
				}
				return brotli.NewReader(br), nil
			}}
		}
	case "zstd":
		// The decoder reserves its window as soon as a frame header declares
		// it (a few hundred bytes can ask for 64 MiB): the window is bounded
		// by RFC 9659's 8 MiB, and by the body cap, which no window needs to
		// exceed. Synchronous, low-memory decoding: no goroutines, no
		// buffers ahead.
		window := decoderWindow(maxBody)
		return func(raw io.ReadCloser) io.ReadCloser {
			return &lazyBody{raw: raw, name: "zstd", open: func(r io.Reader) (io.Reader, error) {
				d, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
					zstd.WithDecoderMaxWindow(window), zstd.WithDecoderMaxMemory(window))
				if err != nil {
					return nil, err
				}
				return &zstdBody{d: d.IOReadCloser(), window: window}, nil
			}}
		}
	}
	return nil
}

// MaxDecoderWindow is the largest window of a zstd or brotli body the
// Engine decodes: RFC 9659's limit for zstd in HTTP (section 3: 8 MB),
// applied to brotli too (whose window goes to 16 MiB; encoders commonly
// declare 4 MiB or less). A larger one (for zstd: or one larger than the
// body cap) fails the page before the decoder reserves it.
const MaxDecoderWindow = 8 << 20

// decoderWindow is the largest window decoded under a body cap of maxBody.
func decoderWindow(maxBody int64) uint64 {
	return uint64(min(MaxDecoderWindow, max(maxBody, zstd.MinWindowSize)))
}

// brotliWindow is the window a brotli stream declares in its first byte
// (RFC 7932, section 9.1: WBITS, least significant bits first; the window
// is 2^WBITS-16 bytes). The large-window extension's mark counts as
// unbounded.
func brotliWindow(b byte) uint64 {
	var wbits uint
	switch {
	case b&1 == 0:
		wbits = 16
	case b>>1&7 != 0:
		wbits = 17 + uint(b>>1&7)
	case b>>4&7 == 1:
		return math.MaxUint64
	case b>>4&7 != 0:
		wbits = 8 + uint(b>>4&7)
	default:
		wbits = 17
	}
	return 1<<wbits - 16
}

// zstdBody names the window bound when a frame exceeds it.
type zstdBody struct {
	d      io.ReadCloser
	window uint64
}

func (z *zstdBody) Read(p []byte) (int, error) {
	n, err := z.d.Read(p)
	if errors.Is(err, zstd.ErrWindowSizeExceeded) || errors.Is(err, zstd.ErrDecoderSizeExceeded) {
		err = &windowError{max: z.window}
	}
	return n, err
}

func (z *zstdBody) Close() error { return z.d.Close() }

// windowError refuses a compressed body whose window exceeds max.
type windowError struct{ max uint64 }

func (e *windowError) Error() string {
	return fmt.Sprintf("window larger than %d bytes refused (8 MiB at most, RFC 9659; max_body_bytes bounds it too)", e.max)
}

func (t *boundedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Header.Get("Accept-Encoding") == "" && req.Method != http.MethodHead {
		req = req.Clone(req.Context())
		req.Header.Set("Accept-Encoding", AcceptEncoding)
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	decode := contentDecoder(resp.Header.Get("Content-Encoding"), t.max)
	if resp.Uncompressed {
		decode = nil // decoded by the transport already
	}
	if resp.ContentLength > t.max && req.Method != http.MethodHead && decode == nil &&
		!(resp.StatusCode >= 300 && resp.StatusCode < 400 && resp.Header.Get("Location") != "") {
		resp.Body.Close()
		return nil, &bodyTooLargeError{max: t.max}
	}
	var body io.ReadCloser = resp.Body
	if decode != nil {
		body = decode(resp.Body)
		resp.Header.Del("Content-Encoding")
		resp.Header.Del("Content-Length")
		resp.ContentLength = -1
	}
	// Colly decodes gzip itself unless the response is marked uncompressed;
	// it is, now (and a body of type application/gzip stays as it is).
	resp.Uncompressed = true
	resp.Body = &limitedBody{rc: body, max: t.max, read: t.read}
	return resp, nil
}

// limitedBody fails the read that goes past max.
type limitedBody struct {
	rc   io.ReadCloser
	max  int64
	n    int64
	read *int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.n > b.max {
		return 0, &bodyTooLargeError{max: b.max}
	}
	if room := b.max + 1 - b.n; int64(len(p)) > room {
		p = p[:room]
	}
	n, err := b.rc.Read(p)
	b.n += int64(n)
	if b.read != nil {
		*b.read = b.n
	}
	if b.n > b.max {
		return n, &bodyTooLargeError{max: b.max}
	}
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }

// lazyBody decodes lazily, so that RoundTrip does not block on the body.
type lazyBody struct {
	raw  io.ReadCloser
	open func(io.Reader) (io.Reader, error)
	name string
	r    io.Reader
}

func (l *lazyBody) Read(p []byte) (int, error) {
	if l.r == nil {
		r, err := l.open(l.raw)
		if err != nil {
			return 0, fmt.Errorf("%s body: %w", l.name, err)
		}
		l.r = r
	}
	n, err := l.r.Read(p)
	if err != nil && err != io.EOF {
		err = fmt.Errorf("%s body: %w", l.name, err)
	}
	return n, err
}

func (l *lazyBody) Close() error {
	if c, ok := l.r.(io.Closer); ok {
		c.Close()
	}
	return l.raw.Close()
}
