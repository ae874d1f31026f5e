package activities_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/roles"
)

// httpFetcher is a plain net/http crawl.Fetcher that honours method, URL,
// query parameters, headers, body, cookies and authorization (as
// crawl.NewHTTPRequest builds them), and bounds the body size, the
// request time and the redirects. A bounded excerpt of the body is the
// page's title. The tests of a Task's requests fetch with it: it sends one
// request as the Task says, without the engine's robots.txt, retries and
// per-domain delays, and reports the body the server answered.
type httpFetcher struct {
	noSitemaps
	Client       *http.Client
	MaxBody      int64
	Timeout      time.Duration
	ExcerptBytes int
}

// newHTTPFetcher returns a fetcher with conservative bounds.
func newHTTPFetcher() *httpFetcher {
	return &httpFetcher{
		Client: &http.Client{CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 10 {
				return fmt.Errorf("stopped after 10 redirects (last %s)", req.URL)
			}
			return nil
		}},
		MaxBody: 10 << 20, Timeout: 30 * time.Second, ExcerptBytes: 256,
	}
}

// Fetch implements crawl.Fetcher.
func (f *httpFetcher) Fetch(ctx context.Context, r roles.Request, auth crawl.Auth, depth int, _ crawl.Options) crawl.Page {
	start := time.Now()
	p := crawl.Page{URL: r.URL, Depth: depth, Attempts: 1}
	done := func() crawl.Page {
		p.DurationMS = time.Since(start).Milliseconds()
		return p
	}
	if f.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, f.Timeout)
		defer cancel()
	}
	req, err := crawl.NewHTTPRequest(ctx, r, auth)
	if err != nil {
		p.Error = err.Error()
		return done()
	}
	resp, err := f.Client.Do(req)
	if err != nil {
		p.Error = err.Error()
		return done()
	}
	defer resp.Body.Close()
	p.StatusCode, p.FinalURL = resp.StatusCode, resp.Request.URL.String()
	var buf bytes.Buffer
	n, err := io.Copy(&buf, io.LimitReader(resp.Body, f.MaxBody+1))
	p.Bytes = n
	switch {
	case n > f.MaxBody:
		p.Error = fmt.Sprintf("body larger than %d bytes", f.MaxBody)
	case err != nil && !errors.Is(err, io.EOF):
		p.Error = fmt.Sprintf("read body: %v", err)
	}
	ex := buf.Bytes()
	if len(ex) > f.ExcerptBytes {
		ex = ex[:f.ExcerptBytes]
	}
	p.Title = string(ex)
	return done()
}
