package roles

import (
	"fmt"
	"strconv"
	"time"
)

// TimeFormat is the Go layout of Heartbeat.heart_rhythm_time: UTC with
// microseconds, unlike the reference's one-second local clock strings.
const TimeFormat = "2006-01-02T15:04:05.000000Z07:00"

// Heartbeat is one instance's liveness record
// (znode <root>/node/<name>/heartbeat). Durations are written as Go duration
// strings ("0.5s"), the threshold as a decimal count, as in the reference.
type Heartbeat struct {
	HeartRhythmTime    string     `json:"heart_rhythm_time"`
	TimeFormat         string     `json:"time_format"`
	UpdateTime         string     `json:"update_time"`
	UpdateTimeout      string     `json:"update_timeout"`
	HeartRhythmTimeout string     `json:"heart_rhythm_timeout"`
	HealthyState       HeartState `json:"healthy_state"`
	TaskState          TaskState  `json:"task_state"`
}

// NewHeartbeat returns the Heartbeat an instance registers with.
func NewHeartbeat(now time.Time, t Timers) Heartbeat {
	return Heartbeat{
		HeartRhythmTime:    now.UTC().Format(TimeFormat),
		TimeFormat:         TimeFormat,
		UpdateTime:         fmtDur(t.UpdateTime),
		UpdateTimeout:      fmtDur(t.UpdateTimeout),
		HeartRhythmTimeout: strconv.Itoa(t.HeartRhythmTimeout),
		HealthyState:       HeartNewborn,
		TaskState:          TaskNothing,
	}
}

func fmtDur(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s" }

// DecodeHeartbeat parses and validates a Heartbeat document.
func DecodeHeartbeat(data []byte) (Heartbeat, error) {
	var h Heartbeat
	if err := decode("Heartbeat", data, &h); err != nil {
		return h, err
	}
	return h, h.Validate()
}

// Validate names the first bad field.
func (h Heartbeat) Validate() error {
	const o = "Heartbeat"
	if _, err := h.RhythmTime(); err != nil {
		return err
	}
	if _, err := h.Timeout(); err != nil {
		return err
	}
	if _, err := time.ParseDuration(h.UpdateTime); err != nil {
		return fieldErr(o, "update_time", "%q is not a duration", h.UpdateTime)
	}
	if n, err := strconv.Atoi(h.HeartRhythmTimeout); err != nil || n < 1 {
		return fieldErr(o, "heart_rhythm_timeout", "%q is not a positive count", h.HeartRhythmTimeout)
	}
	if !h.HealthyState.Valid() {
		return fieldErr(o, "healthy_state", "unknown heart state %q", string(h.HealthyState))
	}
	if h.TaskState != "" && !h.TaskState.Valid() {
		return fieldErr(o, "task_state", "unknown task state %q", string(h.TaskState))
	}
	return nil
}

// RhythmTime parses heart_rhythm_time with time_format.
func (h Heartbeat) RhythmTime() (time.Time, error) {
	layout := h.TimeFormat
	if layout == "" {
		layout = TimeFormat
	}
	t, err := time.Parse(layout, h.HeartRhythmTime)
	if err != nil {
		return t, fieldErr("Heartbeat", "heart_rhythm_time", "%q does not match time_format %q", h.HeartRhythmTime, layout)
	}
	return t, nil
}

// Timeout parses update_timeout.
func (h Heartbeat) Timeout() (time.Duration, error) {
	d, err := time.ParseDuration(h.UpdateTimeout)
	if err != nil || d <= 0 {
		return 0, fieldErr("Heartbeat", "update_timeout", "%q is not a positive duration", h.UpdateTimeout)
	}
	return d, nil
}

// Age returns now - heart_rhythm_time (never negative).
func (h Heartbeat) Age(now time.Time) (time.Duration, error) {
	t, err := h.RhythmTime()
	if err != nil {
		return 0, err
	}
	if d := now.Sub(t); d > 0 {
		return d, nil
	}
	return 0, nil
}

func itoa(i int) string { return strconv.Itoa(i) }

var _ = fmt.Sprintf
