package activities_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/batoncrawl/baton/activities/cluster"
	"github.com/batoncrawl/baton/activities/metadata"
	"github.com/batoncrawl/baton/roles"
)

// outageStore fails the first heartbeat read as a lost connection would.
type outageStore struct {
	metadata.Store
	failed atomic.Bool
}

func (s *outageStore) Get(ctx context.Context, p string) ([]byte, int32, error) {
	if strings.HasSuffix(p, "/heartbeat") && s.failed.CompareAndSwap(false, true) {
		return nil, 0, errors.New("zookeeper get " + p + ": connection lost, retry: zk: connection closed")
	}
	return s.Store.Get(ctx, p)
}

// After the watcher's own ZooKeeper trouble, nobody could write
// heartbeats: late heartbeats are not counted until update_timeout has
// passed, so a ZooKeeper outage does not kill live runners; afterwards a
// really dead runner is still declared dead.
func TestWatchRunnersGraceAfterOwnOutage(t *testing.T) {
	f := newClusterFixture(t, 2, 1)
	f.start()
	now := t0.Add(time.Minute)
	f.clock.Set(now)
	f.beat(1, now, roles.HeartHealthy)
	f.beat(2, now.Add(-10*time.Second), roles.HeartHealthy) // stale, as after an outage
	a := f.acts(nil)
	a.Store = &outageStore{Store: f.mem}
	watch := func(d time.Duration) (cluster.WatchResult, error) {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		return a.WatchRunners(ctx, cluster.WatchInput{Member: f.member(3), Free: 1})
	}
	w, err := watch(quietWindow)
	assert.ErrorIs(t, err, context.DeadlineExceeded, "declared %+v during the grace period", w)

	later := now.Add(f.timers.UpdateTimeout + time.Millisecond)
	f.clock.Set(later)
	f.beat(1, later, roles.HeartHealthy)
	w, err = watch(waitLimit)
	assert.NoError(t, err)
	assert.Equal(t, name(2), w.Dead, "after the grace period the stale runner is dead")
}
