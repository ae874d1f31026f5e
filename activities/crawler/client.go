package crawler

import (
	"context"
	"net/http"
	"time"
)

type clientKey struct{}

// WithClient returns ctx carrying c as the client crawler code gets
// (Client). A worker puts its guarded client in the context of every
// Start hook, handler and sink it runs; a test may put its own.
func WithClient(ctx context.Context, c *http.Client) context.Context {
	return context.WithValue(ctx, clientKey{}, c)
}

// Client returns the HTTP client for requests crawler code makes of its
// own — a Start hook's log-in, an API call from a handler, a sink's
// delivery. On a worker it dials under the operator's rules (the
// worker's --deny-private, --allow-net and --deny-net, and the job's own
// --deny-private), checked on every address dialled, redirects included,
// and honours no HTTP_PROXY from the environment: use it rather than a
// client of your own, which would go round those rules. Outside a worker
// (ctx carries none) it is a client with no proxy and a 30 s timeout.
func Client(ctx context.Context) *http.Client {
	if c, ok := ctx.Value(clientKey{}).(*http.Client); ok && c != nil {
		return c
	}
	return defaultClient
}

var defaultClient = &http.Client{
	Timeout:   30 * time.Second,
	Transport: &http.Transport{Proxy: nil, ForceAttemptHTTP2: true, MaxIdleConnsPerHost: 8, IdleConnTimeout: 90 * time.Second},
}

// Client is the HTTP client for the page's handler's own requests
// (crawler.Client of the page's context): under the worker's rules.
func (p *Page) Client() *http.Client { return Client(p.ctx) }
