// Command baton-worker runs one Baton crawler instance with the built-in
// crawler (the --select/--follow flags of `baton crawl`); see package
// worker for its flags, and for a worker binary of your own that carries
// your crawlers too.
package main

import (
	"os"

	"github.com/batoncrawl/baton/worker"
)

func main() {
	os.Exit(worker.Main())
}
