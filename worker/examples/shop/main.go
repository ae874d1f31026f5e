// Command shop is an example worker binary: baton-worker with the shop
// crawler besides the built-in one. It takes baton-worker's flags and
// environment; run it where you would run baton-worker.
package main

import (
	"os"

	"github.com/batoncrawl/baton/worker"
)

func main() {
	os.Exit(worker.Main(NewCrawler()))
}
