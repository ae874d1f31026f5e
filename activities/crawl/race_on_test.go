//go:build race

package crawl

// raceEnabled: the race detector inflates allocations.
const raceEnabled = true
