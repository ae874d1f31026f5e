package worker

import (
	"os"
	"runtime/debug"

	// The collector is off while the worker's packages are initialised
	// (their start-up allocations are all kept); Program.Execute turns it
	// back on.
	"github.com/batoncrawl/baton/activities/cmdline/initgc"
)

// DefaultGCPercent is a worker's Go garbage collector target (GOGC) when
// neither --gc-percent nor the GOGC environment variable says otherwise.
//
// A worker's live heap is small (tens of MiB) and it allocates fast (every
// page is read, parsed and recorded), so at Go's default of 100 it collects
// many times a second, a visible share of the workers' CPU in a profile
// of a crawl on PostgreSQL. At 400 it collects a quarter as often; the
// price is memory: a higher peak RSS (BenchmarkCrawlCluster,
// docs/benchmarks.md).
const DefaultGCPercent = 400

// defaultGCPercent is DefaultGCPercent, or 0 (the runtime's) when the
// GOGC environment variable is set: Go's own knob keeps its meaning.
func defaultGCPercent() int {
	if os.Getenv("GOGC") != "" {
		return 0
	}
	return DefaultGCPercent
}

// applyGCPercent sets the collector's target of this process to percent
// (--gc-percent); 0 leaves the runtime's. It is process-wide: call it once,
// at start.
func applyGCPercent(percent int) {
	if percent > 0 {
		debug.SetGCPercent(percent)
	}
}

// restoreGC turns the collector back on after the packages'
// initialisation (package initgc), before --gc-percent applies.
func restoreGC() { initgc.Restore() }
