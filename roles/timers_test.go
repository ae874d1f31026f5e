package roles

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDefaultTimersAreTheReference(t *testing.T) {
	d := DefaultTimers()
	require.NoError(t, d.Validate())
	assert.Equal(t, Timers{
		UpdateTime: 500 * time.Millisecond, UpdateTimeout: 2 * time.Second, HeartRhythmTimeout: 3,
		ResetTimeout: 10, CheckTask: 2 * time.Second, CheckCrawlerState: 500 * time.Millisecond,
		CheckStandbyID: 2 * time.Second,
	}, d)
	require.NoError(t, FastTimers().Validate())
	assert.Less(t, FastTimers().DetectionBound(), d.DetectionBound())
	assert.Equal(t, 2*time.Second+3*500*time.Millisecond, d.DetectionBound())
	assert.Contains(t, d.String(), "3 late checks")
}

func TestTimersValidate(t *testing.T) {
	tests := []struct {
		name  string
		mod   func(*Timers)
		field string
	}{
		{"update_time zero", func(t *Timers) { t.UpdateTime = 0 }, "update_time"},
		{"update_time negative", func(t *Timers) { t.UpdateTime = -time.Second }, "update_time"},
		{"update_timeout zero", func(t *Timers) { t.UpdateTimeout = 0 }, "update_timeout"},
		{"update_timeout equal to update_time", func(t *Timers) { t.UpdateTimeout = t.UpdateTime }, "update_timeout"},
		{"update_timeout shorter than update_time", func(t *Timers) { t.UpdateTimeout = t.UpdateTime / 2 }, "update_timeout"},
		{"check_task zero", func(t *Timers) { t.CheckTask = 0 }, "check_task"},
		{"check_crawler_state zero", func(t *Timers) { t.CheckCrawlerState = 0 }, "check_crawler_state"},
		{"check_standby_id negative", func(t *Timers) { t.CheckStandbyID = -1 }, "check_standby_id"},
		{"heart_rhythm_timeout zero", func(t *Timers) { t.HeartRhythmTimeout = 0 }, "heart_rhythm_timeout"},
		{"reset_timeout zero", func(t *Timers) { t.ResetTimeout = 0 }, "reset_timeout"},
		{"reset_timeout negative", func(t *Timers) { t.ResetTimeout = -5 }, "reset_timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tm := DefaultTimers()
			tt.mod(&tm)
			requireFieldError(t, tm.Validate(), "Timers", tt.field)
		})
	}
	requireFieldError(t, Timers{}.Validate(), "Timers", "update_time")
}

func TestNewHeartbeat(t *testing.T) {
	now := time.Date(2024, 5, 1, 12, 0, 0, 123456789, time.FixedZone("CEST", 2*3600))
	h := NewHeartbeat(now, DefaultTimers())
	assert.Equal(t, Heartbeat{
		HeartRhythmTime:    "2024-05-01T10:00:00.123456Z",
		TimeFormat:         "2006-01-02T15:04:05.000000Z07:00",
		UpdateTime:         "0.5s",
		UpdateTimeout:      "2s",
		HeartRhythmTimeout: "3",
		HealthyState:       HeartNewborn,
		TaskState:          TaskNothing,
	}, h, "UTC with microseconds, durations as in the reference")
	require.NoError(t, h.Validate())
	rt, err := h.RhythmTime()
	require.NoError(t, err)
	assert.True(t, rt.Equal(now.Truncate(time.Microsecond)))
	d, err := h.Timeout()
	require.NoError(t, err)
	assert.Equal(t, 2*time.Second, d)

	f := NewHeartbeat(now, FastTimers())
	assert.Equal(t, "0.1s", f.UpdateTime)
	assert.Equal(t, "0.5s", f.UpdateTimeout)
	assert.Equal(t, "2", f.HeartRhythmTimeout)
}
