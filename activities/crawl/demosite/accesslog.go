package demosite

import (
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// AccessLog wraps a handler and writes a line per request to w, in the
// format of nginx's `log_format '$msec $status $request_uri'`: the time
// the response ended (seconds since the Unix epoch, to the millisecond),
// its status and the request's URI. A line is written before the
// response ends, so a client that has its response finds its line.
type AccessLog struct {
	h  http.Handler
	mu sync.Mutex
	w  io.Writer
}

// NewAccessLog logs h's requests to w.
func NewAccessLog(h http.Handler, w io.Writer) *AccessLog {
	return &AccessLog{h: h, w: w}
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

func (l *AccessLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sw := &statusWriter{ResponseWriter: w}
	l.h.ServeHTTP(sw, r)
	if sw.status == 0 {
		sw.status = http.StatusOK
	}
	ms := time.Now().UnixMilli()
	line := fmt.Appendf(nil, "%d.%03d %d %s\n", ms/1000, ms%1000, sw.status, r.URL.RequestURI())
	l.mu.Lock()
	_, _ = l.w.Write(line)
	l.mu.Unlock()
}
