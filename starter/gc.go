package main

import (
	"os"
	"runtime/debug"
)

// annotationGC, set on a command, says that it sets the garbage
// collector itself (smallHeapGC, or initgc.Restore); every other command
// gets Go's settings back before it runs (the collector is off while the
// packages are initialised: initgc).
const annotationGC = "baton-gc"

// smallHeapLimit is the Go heap a command run with smallHeapGC may reach
// before the garbage collector runs.
const smallHeapLimit = 48 << 20

// smallHeapGC lets a command whose heap stays small (a crawl submitted
// with its seeds on the command line, waited for or not) run without
// collecting garbage until its heap reaches smallHeapLimit: such a command
// exits long before, and a wait of hours collects at the limit instead of
// every time the heap doubles. GOGC or GOMEMLIMIT in the environment
// keeps Go's own settings.
func smallHeapGC() {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	debug.SetGCPercent(-1)
	debug.SetMemoryLimit(smallHeapLimit)
}
