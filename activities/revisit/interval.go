package revisit

import "time"

// Rates of NextInterval, StormCrawler's AdaptiveScheduler defaults.
const (
	// shrinkRate d: a changed page's interval moves a fraction d of the
	// way to the floor: i' = (1-d)·i + d·floor.
	shrinkRate = 0.5
	// growRate g: an unchanged page's interval grows by a fraction g:
	// i' = i·(1+g).
	growRate = 0.5
)

// NextInterval is how long to wait before fetching a page again, adapted
// to how often it changes, as StormCrawler's and Nutch's adaptive
// schedules: shorter when it changed (halfway to floor), longer when not
// (half again), always within [floor, cap]. A prev outside the bounds is
// first brought within them; a cap below floor is taken as floor, and a
// floor below zero as zero (a zero floor lets a zero interval stay zero:
// give a positive floor).
func NextInterval(prev time.Duration, changed bool, floor, cap time.Duration) time.Duration {
	floor = max(floor, 0)
	cap = max(cap, floor)
	i := float64(min(max(prev, floor), cap))
	if changed {
		i = (1-shrinkRate)*i + shrinkRate*float64(floor)
	} else {
		i *= 1 + growRate
	}
	if i >= float64(cap) {
		return cap
	}
	return max(time.Duration(i), floor)
}
