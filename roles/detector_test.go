package roles

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const timeout = 2 * time.Second

// run feeds a pattern of checks to a detector: 'L' is a late heartbeat
// (age >= update_timeout), 'H' a healthy one. It returns the verdicts as a
// string: 'a' alive, 'l' late, 'D' dead.
func run(d *Detector, peer, pattern string) string {
	var out strings.Builder
	for _, c := range pattern {
		age := time.Second
		if c == 'L' {
			age = 3 * time.Second
		}
		switch d.Observe(peer, age, timeout) {
		case Alive:
			out.WriteByte('a')
		case Late:
			out.WriteByte('l')
		case Dead:
			out.WriteByte('D')
		}
	}
	return out.String()
}

func TestDetector(t *testing.T) {
	tests := []struct {
		name             string
		threshold, reset int
		pattern          string
		want             string
	}{
		{"healthy stays alive", 3, 10, "HHHHH", "aaaaa"},
		{"threshold reached", 3, 10, "LLL", "llD"},
		{"threshold 1", 1, 10, "HL", "aD"},
		{"healthy in between does not clear before reset", 3, 10, "LLHHHL", "lllllD"},
		{"nine healthy in a row are not enough", 3, 10, "LL" + strings.Repeat("H", 9) + "L", "ll" + strings.Repeat("l", 9) + "D"},
		{"ten healthy in a row clear the timeouts", 3, 10, "LL" + strings.Repeat("H", 10) + "LL", "ll" + strings.Repeat("l", 9) + "a" + "ll"},
		{"and then it takes the full threshold again", 3, 10, "LL" + strings.Repeat("H", 10) + "LLL", "ll" + strings.Repeat("l", 9) + "a" + "llD"},
		{"a late check breaks the healthy run", 3, 10, "L" + strings.Repeat("H", 9) + "L" + strings.Repeat("H", 9) + "L",
			"l" + strings.Repeat("l", 9) + "l" + strings.Repeat("l", 9) + "D"},
		{"alternating adds up to death", 3, 10, "LHLHL", "llllD"},
		{"alternating never dies when reset hits first", 2, 1, "LHLHLHLHLH", "lalalalala"},
		{"reset 2 with flapping", 2, 2, "LHHLHHLHH", "llallalla"},
		{"reset 2: one healthy is not enough", 2, 2, "LHL", "llD"},
		{"exactly update_timeout counts as late", 2, 10, "LL", "lD"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &Detector{Threshold: tt.threshold, Reset: tt.reset}
			assert.Equal(t, tt.want, run(d, "sc-crawler_2", tt.pattern))
		})
	}
}

func TestDetectorBoundaryAge(t *testing.T) {
	d := NewDetector(Timers{HeartRhythmTimeout: 2, ResetTimeout: 10})
	assert.Equal(t, Late, d.Observe("p_1", timeout, timeout), "age == update_timeout is late")
	assert.Equal(t, Dead, d.Observe("p_1", timeout, timeout))
	d = NewDetector(Timers{HeartRhythmTimeout: 1, ResetTimeout: 10})
	assert.Equal(t, Alive, d.Observe("p_1", timeout-time.Nanosecond, timeout))
}

func TestDetectorCounts(t *testing.T) {
	d := NewDetector(DefaultTimers())
	assert.Equal(t, 3, d.Threshold)
	assert.Equal(t, 10, d.Reset)
	run(d, "a_1", "LLHH")
	assert.Equal(t, PeerCount{Timeouts: 2, Healthy: 2}, d.Counts["a_1"])
	run(d, "a_1", "L")
	assert.Equal(t, PeerCount{Timeouts: 3, Healthy: 0}, d.Counts["a_1"], "a late check clears the healthy count")
	run(d, "a_1", strings.Repeat("H", 10))
	assert.Equal(t, PeerCount{}, d.Counts["a_1"], "reset clears both counts")
}

func TestDetectorDeadStaysDeadUntilReset(t *testing.T) {
	d := &Detector{Threshold: 2, Reset: 3}
	assert.Equal(t, "lDDDa", run(d, "p_1", "LLHHH"))
}

func TestDetectorPeersAreIndependent(t *testing.T) {
	d := &Detector{Threshold: 2, Reset: 10}
	assert.Equal(t, "l", run(d, "a_1", "L"))
	assert.Equal(t, "aaa", run(d, "a_2", "HHH"))
	assert.Equal(t, "l", run(d, "a_3", "L"))
	assert.Equal(t, "D", run(d, "a_1", "L"))
	assert.Equal(t, "a", run(d, "a_2", "H"))
	assert.Equal(t, PeerCount{Timeouts: 1}, d.Counts["a_3"])
}

func TestDetectorForget(t *testing.T) {
	d := &Detector{Threshold: 2, Reset: 10}
	run(d, "a_1", "L")
	d.Forget("a_1")
	_, ok := d.Counts["a_1"]
	assert.False(t, ok)
	assert.Equal(t, "l", run(d, "a_1", "L"), "a forgotten peer starts from zero")
	d.Forget("never-seen_9") // no panic
}

func TestDetectorNilCounts(t *testing.T) {
	d := &Detector{Threshold: 1, Reset: 1}
	assert.NotPanics(t, func() { assert.Equal(t, Dead, d.Observe("a_1", timeout, timeout)) })
}

func TestDetectorCountsSurviveJSON(t *testing.T) {
	// An activity carries the counts in its heartbeat details across a retry.
	d := &Detector{Threshold: 3, Reset: 10}
	run(d, "a_1", "LL")
	b, err := json.Marshal(d.Counts)
	require.NoError(t, err)
	assert.JSONEq(t, `{"a_1":{"timeouts":2,"healthy":0}}`, string(b))
	var counts map[string]PeerCount
	require.NoError(t, json.Unmarshal(b, &counts))
	d2 := &Detector{Threshold: 3, Reset: 10, Counts: counts}
	assert.Equal(t, "D", run(d2, "a_1", "L"), "the retried detector continues the count")
}

func TestVerdictString(t *testing.T) {
	assert.Equal(t, "alive", Alive.String())
	assert.Equal(t, "late", Late.String())
	assert.Equal(t, "dead", Dead.String())
}
