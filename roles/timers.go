package roles

import (
	"fmt"
	"time"
)

// Timers are the cluster's intervals and thresholds. The defaults are the
// reference's.
type Timers struct {
	// UpdateTime is how often an instance writes its heartbeat.
	UpdateTime time.Duration `json:"update_time"`
	// UpdateTimeout is the heartbeat age from which a check counts as late.
	UpdateTimeout time.Duration `json:"update_timeout"`
	// HeartRhythmTimeout is how many late checks make an instance dead.
	HeartRhythmTimeout int `json:"heart_rhythm_timeout"`
	// ResetTimeout is how many healthy checks in a row clear the late count.
	ResetTimeout int `json:"reset_timeout"`
	// CheckTask is the safety re-read interval of a Runner waiting for a
	// Task; a ZooKeeper watch wakes it first.
	CheckTask time.Duration `json:"check_task"`
	// CheckCrawlerState is how often a backup checks the heartbeats.
	CheckCrawlerState time.Duration `json:"check_crawler_state"`
	// CheckStandbyID is the safety re-read interval of a secondary backup
	// waiting for its turn; a ZooKeeper watch wakes it first.
	CheckStandbyID time.Duration `json:"check_standby_id"`
}

// DefaultTimers returns the reference's defaults.
func DefaultTimers() Timers {
	return Timers{
		UpdateTime: 500 * time.Millisecond, UpdateTimeout: 2 * time.Second, HeartRhythmTimeout: 3,
		ResetTimeout: 10, CheckTask: 2 * time.Second, CheckCrawlerState: 500 * time.Millisecond,
		CheckStandbyID: 2 * time.Second,
	}
}

// FastTimers is a profile for quick fail-over on a good network.
func FastTimers() Timers {
	return Timers{
		UpdateTime: 100 * time.Millisecond, UpdateTimeout: 500 * time.Millisecond, HeartRhythmTimeout: 2,
		ResetTimeout: 10, CheckTask: 2 * time.Second, CheckCrawlerState: 100 * time.Millisecond,
		CheckStandbyID: 2 * time.Second,
	}
}

// IsZero reports whether no timer is set (a job spec that leaves them to
// its group's workers).
func (t Timers) IsZero() bool { return t == Timers{} }

// Validate names the first bad field.
func (t Timers) Validate() error {
	pos := []struct {
		name string
		d    time.Duration
	}{
		{"update_time", t.UpdateTime}, {"update_timeout", t.UpdateTimeout}, {"check_task", t.CheckTask},
		{"check_crawler_state", t.CheckCrawlerState}, {"check_standby_id", t.CheckStandbyID},
	}
	for _, p := range pos {
		if p.d <= 0 {
			return fieldErr("Timers", p.name, "is %v, must be > 0", p.d)
		}
	}
	if t.UpdateTimeout <= t.UpdateTime {
		return fieldErr("Timers", "update_timeout", "is %v, must be longer than update_time %v", t.UpdateTimeout, t.UpdateTime)
	}
	if t.HeartRhythmTimeout < 1 {
		return fieldErr("Timers", "heart_rhythm_timeout", "is %d, must be >= 1", t.HeartRhythmTimeout)
	}
	if t.ResetTimeout < 1 {
		return fieldErr("Timers", "reset_timeout", "is %d, must be >= 1", t.ResetTimeout)
	}
	return nil
}

// DetectionBound is the longest time from an instance's last heartbeat to
// the check that declares it dead: the heartbeat must age past
// update_timeout, then heart_rhythm_timeout checks must see it late.
func (t Timers) DetectionBound() time.Duration {
	return t.UpdateTimeout + time.Duration(t.HeartRhythmTimeout)*t.CheckCrawlerState
}

// String is for logs.
func (t Timers) String() string {
	return fmt.Sprintf("heartbeat every %v, late after %v, dead after %d late checks every %v",
		t.UpdateTime, t.UpdateTimeout, t.HeartRhythmTimeout, t.CheckCrawlerState)
}
