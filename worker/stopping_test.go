package worker

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/batoncrawl/baton/activities/heartbeat"
)

// While the instance leaves its group (SIGTERM), it closes its workflows
// before it stops its workers: an activity whose heartbeat finds its
// workflow closed is cancelled by the SDK, and its end is the clean
// stop's, not an error to log (TestSIGTERMLogsNoError caught a WaitTask
// logged at ERROR in that gap). Another error stays an error.
func TestEndedByStopWhileLeaving(t *testing.T) {
	leaving := &atomic.Bool{}
	leaving.Store(true)
	assert.True(t, endedByStop(context.Background(), fmt.Errorf("wait for task: %w", context.Canceled), leaving))
	assert.True(t, endedByStop(context.Background(), heartbeat.ErrStopping, leaving))
	assert.False(t, endedByStop(context.Background(), errors.New("zookeeper: connection refused"), leaving),
		"an error that is not a cancellation is logged, leaving or not")
}
