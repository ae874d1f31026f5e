package jobs

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/roles"
)

// robotsWarmer is a Fetcher that can get a request's robots.txt rules
// ahead of its fetch (crawl.Engine.WarmRobots), and says of which origin.
type robotsWarmer interface {
	WarmRobots(ctx context.Context, req roles.Request, auth crawl.Auth, depth int, opts crawl.Options) string
}

// warmTimeout bounds the reading of a job's spec by Warm.
const warmTimeout = 10 * time.Second

// Warm readies this worker for the first batch of a new job, holding
// urls (its seeds, depth 0), which this worker's own Runner or another
// worker's may be handed: in the background, it starts getting the
// robots.txt of the seeds' hosts. A batch's first fetches on this worker
// wait for that fetch (crawl.Engine.WarmRobots); on other workers, for
// the file in the store, where Warm claims each file's fetch
// (crawl.RobotsFile.Fetching) once the job is stored. The returned
// channel is closed once the claims are kept (or Warm gave up, or has
// nothing to fetch): a batch of the seeds must not be handed out before,
// or its Runner could fetch robots.txt a second time. The robots.txt of a
// job's seed host is thus fetched once, while the job is stored and its
// first batch handed out, not after. stored is closed once the job is in
// the store (nil: it is): the files are kept there only then, and a job
// with secrets (read from the store) waits for it before anything. A job
// of a user crawler, one that ignores robots.txt, or one this worker
// cannot run (above the operator's limits, its spec invalid) warms
// nothing: the batch then fails or runs as without Warm. Safe for
// concurrent use; it does not wait.
func (r *BatchRunner) Warm(ctx context.Context, spec Spec, urls []string, stored <-chan struct{}) <-chan struct{} {
	claimed := make(chan struct{})
	w, ok := r.Pages.(robotsWarmer)
	if !ok || len(urls) == 0 || spec.Options.IgnoreRobots || (spec.Crawler != "" && spec.Crawler != roles.BuiltinCrawler) {
		close(claimed)
		return claimed
	}
	go func() {
		defer close(claimed)
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), warmTimeout)
		defer cancel()
		s := spec
		if len(spec.Secrets) > 0 && stored != nil {
			// Its secrets are opened from the spec in the store.
			select {
			case <-stored:
			case <-ctx.Done():
				return
			}
			stored = nil
		}
		if stored == nil {
			var err error
			if s, err = r.Store.Spec(ctx, spec.ID); err != nil {
				return // the batch says why when it runs
			}
		}
		// Not kept for the batch, which reads the job's spec from the
		// store as always: only its robots.txt is got ahead.
		jr, err := r.run(ctx, s, stored, true, slog.Default())
		if err != nil || jr.crawler != nil {
			return // the batch says why when it runs
		}
		auth := jr.auth()
		var origins []string
		for _, u := range urls {
			if o := w.WarmRobots(ctx, roles.Request{URL: u, Method: "GET"}, auth, 0, jr.spec.Options); o != "" && !slices.Contains(origins, o) {
				origins = append(origins, o)
			}
		}
		if stored != nil {
			select {
			case <-stored:
			case <-ctx.Done():
				return
			}
		}
		claim := crawl.RobotsFile{Fetching: true, TTL: crawl.RobotsTimeout(jr.spec.Options) + warmClaimSlack}
		for _, o := range origins {
			if err := r.Store.PutRobots(ctx, spec.ID, o, claim); err != nil {
				return // the batch's Runner fetches robots.txt itself
			}
		}
	}()
	return claimed
}

// warmClaimSlack is how long a claim on a robots.txt's fetch lasts past
// the fetch's own bound: time to keep the file in the store.
const warmClaimSlack = 5 * time.Second
