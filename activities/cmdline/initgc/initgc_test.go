package initgc

import (
	"os"
	"runtime/debug"
	"testing"
)

// The collector is off once the package is initialised, and back to Go's
// setting after Restore.
func TestOffUntilRestore(t *testing.T) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		t.Skip("GOGC or GOMEMLIMIT is set: Go's own settings are kept")
	}
	if pct := debug.SetGCPercent(-1); pct != -1 {
		t.Fatalf("GC percent after the package's init: %d, want -1 (off)", pct)
	}
	Restore()
	if pct := debug.SetGCPercent(100); pct != 100 {
		t.Errorf("GC percent after Restore: %d, want 100 (Go's default)", pct)
	}
	Restore() // once only
	if pct := debug.SetGCPercent(100); pct != 100 {
		t.Errorf("GC percent after a second Restore: %d, want 100", pct)
	}
}
