package jobs

import (
	"context"
	"slices"
)

// TypedURLs returns the URLs of the spec that the user typed, normalised
// as JobStart queues them: its seeds and its sitemaps (the robots.txt of
// `--sitemap robots` included). Under deny_private the requests for them,
// and no others, may reach a private address (crawl.Options.TypedURLs):
// the pages a sitemap lists are queued at depth 0 like seeds, but are not
// typed. A seed file's URLs are in the store only, not here: they are
// guarded like links.
func (s Spec) TypedURLs() []string {
	out := make([]string, 0, len(s.Seeds)+len(s.Sitemaps))
	for _, u := range slices.Concat(s.Seeds, s.Sitemaps) {
		// The job's own normaliser, as SeedEntries queues them.
		if n, err := s.Options.NormalizeURL(u); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// TypedSpecs returns store with a Spec that fills the spec's
// Options.TypedURLs (Spec.TypedURLs), which a stored spec does not hold:
// the worker gives it to its BatchRunner, whose fetches then know which
// URLs the user typed.
func TypedSpecs(store RunnerStore) RunnerStore { return typedSpecs{store} }

type typedSpecs struct{ RunnerStore }

func (t typedSpecs) Spec(ctx context.Context, job string) (Spec, error) {
	s, err := t.RunnerStore.Spec(ctx, job)
	if err == nil {
		s.Options.TypedURLs = s.TypedURLs()
	}
	return s, err
}

// BaselinePages reads in batches when the store does
// (BaselineBatchReader), else URL by URL.
func (t typedSpecs) BaselinePages(ctx context.Context, job string, urls []string) (map[string]BaselinePage, error) {
	if br, ok := t.RunnerStore.(BaselineBatchReader); ok {
		return br.BaselinePages(ctx, job, urls)
	}
	out := make(map[string]BaselinePage, len(urls))
	for _, u := range urls {
		p, ok, err := t.RunnerStore.BaselinePage(ctx, job, u)
		if err != nil {
			return nil, err
		}
		if ok {
			out[u] = p
		}
	}
	return out, nil
}
