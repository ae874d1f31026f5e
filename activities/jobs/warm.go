package jobs

import (
	"context"
	"log/slog"
	"time"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/roles"
)

// robotsWarmer is a Fetcher that can get a request's robots.txt rules
// ahead of its fetch (crawl.Engine.WarmRobots).
type robotsWarmer interface {
	WarmRobots(ctx context.Context, req roles.Request, auth crawl.Auth, depth int, opts crawl.Options)
}

// warmTimeout bounds the reading of a job's spec by Warm.
const warmTimeout = 10 * time.Second

// Warm readies this worker for the first batch of a new job that it is
// about to be handed, holding urls (its seeds, depth 0): in the
// background, it starts getting the robots.txt of the seeds' hosts, which
// the batch's first fetches then wait for instead of fetching it again
// (crawl.Engine.WarmRobots). The robots.txt of a job's seed host is thus
// fetched while the job is stored and its first batch handed out, not
// after. stored is closed once the job is in the store (nil: it is):
// the file is kept there only then, and a job with secrets (read from the
// store) waits for it before anything. A job of a user crawler, one that
// ignores robots.txt, or one this worker cannot run (above the operator's
// limits, its spec invalid) warms nothing: the batch then fails or runs
// as without Warm. Safe for concurrent use; it does not wait.
func (r *BatchRunner) Warm(ctx context.Context, spec Spec, urls []string, stored <-chan struct{}) {
	w, ok := r.Pages.(robotsWarmer)
	if !ok || len(urls) == 0 || spec.Options.IgnoreRobots || (spec.Crawler != "" && spec.Crawler != roles.BuiltinCrawler) {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), warmTimeout)
		defer cancel()
		var jr *jobRun
		var err error
		if len(spec.Secrets) > 0 && stored != nil {
			select {
			case <-stored:
			case <-ctx.Done():
				return
			}
			stored = nil
		}
		if stored == nil {
			jr, err = r.job(ctx, spec.ID, slog.Default())
		} else {
			// Not kept for the batch, which reads the job's spec from the
			// store as always: only its robots.txt is got ahead.
			jr, err = r.run(ctx, spec, stored, slog.Default())
		}
		if err != nil || jr.crawler != nil {
			return // the batch says why when it runs
		}
		auth := jr.auth()
		for _, u := range urls {
			w.WarmRobots(ctx, roles.Request{URL: u, Method: "GET"}, auth, 0, jr.spec.Options)
		}
	}()
}
