package workflows

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/batoncrawl/baton/activities/cluster"
	"github.com/batoncrawl/baton/roles"
)

// TestLongOptionsHeartbeatTimeout: the heartbeat timeout of the long
// waits covers every interval they heartbeat at, so that e.g. a
// --check-standby-id of 10s does not make every WaitStandby time out.
func TestLongOptionsHeartbeatTimeout(t *testing.T) {
	def := roles.DefaultTimers()
	assert.Equal(t, 4*time.Second, longOptions(cluster.Member{Timers: def}).HeartbeatTimeout)

	for _, tc := range []struct {
		name string
		set  func(*roles.Timers)
		want time.Duration
	}{
		{"update_time", func(t *roles.Timers) { t.UpdateTime = 3 * time.Second }, 12 * time.Second},
		{"check_task", func(t *roles.Timers) { t.CheckTask = 5 * time.Second }, 10 * time.Second},
		{"check_crawler_state", func(t *roles.Timers) { t.CheckCrawlerState = 7 * time.Second }, 14 * time.Second},
		{"check_standby_id", func(t *roles.Timers) { t.CheckStandbyID = 10 * time.Second }, 20 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tm := def
			tc.set(&tm)
			o := longOptions(cluster.Member{Timers: tm})
			assert.Equal(t, tc.want, o.HeartbeatTimeout)
			assert.Greater(t, o.StartToCloseTimeout, o.HeartbeatTimeout)
		})
	}
}
