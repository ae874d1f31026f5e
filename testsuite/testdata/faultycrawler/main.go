// Command faultycrawler is a worker binary for tests: its crawler
// "faulty" has a handler that panics, one that hangs past its budget, one
// that fails, and one that works, so that tests see them recorded as page
// failures while the worker lives on.
package main

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/batoncrawl/baton/activities/crawler"
	"github.com/batoncrawl/baton/worker"
)

func main() {
	c := crawler.New("faulty", "1")
	c.Budget = time.Second
	c.HandleFunc("", func(ctx context.Context, p *crawler.Page) error {
		for _, l := range []string{"panic", "hang", "fail", "ok"} {
			if _, err := p.Enqueue("/"+l, l, nil); err != nil {
				return err
			}
		}
		return nil
	})
	c.HandleFunc("panic", func(ctx context.Context, p *crawler.Page) error {
		var m map[string]int
		m["boom"]++ // a nil map: a real panic
		return nil
	})
	c.HandleFunc("hang", func(ctx context.Context, p *crawler.Page) error {
		select {} // ignores ctx: only the budget stops it
	})
	c.HandleFunc("fail", func(ctx context.Context, p *crawler.Page) error {
		return errors.New("no price on the page")
	})
	c.HandleFunc("ok", func(ctx context.Context, p *crawler.Page) error {
		return p.Push(map[string]string{"url": p.Request.URL})
	})
	os.Exit(worker.Main(c))
}
