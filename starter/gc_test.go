package main

import (
	"math"
	"runtime/debug"
	"testing"
)

// restoreGC puts Go's collector settings back after a test of smallHeapGC.
func restoreGC(t *testing.T) {
	pct := debug.SetGCPercent(100)
	debug.SetGCPercent(pct)
	limit := debug.SetMemoryLimit(-1)
	t.Cleanup(func() {
		debug.SetGCPercent(pct)
		debug.SetMemoryLimit(limit)
	})
}

func TestSmallHeapGCCollectsAtTheLimitOnly(t *testing.T) {
	restoreGC(t)
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	smallHeapGC()
	if pct := debug.SetGCPercent(-1); pct != -1 {
		t.Errorf("GC percent after smallHeapGC: %d, want -1 (off until the limit)", pct)
	}
	if limit := debug.SetMemoryLimit(-1); limit != smallHeapLimit {
		t.Errorf("memory limit after smallHeapGC: %d, want %d", limit, smallHeapLimit)
	}
}

func TestSmallHeapGCKeepsTheEnvironmentsSettings(t *testing.T) {
	for _, env := range []string{"GOGC", "GOMEMLIMIT"} {
		t.Run(env, func(t *testing.T) {
			restoreGC(t)
			t.Setenv("GOGC", "")
			t.Setenv("GOMEMLIMIT", "")
			t.Setenv(env, "200")
			debug.SetGCPercent(200)
			debug.SetMemoryLimit(math.MaxInt64)
			smallHeapGC()
			if pct := debug.SetGCPercent(-1); pct != 200 {
				t.Errorf("GC percent with %s set: %d, want 200 (kept)", env, pct)
			}
			if limit := debug.SetMemoryLimit(-1); limit != math.MaxInt64 {
				t.Errorf("memory limit with %s set: %d, want none (kept)", env, limit)
			}
		})
	}
}
