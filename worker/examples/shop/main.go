// Command shop is an example worker binary: baton-worker with the shop
// crawler (package crawler) besides the built-in one. It takes
// baton-worker's flags and environment, and runs where baton-worker runs.
//
// Its items go to a webhook when $SHOP_WEBHOOK_URL is set, signed with the
// secret in the file $SHOP_WEBHOOK_SECRET_FILE (crawler.SignatureHeader),
// and to JSON-lines files under $SHOP_ITEMS_DIR when that is set.
package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/batoncrawl/baton/activities/crawler"
	"github.com/batoncrawl/baton/worker"
)

func main() {
	c := NewCrawler()
	if url := os.Getenv("SHOP_WEBHOOK_URL"); url != "" {
		secret, err := os.ReadFile(os.Getenv("SHOP_WEBHOOK_SECRET_FILE"))
		if err != nil {
			fmt.Fprintf(os.Stderr, "shop: $SHOP_WEBHOOK_SECRET_FILE: %v\n", err)
			os.Exit(2)
		}
		c.Sink(crawler.Webhook("webhook", url, []byte(strings.TrimSpace(string(secret))), nil))
	}
	if dir := os.Getenv("SHOP_ITEMS_DIR"); dir != "" {
		c.Sink(crawler.JSONLFile("files", dir))
	}
	os.Exit(worker.Main(c))
}
