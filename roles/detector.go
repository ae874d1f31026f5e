package roles

import "time"

// Verdict is the detector's judgement of one peer after one check.
type Verdict int

// Verdicts.
const (
	Alive Verdict = iota // heartbeat fresh
	Late                 // heartbeat older than update_timeout, not dead yet
	Dead                 // heart_rhythm_timeout late checks without a reset
)

func (v Verdict) String() string {
	return [...]string{"alive", "late", "dead"}[v]
}

// PeerCount is the detector's memory of one peer. It is exported so that
// an activity can carry it in its heartbeat details across a retry.
type PeerCount struct {
	Timeouts int `json:"timeouts"`
	Healthy  int `json:"healthy"`
}

// Detector implements the reference's dead-runner detection: every check,
// a heartbeat at least update_timeout old adds one to the peer's timeout
// count and clears its healthy count; a fresh one adds to the healthy count,
// and reset_timeout healthy checks in a row clear the timeout count, so a
// flaky network does not add up to a death. The peer is dead when its
// timeout count reaches heart_rhythm_timeout.
//
// A Detector is not safe for concurrent use.
type Detector struct {
	Threshold int // heart_rhythm_timeout
	Reset     int // reset_timeout
	Counts    map[string]PeerCount
}

// NewDetector returns a detector with the thresholds of t.
func NewDetector(t Timers) *Detector {
	return &Detector{Threshold: t.HeartRhythmTimeout, Reset: t.ResetTimeout, Counts: map[string]PeerCount{}}
}

// Observe records one check of peer whose heartbeat is age old, judged
// against timeout (the peer's update_timeout), and returns the verdict.
func (d *Detector) Observe(peer string, age, timeout time.Duration) Verdict {
	if d.Counts == nil {
		d.Counts = map[string]PeerCount{}
	}
	c := d.Counts[peer]
	if age >= timeout {
		c.Timeouts++
		c.Healthy = 0
	} else {
		c.Healthy++
		if c.Healthy >= d.Reset {
			c.Timeouts, c.Healthy = 0, 0
		}
	}
	d.Counts[peer] = c
	switch {
	case c.Timeouts >= d.Threshold:
		return Dead
	case c.Timeouts > 0:
		return Late
	}
	return Alive
}

// Forget drops a peer's counts (it left or was handled).
func (d *Detector) Forget(peer string) { delete(d.Counts, peer) }
