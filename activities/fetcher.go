package activities

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

// Fetcher runs one request of a Task. Implementations are safe for
// concurrent use and never panic on hostile input: every failure is
// reported in the Result.
type Fetcher interface {
	Fetch(ctx context.Context, req roles.Request, task roles.Task) FetchResult
}

// FetchResult is what a Fetcher saw.
type FetchResult struct {
	StatusCode int
	FinalURL   string
	Bytes      int64
	Duration   time.Duration
	Response   string // a bounded excerpt of the body
	Err        error
}

// HTTPFetcher is a plain net/http Fetcher that honours method, URL, query
// parameters, headers, body, cookies and authorization, and bounds the body
// size, the request time and the redirects.
type HTTPFetcher struct {
	Client       *http.Client
	MaxBody      int64
	Timeout      time.Duration
	ExcerptBytes int
}

// NewHTTPFetcher returns a fetcher with conservative bounds.
func NewHTTPFetcher() *HTTPFetcher {
	return &HTTPFetcher{
		Client: &http.Client{CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 10 {
				return fmt.Errorf("stopped after 10 redirects (last %s)", req.URL)
			}
			return nil
		}},
		MaxBody: 10 << 20, Timeout: 30 * time.Second, ExcerptBytes: 256,
	}
}

// BuildRequest turns a Task request into an *http.Request: method, URL,
// query parameters, headers, body, and the Task's cookies and
// authorization (see crawl.NewHTTPRequest).
func BuildRequest(ctx context.Context, r roles.Request, t roles.Task) (*http.Request, error) {
	return crawl.NewHTTPRequest(ctx, r, crawl.AuthOf(t))
}

// Fetch implements Fetcher.
func (f *HTTPFetcher) Fetch(ctx context.Context, r roles.Request, t roles.Task) FetchResult {
	start := time.Now()
	if f.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, f.Timeout)
		defer cancel()
	}
	req, err := BuildRequest(ctx, r, t)
	if err != nil {
		return FetchResult{Err: err, Duration: time.Since(start)}
	}
	resp, err := f.Client.Do(req)
	if err != nil {
		return FetchResult{Err: err, Duration: time.Since(start)}
	}
	defer resp.Body.Close()
	res := FetchResult{StatusCode: resp.StatusCode, FinalURL: resp.Request.URL.String()}
	var buf bytes.Buffer
	n, err := io.Copy(&buf, io.LimitReader(resp.Body, f.MaxBody+1))
	res.Bytes, res.Duration = n, time.Since(start)
	switch {
	case n > f.MaxBody:
		res.Err = fmt.Errorf("body larger than %d bytes", f.MaxBody)
	case err != nil && !errors.Is(err, io.EOF):
		res.Err = fmt.Errorf("read body: %w", err)
	}
	ex := buf.Bytes()
	if len(ex) > f.ExcerptBytes {
		ex = ex[:f.ExcerptBytes]
	}
	res.Response = string(ex)
	return res
}

// EngineFetcher runs a Task's requests through the crawl engine (Colly), so
// that directly assigned Tasks get what crawl jobs get: robots.txt,
// per-domain limits, retries with backoff and the body, time and redirect
// bounds. It is the worker's Fetcher; HTTPFetcher is the plain alternative.
type EngineFetcher struct {
	Engine  *crawl.Engine
	Options crawl.Options
}

// Fetch implements Fetcher.
func (f EngineFetcher) Fetch(ctx context.Context, r roles.Request, t roles.Task) FetchResult {
	p := f.Engine.Fetch(ctx, r, crawl.AuthOf(t), 0, f.Options)
	res := FetchResult{StatusCode: p.StatusCode, FinalURL: p.FinalURL, Bytes: p.Bytes,
		Duration: time.Duration(p.DurationMS) * time.Millisecond, Response: p.Title}
	// An HTTP error status is the runner's to judge; any other error is the
	// fetch's own (refused, timed out, too large, disallowed).
	if p.Error != "" && p.Error != fmt.Sprintf("HTTP %d", p.StatusCode) {
		res.Err = errors.New(p.Error)
	}
	return res
}
