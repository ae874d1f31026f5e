// Command sinkcrawler is a worker binary for tests: its crawler "sinky"
// pushes each string of a JSON array page as an item, and delivers its
// items to the webhook at $SINKY_HOOK_URL (secret $SINKY_HOOK_SECRET) in
// batches of $SINKY_BATCH items, so that tests see a receiver's refusals
// retried, dead-lettered and skipped.
package main

import (
	"context"
	"os"
	"strconv"

	"github.com/batoncrawl/baton/activities/crawler"
	"github.com/batoncrawl/baton/worker"
)

func main() {
	c := crawler.New("sinky", "1")
	c.HandleFunc("", func(ctx context.Context, p *crawler.Page) error {
		var values []string
		if err := p.DecodeJSON(&values); err != nil {
			return err
		}
		for _, v := range values {
			if err := p.Push(v); err != nil {
				return err
			}
		}
		return nil
	})
	hook := crawler.Webhook("hook", os.Getenv("SINKY_HOOK_URL"), []byte(os.Getenv("SINKY_HOOK_SECRET")), nil)
	hook.Batch, _ = strconv.Atoi(os.Getenv("SINKY_BATCH"))
	c.Sink(hook)
	os.Exit(worker.Main(c))
}
