package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// To a log, crawl --wait writes a progress line when the progress changed,
// at most every progressLineEvery, instead of redrawing a bar.
func TestProgressLinesToALog(t *testing.T) {
	var b strings.Builder
	l := progressLines{w: &b, every: 5 * time.Second}
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	l.show(t0, "running: done 1")
	l.show(t0.Add(time.Second), "running: done 2")    // too soon
	l.show(t0.Add(6*time.Second), "running: done 2")  // changed, time passed
	l.show(t0.Add(20*time.Second), "running: done 2") // unchanged
	assert.Equal(t, "03:04:05 running: done 1\n03:04:11 running: done 2\n", b.String())

	quiet := progressLines{}
	quiet.show(t0, "x") // a terminal: the bar shows it, no line
}
