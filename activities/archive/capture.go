package archive

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultMaxCaptureBytes is the body size a capture keeps when
// CaptureOptions.MaxBodyBytes is zero.
const DefaultMaxCaptureBytes = 16 << 20

// Sink receives each exchange a capture recorded, once the caller has read
// the response body to its end or closed it.
type Sink func(ctx context.Context, e Exchange)

// CaptureOptions tune Capture.
type CaptureOptions struct {
	// MaxBodyBytes is how much of a body is kept for the archive (zero:
	// DefaultMaxCaptureBytes); past it the exchange is marked Truncated
	// "length" while the caller still reads the whole body.
	MaxBodyBytes int64
	// KeepEncoded hands the caller the body as received. By default a body
	// the capture asked gzip for is decoded for the caller, as Go's
	// transport would have: Content-Encoding and Content-Length are removed
	// from the caller's response and Uncompressed is set. The archive
	// always gets the bytes as received.
	KeepEncoded bool
}

// NewTransport is a clone of http.DefaultTransport that never decodes
// bodies (DisableCompression), for use under Capture.
func NewTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DisableCompression = true
	return t
}

// Capture wraps rt so that each exchange reaches sink as it went over the
// wire. When a request has no Accept-Encoding (nor Range), Capture sends
// "Accept-Encoding: gzip" itself, so that rt, even with compression
// enabled, returns the body undecoded; see CaptureOptions.KeepEncoded for
// what the caller then reads. The request header recorded is the one
// handed to rt, with the Host and the User-Agent Go adds; the response
// header is Go's parse of the one received (field names in canonical
// case, sorted), with the body's bytes as received after HTTP/1.1
// chunking is removed (Transfer-Encoding is therefore not recorded). The
// remote IP is the address of the connection used: through a proxy, the
// proxy's.
func Capture(rt http.RoundTripper, sink Sink, opts CaptureOptions) http.RoundTripper {
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxCaptureBytes
	}
	return &capture{next: rt, sink: sink, opts: opts}
}

type capture struct {
	next http.RoundTripper
	sink Sink
	opts CaptureOptions
}

func (c *capture) RoundTrip(req *http.Request) (*http.Response, error) {
	var mu sync.Mutex
	remote := ""
	ctx := httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) {
			if host, _, err := net.SplitHostPort(info.Conn.RemoteAddr().String()); err == nil {
				mu.Lock()
				remote = host
				mu.Unlock()
			}
		},
	})
	out := req.Clone(ctx)
	askedGzip := false
	if out.Header.Get("Accept-Encoding") == "" && out.Header.Get("Range") == "" && out.Method != http.MethodHead {
		out.Header.Set("Accept-Encoding", "gzip")
		askedGzip = true
	}
	e := Exchange{Method: out.Method, URL: out.URL.String(), RequestHeader: requestFields(out),
		RequestBody: requestBody(out, c.opts.MaxBodyBytes), FetchedAt: time.Now()}
	res, err := c.next.RoundTrip(out)
	if err != nil {
		return nil, err
	}
	mu.Lock()
	e.RemoteIP = remote
	mu.Unlock()
	e.StatusLine = statusLine(res)
	var h bytes.Buffer
	_ = res.Header.Write(&h)
	e.ResponseHeader = h.Bytes()

	tee := &teeBody{raw: res.Body, max: c.opts.MaxBodyBytes, done: func(body []byte, truncated string) {
		e.Body, e.Truncated = body, truncated
		c.sink(req.Context(), e)
	}}
	res.Body = tee
	if askedGzip && !c.opts.KeepEncoded && strings.EqualFold(res.Header.Get("Content-Encoding"), "gzip") {
		res.Body = &gunzipBody{tee: tee}
		res.Header.Del("Content-Encoding")
		res.Header.Del("Content-Length")
		res.ContentLength = -1
		res.Uncompressed = true
	}
	return res, nil
}

// requestFields are the header field lines Go's transport sends for r.
func requestFields(r *http.Request) []byte {
	var b bytes.Buffer
	host := r.Host
	if host == "" {
		host = r.URL.Host
	}
	b.WriteString("Host: " + host + "\r\n")
	h := r.Header.Clone()
	if _, ok := h["User-Agent"]; !ok {
		h.Set("User-Agent", "Go-http-client/1.1")
	}
	if r.ContentLength > 0 && h.Get("Content-Length") == "" {
		h.Set("Content-Length", strconv.FormatInt(r.ContentLength, 10))
	}
	_ = h.WriteSubset(&b, map[string]bool{"Host": true})
	return b.Bytes()
}

// requestBody is a copy of r's body, when r can give one (GetBody, as
// for bodies made from bytes or strings) and it is no longer than max.
func requestBody(r *http.Request, max int64) []byte {
	if r.GetBody == nil || r.ContentLength <= 0 || r.ContentLength > max {
		return nil
	}
	rc, err := r.GetBody()
	if err != nil {
		return nil
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, max))
	if err != nil {
		return nil
	}
	return b
}

// statusLine is res's status line; an HTTP/2 or HTTP/3 answer is written
// as HTTP/1.1, the framing WARC readers replay.
func statusLine(res *http.Response) string {
	proto := res.Proto
	if res.ProtoMajor != 1 {
		proto = "HTTP/1.1"
	}
	status := res.Status
	if status == "" {
		status = http.StatusText(res.StatusCode)
	}
	return proto + " " + status
}
