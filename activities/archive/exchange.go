package archive

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"
)

// Exchange is one HTTP request and its response as they went over the
// wire. Header bytes are the field lines, each ending in CRLF, without the
// request or status line and without the blank line that ends a header.
type Exchange struct {
	Method        string // GET
	URL           string // absolute URL of the request
	Proto         string // request line's protocol; HTTP/1.1 when empty
	RequestHeader []byte // Host: example.org\r\nUser-Agent: ...\r\n
	RequestBody   []byte // optional

	StatusLine     string // HTTP/1.1 200 OK
	ResponseHeader []byte // field lines as received, Content-Encoding included
	Body           []byte // body bytes as received (not decoded)
	// Truncated is why Body is incomplete: "length" (over the capture's
	// limit), "disconnect", "time" or "unspecified"; empty when complete.
	Truncated string

	RemoteIP  string    // the server's address, optional
	FetchedAt time.Time // when the request was sent
}

// Record is a record the Writer wrote.
type Record struct {
	ID            string // urn:uuid:..., without angle brackets
	Type          string // "response" or "revisit"
	TargetURI     string
	Date          time.Time
	PayloadDigest string // algorithm:value, as in WARC-Payload-Digest
	File          string // final file name (without the .open suffix)
	Offset        int64  // of the record in File
	RequestID     string // the request record written with it
}

// Original is the response record a revisit refers to.
type Original struct {
	RecordID      string // WARC-Refers-To
	TargetURI     string // WARC-Refers-To-Target-URI
	Date          time.Time
	PayloadDigest string // copied into a server-not-modified revisit
}

// ErrNotOriginal is returned when a revisit record is offered as the
// original of another revisit: a revisit points at a response record,
// never at another revisit.
var ErrNotOriginal = errors.New("archive: a revisit record is not an original: refer to the response record it points at")

// Original returns what a later revisit of r refers to.
func (r Record) Original() (Original, error) {
	if r.Type != "response" {
		return Original{}, fmt.Errorf("record %s of type %q: %w", r.ID, r.Type, ErrNotOriginal)
	}
	return Original{RecordID: r.ID, TargetURI: r.TargetURI, Date: r.Date, PayloadDigest: r.PayloadDigest}, nil
}

func (o Original) validate() error {
	switch {
	case o.RecordID == "":
		return errors.New("original: RecordID is empty")
	case o.TargetURI == "":
		return errors.New("original: TargetURI is empty")
	case o.Date.IsZero():
		return errors.New("original: Date is zero")
	}
	return nil
}

// validate names the first field of e that cannot be written.
func (e Exchange) validate() error {
	u, err := url.Parse(e.URL)
	switch {
	case err != nil:
		return fmt.Errorf("exchange URL %q: %w", e.URL, err)
	case !u.IsAbs() || u.Host == "":
		return fmt.Errorf("exchange URL %q: want an absolute URL with a host", e.URL)
	case !isToken(e.Method):
		return fmt.Errorf("exchange of %s: Method %q is not an HTTP method", e.URL, e.Method)
	case e.Proto != "" && !strings.HasPrefix(e.Proto, "HTTP/"):
		return fmt.Errorf("exchange of %s: Proto %q: want HTTP/x.y", e.URL, e.Proto)
	case !strings.HasPrefix(e.StatusLine, "HTTP/") || strings.ContainsAny(e.StatusLine, "\r\n"):
		return fmt.Errorf("exchange of %s: StatusLine %q: want one line starting HTTP/", e.URL, e.StatusLine)
	case e.RemoteIP != "" && net.ParseIP(e.RemoteIP) == nil:
		return fmt.Errorf("exchange of %s: RemoteIP %q is not an IP address", e.URL, e.RemoteIP)
	case e.FetchedAt.IsZero():
		return fmt.Errorf("exchange of %s: FetchedAt is zero", e.URL)
	case e.FetchedAt.UTC().Year() < 1 || e.FetchedAt.UTC().Year() > 9999:
		return fmt.Errorf("exchange of %s: FetchedAt %s is outside the years 1 to 9999", e.URL, e.FetchedAt)
	}
	if err := checkFieldLines(e.RequestHeader); err != nil {
		return fmt.Errorf("exchange of %s: RequestHeader: %w", e.URL, err)
	}
	if err := checkFieldLines(e.ResponseHeader); err != nil {
		return fmt.Errorf("exchange of %s: ResponseHeader: %w", e.URL, err)
	}
	switch e.Truncated {
	case "", "length", "time", "disconnect", "unspecified":
		return nil
	}
	return fmt.Errorf("exchange of %s: Truncated %q: want length, time, disconnect or unspecified", e.URL, e.Truncated)
}

// checkFieldLines accepts header field lines, each ending in CRLF, with
// no empty line among them.
func checkFieldLines(b []byte) error {
	for i, line := range bytes.SplitAfter(b, []byte("\r\n")) {
		switch {
		case len(line) == 0:
			continue // after the last CRLF
		case !bytes.HasSuffix(line, []byte("\r\n")):
			return fmt.Errorf("line %d %q does not end in CRLF", i+1, clip(line))
		case len(line) == 2:
			return fmt.Errorf("line %d is empty: give the field lines without the blank line that ends a header", i+1)
		case bytes.IndexByte(line[:len(line)-2], '\n') >= 0 || bytes.IndexByte(line[:len(line)-2], '\r') >= 0:
			return fmt.Errorf("line %d %q holds a bare CR or LF", i+1, clip(line))
		}
	}
	return nil
}

func clip(b []byte) string {
	if len(b) > 60 {
		return string(b[:60]) + "..."
	}
	return string(b)
}

func isToken(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c <= ' ' || c >= 0x7f || strings.ContainsRune(`()<>@,;:\"/[]?={}`, c) {
			return false
		}
	}
	return true
}

// requestBlock is the request record's block: request line, fields, blank
// line, body.
func (e Exchange) requestBlock() []byte {
	u, _ := url.Parse(e.URL) // validated
	proto := e.Proto
	if proto == "" {
		proto = "HTTP/1.1"
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s %s\r\n", e.Method, u.RequestURI(), proto)
	b.Write(e.RequestHeader)
	b.WriteString("\r\n")
	b.Write(e.RequestBody)
	return b.Bytes()
}

// responseBlock is the response record's block: status line, fields,
// blank line, body.
func (e Exchange) responseBlock() []byte {
	var b bytes.Buffer
	b.Grow(len(e.StatusLine) + len(e.ResponseHeader) + len(e.Body) + 4)
	b.WriteString(e.StatusLine)
	b.WriteString("\r\n")
	b.Write(e.ResponseHeader)
	b.WriteString("\r\n")
	b.Write(e.Body)
	return b.Bytes()
}

// status is the status code of the status line, 0 if it has none.
func (e Exchange) status() int {
	f := strings.Fields(e.StatusLine)
	if len(f) < 2 || len(f[1]) != 3 {
		return 0
	}
	n := 0
	for _, c := range f[1] {
		if c < '0' || c > '9' {
			return 0
		}
		n = n*10 + int(c-'0')
	}
	return n
}
