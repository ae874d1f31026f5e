package worker

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestGCPercentDefaultYieldsToGOGC(t *testing.T) {
	t.Setenv("GOGC", "")
	assert.Equal(t, DefaultGCPercent, DefaultConfig().GCPercent, "no GOGC: the worker's own target")
	t.Setenv("GOGC", "150")
	assert.Equal(t, 0, DefaultConfig().GCPercent, "GOGC set: the runtime's target is kept")
}

func TestGCPercentApplied(t *testing.T) {
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })

	applyGCPercent(250)
	assert.Equal(t, 250, debug.SetGCPercent(100), "--gc-percent 250 sets the collector's target")
	applyGCPercent(0)
	assert.Equal(t, 100, debug.SetGCPercent(100), "--gc-percent 0 leaves the runtime's target")
}

func TestGCPercentValidated(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Name = "sc-crawler_1"
	cfg.GCPercent = -1
	err := cfg.Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--gc-percent")
}
