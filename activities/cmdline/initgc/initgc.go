// Package initgc keeps Go's garbage collector off while a baton binary's
// packages are initialised: their start-up allocations (protocol
// descriptors, tables) are all kept, so a collection then finds nothing
// to free and only costs the start of every command. The CLI (starter)
// and the worker import it and call Restore before a command runs; a
// package with no imports of the module is initialised before most of
// the libraries.
// GOGC or GOMEMLIMIT in the environment keeps Go's own settings.
package initgc

import (
	"os"
	"runtime/debug"
)

// percent is GOGC as it was before init turned the collector off; off
// says it is off.
var (
	percent int
	off     bool
)

func init() {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	percent, off = debug.SetGCPercent(-1), true
}

// Restore turns the collector back on as it was before the packages'
// initialisation.
func Restore() {
	if off {
		debug.SetGCPercent(percent)
		off = false
	}
}
