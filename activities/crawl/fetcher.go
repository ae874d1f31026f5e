package crawl

import (
	"context"

	"github.com/batoncrawl/baton/roles"
)

// Fetcher fetches pages: the one fetch interface of Baton, used by the
// Runner for crawl-job batches and for the requests of plain Tasks alike.
// *Engine implements it (Colly, with per-domain delay and parallelism,
// robots.txt, retries and the body, time and redirect bounds shared by all
// its callers). Implementations are safe for concurrent use and never panic
// on hostile input: every failure is reported in the Page.
type Fetcher interface {
	// Fetch fetches req as a page at depth (links are extracted and
	// filtered by opts).
	Fetch(ctx context.Context, req roles.Request, auth Auth, depth int, opts Options) Page
	// FetchSitemap fetches req as a sitemap or sitemap index: the page's
	// links are the URLs it lists.
	FetchSitemap(ctx context.Context, req roles.Request, auth Auth, opts Options) Page
}

var _ Fetcher = (*Engine)(nil)
