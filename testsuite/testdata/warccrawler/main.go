// Command warccrawler is a worker binary for tests: its crawler
// "archivist" pushes each page's price, follows its links, and archives
// every job in WARC files under <bodies root>/archive/JOB, rotated at
// 8 KiB (crawler.Archive).
package main

import (
	"context"
	"os"

	"github.com/batoncrawl/baton/activities/crawler"
	"github.com/batoncrawl/baton/worker"
)

func main() {
	c := crawler.New("archivist", "1")
	c.HandleFunc("", func(ctx context.Context, p *crawler.Page) error {
		if price := p.Text(".price"); price != "" {
			if err := p.Push(map[string]string{"price": price}); err != nil {
				return err
			}
		}
		_, err := p.EnqueueLinks("a", "", nil)
		return err
	})
	c.Archive(crawler.WARC{Dir: "archive", MaxFileBytes: 8 << 10})
	os.Exit(worker.Main(c))
}
