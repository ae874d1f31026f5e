package workflows

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/workflow"

	"github.com/batoncrawl/baton/activities/cluster"
	"github.com/batoncrawl/baton/activities/metadata"
	"github.com/batoncrawl/baton/roles"
)

// failOverSteps are the activities a primary backup runs to take over a
// dead runner.
var failOverSteps = []string{"WatchRunners", "Discover", "Activate", "HandOver"}

// assertRunnerFailedOver checks the metadata after backup took over the
// dead runner: the reference's fail-over of GroupState, NodeState and
// Heartbeat.
func assertRunnerFailedOver(t *testing.T, cl *testCluster, dead, backup int) {
	t.Helper()
	n := cl.node(dead)
	assert.Equal(t, roles.RoleDeadRunner, n.Role, "dead runner's NodeState role")
	assert.Equal(t, crawler(backup), n.TakenOverBy)
	assert.Equal(t, roles.HeartAsystole, cl.heartbeat(dead).HealthyState, "dead runner's heartbeat")
	assert.Equal(t, roles.RoleRunner, cl.node(backup).Role, "the backup is a runner now")

	g := cl.group()
	assert.NotContains(t, g.CurrentCrawler, crawler(dead))
	assert.NotContains(t, g.CurrentRunner, crawler(dead))
	assert.Contains(t, g.FailCrawler, crawler(dead))
	assert.Contains(t, g.FailRunner, crawler(dead))
	assert.Contains(t, g.CurrentRunner, crawler(backup))
	assert.NotContains(t, g.CurrentBackup, crawler(backup))
	assert.Contains(t, g.CurrentCrawler, crawler(backup))
	assert.Equal(t, max(0, cl.backup-1), g.TotalBackup, "total_backup -= 1")
}

// TestPrimaryBackupTakesOverDeadRunner runs PrimaryBackup with the REAL
// activities on a Memory store: runner 1 stopped heartbeating an hour
// ago (the activities' clock says so), backup 2 is the standby. It checks
// discovery, activation and the hand-over of each kind of Task.
func TestPrimaryBackupTakesOverDeadRunner(t *testing.T) {
	errTask := processingTask(4, 3, crawler(1), 4)
	errTask.RunningStatus = roles.TaskError
	errTask.ResultDetail[2].State = roles.TaskError
	doneTask := processingTask(3, 3, crawler(1), 4)
	terminated := processingTask(3, 1, crawler(1), 4)
	terminated.RunningStatus = roles.TaskTerminate

	cases := []struct {
		name string
		dead roles.Task
		// want is the backup's own Task after the hand-over; nil means it
		// stays the empty Task it registered with.
		want func(dead roles.Task) *roles.Task
	}{
		{"processing", processingTask(5, 2, crawler(1), 4), func(dead roles.Task) *roles.Task {
			w := dead.Clone() // copied whole: continues at next_index 2
			w.Epoch, w.Holder, w.HandedOverFrom = dead.Epoch+1, crawler(2), crawler(1)
			return &w
		}},
		{"error", errTask, func(dead roles.Task) *roles.Task {
			w := dead.Clone() // copied reset: runs again from the start
			w.RunningStatus, w.NextIndex, w.InProgressingID = roles.TaskNothing, 0, ""
			w.RunningResult, w.ResultDetail = roles.RunningResult{}, []roles.ResultDetail{}
			w.Epoch, w.Holder, w.HandedOverFrom = dead.Epoch+1, crawler(2), crawler(1)
			return &w
		}},
		{"done", doneTask, nil},
		{"terminate", terminated, nil},
		{"nothing", roles.EmptyTask(), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cl := newCluster(t, 1, 1)
			require.Equal(t, roles.RoleRunner, cl.node(1).Role)
			require.Equal(t, "2", cl.group().StandbyID)
			cl.putTask(1, tc.dead)
			ownBefore := cl.task(2)

			env, rec := newEnv(t)
			cl.acts(newClock(t0.Add(time.Hour)).Now).register(env)
			env.ExecuteWorkflow(PrimaryBackup, cl.member(2))

			res := roleResult(t, env)
			assert.Equal(t, RoleResult{Reason: ReasonActivated, Role: roles.RoleRunner, TookOver: []string{crawler(1)}}, res)
			assert.Equal(t, failOverSteps, rec.started())
			assertRunnerFailedOver(t, cl, 1, 2)
			g := cl.group()
			assert.Equal(t, []string{crawler(2)}, g.CurrentRunner)
			assert.Empty(t, g.CurrentBackup)
			assert.Equal(t, "", g.StandbyID, "no backup left to be the standby")

			own := cl.task(2)
			if tc.want == nil {
				assert.Equal(t, ownBefore, own, "nothing to hand over: the backup's Task stays empty")
				assert.False(t, own.Pending())
				assert.Equal(t, tc.dead, cl.task(1), "the dead Task is left as it was")
				return
			}
			want := tc.want(tc.dead)
			assert.Equal(t, *want, own)
			assert.True(t, own.Pending())
			// The dead Task is fenced: it names the new holder and epoch.
			dt := cl.task(1)
			assert.Equal(t, crawler(2), dt.Holder)
			assert.Equal(t, want.Epoch, dt.Epoch)
			assert.Equal(t, tc.dead.NextIndex, dt.NextIndex)
		})
	}
}

// scriptClock is the activities' clock for the detector tests: call k
// (1-based) of Now returns t0 plus script[k-1]. Runner 1's heartbeat was
// written at t0, so each call is one check of one heartbeat age. When the
// script is used up, then runs (once); further calls are an error.
type scriptClock struct {
	mu     sync.Mutex
	script []time.Duration
	calls  int
	then   func()
	extra  atomic.Int32
}

func (c *scriptClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	if c.calls > len(c.script) {
		c.extra.Add(1)
		return t0
	}
	if c.calls == len(c.script) && c.then != nil {
		c.then()
	}
	return t0.Add(c.script[c.calls-1])
}

func (c *scriptClock) checks() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls
}

const (
	late    time.Duration = time.Hour // far past update_timeout
	healthy time.Duration = 0
)

func pattern(parts ...any) []time.Duration {
	var out []time.Duration
	for i := 0; i < len(parts); i += 2 {
		n, d := parts[i].(int), parts[i+1].(time.Duration)
		for j := 0; j < n; j++ {
			out = append(out, d)
		}
	}
	return out
}

// TestPrimaryBackupDetectionFlapping drives the REAL WatchRunners
// activity inside the test environment with a scripted clock, so that
// runner 1's heartbeat looks late or healthy at each check, and checks
// the reset rule: late checks count towards heart_rhythm_timeout (3) only
// until reset_timeout (10) healthy checks in a row clear them.
func TestPrimaryBackupDetectionFlapping(t *testing.T) {
	cases := []struct {
		name   string
		script []time.Duration
		deadAt int // check at which runner 1 is declared dead; 0: never
	}{
		{"three late checks in a row", pattern(3, late), 3},
		{"one healthy check does not reset", pattern(2, late, 1, healthy, 1, late), 4},
		{"nine healthy checks do not reset", pattern(2, late, 9, healthy, 1, late), 12},
		{"ten healthy checks reset", pattern(2, late, 10, healthy, 2, late, 10, healthy, 2, late, 1, healthy), 0},
		{"reset, then three late", pattern(2, late, 10, healthy, 3, late), 15},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cl := newCluster(t, 1, 1)
			clk := &scriptClock{script: tc.script}
			if tc.deadAt == 0 {
				// After the script the watcher itself is marked dead, which
				// ends its watch with Changed.
				clk.then = func() {
					n := cl.node(2)
					n.Role = roles.RoleDeadBackupRunner
					_, err := cl.c.Put(context.Background(), cl.c.NodePath(crawler(2)), n, metadata.AnyVersion)
					assert.NoError(t, err)
				}
			}
			env, rec := newEnv(t)
			cl.acts(clk.Now).register(env)
			env.ExecuteWorkflow(PrimaryBackup, cl.member(2))
			res := roleResult(t, env)
			assert.Zero(t, clk.extra.Load(), "checks after the script")

			if tc.deadAt == 0 {
				assert.Equal(t, len(tc.script), clk.checks())
				assert.Equal(t, RoleResult{Reason: ReasonChanged, Role: roles.RoleDeadBackupRunner}, res)
				assert.Equal(t, []string{"WatchRunners"}, rec.started(), "a flapping runner is not failed over")
				assert.Equal(t, roles.RoleRunner, cl.node(1).Role)
				assert.Equal(t, []string{crawler(1)}, cl.group().CurrentRunner)
				return
			}
			assert.Equal(t, tc.deadAt, clk.checks(), "declared dead at check %d", tc.deadAt)
			assert.Equal(t, RoleResult{Reason: ReasonActivated, Role: roles.RoleRunner, TookOver: []string{crawler(1)}}, res)
			assert.Equal(t, failOverSteps, rec.started())
			assertRunnerFailedOver(t, cl, 1, 2)
		})
	}
}

// TestPrimaryBackupReactsToWatchResults checks PrimaryBackup's handling
// of each WatchRunners result with mocked cluster.
func TestPrimaryBackupReactsToWatchResults(t *testing.T) {
	m := cluster.Member{Group: testGroup, Name: crawler(3), Runner: 2, Backup: 2, Timers: testTimers()}
	peer := func(name string, role roles.Role) cluster.PeerInput {
		return cluster.PeerInput{Member: m, Dead: name, DeadRole: role}
	}

	t.Run("changed", func(t *testing.T) {
		env, rec := newEnv(t)
		pos := cluster.Position{Role: roles.RoleBackup}
		env.OnActivity(fa.WatchRunners, mock.Anything, cluster.WatchInput{Member: m, Free: 1, As: roles.RoleBackup}).
			Return(cluster.WatchResult{Changed: true, Position: pos}, nil).Once()
		env.ExecuteWorkflow(PrimaryBackup, m)
		assert.Equal(t, RoleResult{Reason: ReasonChanged, Role: roles.RoleBackup}, roleResult(t, env))
		assert.Equal(t, []string{"WatchRunners"}, rec.started())
		env.AssertExpectations(t)
	})

	t.Run("dead backup, then dead runner claimed by another, then dead runner", func(t *testing.T) {
		env, rec := newEnv(t)
		env.OnActivity(fa.WatchRunners, mock.Anything, mock.Anything).
			Return(cluster.WatchResult{Dead: crawler(4), DeadRole: roles.RoleBackup}, nil).Once()
		env.OnActivity(fa.Discover, mock.Anything, peer(crawler(4), roles.RoleBackup)).
			Return(cluster.DiscoverResult{Claimed: true, By: m.Name}, nil).Once()
		env.OnActivity(fa.Activate, mock.Anything, peer(crawler(4), roles.RoleBackup)).
			Return(cluster.Position{Role: roles.RoleBackup, Standby: true}, nil).Once()

		env.OnActivity(fa.WatchRunners, mock.Anything, mock.Anything).
			Return(cluster.WatchResult{Dead: crawler(1), DeadRole: roles.RoleRunner}, nil).Once()
		env.OnActivity(fa.Discover, mock.Anything, peer(crawler(1), roles.RoleRunner)).
			Return(cluster.DiscoverResult{Claimed: false, By: crawler(9)}, nil).Once()

		env.OnActivity(fa.WatchRunners, mock.Anything, mock.Anything).
			Return(cluster.WatchResult{Dead: crawler(2), DeadRole: roles.RoleRunner}, nil).Once()
		env.OnActivity(fa.Discover, mock.Anything, peer(crawler(2), roles.RoleRunner)).
			Return(cluster.DiscoverResult{Claimed: true, By: m.Name}, nil).Once()
		env.OnActivity(fa.Activate, mock.Anything, peer(crawler(2), roles.RoleRunner)).
			Return(cluster.Position{Role: roles.RoleRunner}, nil).Once()
		env.OnActivity(fa.HandOver, mock.Anything, peer(crawler(2), roles.RoleRunner), false).
			Return(cluster.HandOverResult{Owner: m.Name, Pending: true, Status: roles.TaskProcessing}, nil).Once()

		env.ExecuteWorkflow(PrimaryBackup, m)
		assert.Equal(t, RoleResult{Reason: ReasonActivated, Role: roles.RoleRunner, TookOver: []string{crawler(4), crawler(2)}}, roleResult(t, env))
		assert.Equal(t, []string{
			"WatchRunners", "Discover", "Activate", // dead backup: no hand-over, keep watching
			"WatchRunners", "Discover", // claimed by another: keep watching
			"WatchRunners", "Discover", "Activate", "HandOver",
		}, rec.started())
		env.AssertExpectations(t)
	})

	t.Run("claim lost during activate", func(t *testing.T) {
		env, rec := newEnv(t)
		env.OnActivity(fa.WatchRunners, mock.Anything, mock.Anything).
			Return(cluster.WatchResult{Dead: crawler(1), DeadRole: roles.RoleRunner}, nil).Once()
		env.OnActivity(fa.Discover, mock.Anything, mock.Anything).
			Return(cluster.DiscoverResult{Claimed: true, By: m.Name}, nil).Once()
		env.OnActivity(fa.Activate, mock.Anything, mock.Anything).
			Return(cluster.Position{}, lostErr()).Once()
		env.OnActivity(fa.WatchRunners, mock.Anything, mock.Anything).
			Return(cluster.WatchResult{Changed: true, Position: cluster.Position{Role: roles.RoleBackup}}, nil).Once()
		env.ExecuteWorkflow(PrimaryBackup, m)
		assert.Equal(t, RoleResult{Reason: ReasonChanged, Role: roles.RoleBackup}, roleResult(t, env))
		assert.Equal(t, []string{"WatchRunners", "Discover", "Activate", "WatchRunners"}, rec.started())
	})

	t.Run("a non-retryable failure fails the workflow", func(t *testing.T) {
		env, _ := newEnv(t)
		env.OnActivity(fa.WatchRunners, mock.Anything, mock.Anything).
			Return(cluster.WatchResult{}, fatalErr()).Once()
		env.ExecuteWorkflow(PrimaryBackup, m)
		require.True(t, env.IsWorkflowCompleted())
		err := env.GetWorkflowError()
		require.Error(t, err)
		assert.True(t, hasErrType(err, "TestFatal"), "%v", err)
	})

	t.Run("a corrupted znode is retried until repaired", func(t *testing.T) {
		env, rec := newEnv(t)
		env.OnActivity(fa.WatchRunners, mock.Anything, mock.Anything).
			Return(cluster.WatchResult{}, corruptErr("/baton/group")).Twice()
		env.OnActivity(fa.WatchRunners, mock.Anything, mock.Anything).
			Return(cluster.WatchResult{Changed: true, Position: cluster.Position{Role: roles.RoleBackup}}, nil).Once()
		env.ExecuteWorkflow(PrimaryBackup, m)
		assert.Equal(t, RoleResult{Reason: ReasonChanged, Role: roles.RoleBackup}, roleResult(t, env))
		var attempts []int32
		for _, c := range rec.callsOf("WatchRunners") {
			attempts = append(attempts, c.Attempt)
		}
		assert.Equal(t, []int32{1, 2, 3}, attempts, "one activity, retried")
		env.AssertExpectations(t)
	})
}

// TestFailOverResumesAfterCrash makes one fail-over step fail once with a
// retryable error, as when the worker dies in the middle of it, either
// before or after the step wrote to ZooKeeper. The step is retried (its
// attempt 2) and the workflow goes on with the next step: the steps before
// it do not run again, and the end state is that of a clean fail-over.
func TestFailOverResumesAfterCrash(t *testing.T) {
	for _, step := range []string{"Discover", "Activate", "HandOver"} {
		for _, afterWrite := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/after-write=%v", step, afterWrite), func(t *testing.T) {
				cl := newCluster(t, 1, 1)
				dead := processingTask(5, 2, crawler(1), 4)
				cl.putTask(1, dead)
				real := cl.acts(newClock(t0.Add(time.Hour)).Now)
				env, rec := newEnv(t)
				real.register(env)

				var crashed atomic.Bool
				crash := func(err error) error {
					if err == nil && crashed.CompareAndSwap(false, true) {
						return crashErr()
					}
					return err
				}
				switch step {
				case "Discover":
					env.OnActivity(fa.Discover, mock.Anything, mock.Anything).Return(
						func(ctx context.Context, in cluster.PeerInput) (cluster.DiscoverResult, error) {
							if !afterWrite {
								if err := crash(nil); err != nil {
									return cluster.DiscoverResult{}, err
								}
							}
							r, err := real.Discover(ctx, in)
							return r, crash(err)
						})
				case "Activate":
					env.OnActivity(fa.Activate, mock.Anything, mock.Anything).Return(
						func(ctx context.Context, in cluster.PeerInput) (cluster.Position, error) {
							if !afterWrite {
								if err := crash(nil); err != nil {
									return cluster.Position{}, err
								}
							}
							r, err := real.Activate(ctx, in)
							return r, crash(err)
						})
				case "HandOver":
					env.OnActivity(fa.HandOver, mock.Anything, mock.Anything, mock.Anything).Return(
						func(ctx context.Context, in cluster.PeerInput, adopt bool) (cluster.HandOverResult, error) {
							if !afterWrite {
								if err := crash(nil); err != nil {
									return cluster.HandOverResult{}, err
								}
							}
							r, err := real.HandOver(ctx, in, adopt)
							return r, crash(err)
						})
				}
				env.ExecuteWorkflow(PrimaryBackup, cl.member(2))

				res := roleResult(t, env)
				assert.Equal(t, RoleResult{Reason: ReasonActivated, Role: roles.RoleRunner, TookOver: []string{crawler(1)}}, res)
				var want []string
				for _, s := range failOverSteps {
					want = append(want, s)
					if s == step {
						want = append(want, s) // attempt 2
					}
				}
				assert.Equal(t, want, rec.started())
				calls := rec.callsOf(step)
				require.Len(t, calls, 2)
				assert.Equal(t, []int32{1, 2}, []int32{calls[0].Attempt, calls[1].Attempt})

				assertRunnerFailedOver(t, cl, 1, 2)
				own := cl.task(2)
				assert.Equal(t, dead.RunningContent, own.RunningContent)
				assert.Equal(t, 2, own.NextIndex, "continues where the dead runner stopped")
				assert.Equal(t, dead.Epoch+1, own.Epoch, "epoch raised once")
				assert.Equal(t, crawler(2), own.Holder)
				assert.Equal(t, dead.ResultDetail, own.ResultDetail, "no result counted twice")
			})
		}
	}
}

// TestSecondaryBackupBecomesPrimary: a secondary backup ends with
// ReasonChanged as soon as standby_id becomes its index (REAL WaitStandby,
// woken by the watch on its membership entry).
func TestSecondaryBackupBecomesPrimary(t *testing.T) {
	cl := newCluster(t, 1, 2)
	require.Equal(t, "2", cl.group().StandbyID)
	require.Equal(t, roles.RoleBackup, cl.node(3).Role)

	// Backup 3's ring successors are 1 and 2, so WaitStandby checks their
	// heartbeats (a clock read) before it waits on its watches; at that
	// first read the primary takes over runner 1 and standby_id moves to 3.
	var once sync.Once
	clk := func() time.Time {
		once.Do(func() {
			_, err := cl.c.UpdateGroup(context.Background(), func(g *roles.GroupState) error {
				g.CurrentRunner = roles.Add(roles.Remove(g.CurrentRunner, crawler(1)), crawler(2))
				g.CurrentBackup = roles.Remove(g.CurrentBackup, crawler(2))
				g.CurrentCrawler = roles.Remove(g.CurrentCrawler, crawler(1))
				g.FailCrawler, g.FailRunner = roles.Add(g.FailCrawler, crawler(1)), roles.Add(g.FailRunner, crawler(1))
				g.TotalBackup--
				g.StandbyID = "3"
				return nil
			})
			assert.NoError(t, err)
		})
		return t0
	}
	env, rec := newEnv(t)
	cl.acts(clk).register(env)
	env.ExecuteWorkflow(SecondaryBackup, cl.member(3))
	assert.Equal(t, RoleResult{Reason: ReasonChanged, Role: roles.RoleBackup}, roleResult(t, env))
	assert.Equal(t, []string{"WaitStandby"}, rec.started())
}

// TestSecondaryBackupTakesOverDeadPrimary: a secondary whose ring
// successors include the primary backup watches it; when the primary is declared dead it runs
// Discover and Activate (no HandOver: a backup has no Task) and ends with
// ReasonChanged, standby_id now being its own index.
func TestSecondaryBackupTakesOverDeadPrimary(t *testing.T) {
	cl := newCluster(t, 1, 2)
	cl.beatAt(1, t0.Add(time.Hour)) // the runner is alive
	env, rec := newEnv(t)
	cl.acts(newClock(t0.Add(time.Hour)).Now).register(env)
	env.ExecuteWorkflow(SecondaryBackup, cl.member(3))

	res := roleResult(t, env)
	assert.Equal(t, RoleResult{Reason: ReasonChanged, Role: roles.RoleBackup, TookOver: []string{crawler(2)}}, res)
	assert.Equal(t, []string{"WaitStandby", "Discover", "Activate"}, rec.started())

	n := cl.node(2)
	assert.Equal(t, roles.RoleDeadBackupRunner, n.Role)
	assert.Equal(t, crawler(3), n.TakenOverBy)
	assert.Equal(t, roles.HeartAsystole, cl.heartbeat(2).HealthyState)
	assert.Equal(t, roles.RoleBackup, cl.node(3).Role)
	assert.Equal(t, roles.RoleRunner, cl.node(1).Role)
	g := cl.group()
	assert.Equal(t, "3", g.StandbyID)
	assert.Equal(t, []string{crawler(3)}, g.CurrentBackup)
	assert.Equal(t, []string{crawler(1)}, g.CurrentRunner)
	assert.Equal(t, []string{crawler(2)}, g.FailBackup)
	assert.Equal(t, []string{crawler(2)}, g.FailCrawler)
	assert.Empty(t, g.FailRunner)
	assert.Equal(t, 1, g.TotalBackup)
}

// TestSecondaryBackupReactsToWaitResults checks SecondaryBackup with
// mocked cluster.
func TestSecondaryBackupReactsToWaitResults(t *testing.T) {
	m := cluster.Member{Group: testGroup, Name: crawler(3), Runner: 1, Backup: 2, Timers: testTimers()}

	t.Run("standby", func(t *testing.T) {
		env, rec := newEnv(t)
		env.OnActivity(fa.WaitStandby, mock.Anything, m).
			Return(cluster.WatchResult{Changed: true, Position: cluster.Position{Role: roles.RoleBackup, Standby: true}}, nil).Once()
		env.ExecuteWorkflow(SecondaryBackup, m)
		assert.Equal(t, RoleResult{Reason: ReasonChanged, Role: roles.RoleBackup}, roleResult(t, env))
		assert.Equal(t, []string{"WaitStandby"}, rec.started())
	})

	t.Run("dead primary claimed by another, then promoted", func(t *testing.T) {
		env, rec := newEnv(t)
		env.OnActivity(fa.WaitStandby, mock.Anything, m).
			Return(cluster.WatchResult{Dead: crawler(2), DeadRole: roles.RoleBackup}, nil).Once()
		env.OnActivity(fa.Discover, mock.Anything, mock.Anything).
			Return(cluster.DiscoverResult{Claimed: false, By: crawler(4)}, nil).Once()
		env.OnActivity(fa.WaitStandby, mock.Anything, m).
			Return(cluster.WatchResult{Changed: true, Position: cluster.Position{Role: roles.RoleBackup, Standby: true}}, nil).Once()
		env.ExecuteWorkflow(SecondaryBackup, m)
		assert.Equal(t, RoleResult{Reason: ReasonChanged, Role: roles.RoleBackup}, roleResult(t, env))
		assert.Equal(t, []string{"WaitStandby", "Discover", "WaitStandby"}, rec.started())
	})

	t.Run("dead primary", func(t *testing.T) {
		env, rec := newEnv(t)
		in := cluster.PeerInput{Member: m, Dead: crawler(2), DeadRole: roles.RoleBackup}
		env.OnActivity(fa.WaitStandby, mock.Anything, m).
			Return(cluster.WatchResult{Dead: crawler(2), DeadRole: roles.RoleBackup}, nil).Once()
		env.OnActivity(fa.Discover, mock.Anything, in).Return(cluster.DiscoverResult{Claimed: true, By: m.Name}, nil).Once()
		env.OnActivity(fa.Activate, mock.Anything, in).Return(cluster.Position{Role: roles.RoleBackup, Standby: true}, nil).Once()
		env.ExecuteWorkflow(SecondaryBackup, m)
		assert.Equal(t, RoleResult{Reason: ReasonChanged, Role: roles.RoleBackup, TookOver: []string{crawler(2)}}, roleResult(t, env))
		assert.Equal(t, []string{"WaitStandby", "Discover", "Activate"}, rec.started())
		env.AssertNotCalled(t, "HandOver", mock.Anything, mock.Anything, mock.Anything)
	})
}

// TestBackupsContinueAsNew: the backup loops end with a ContinueAsNewError
// after maxLoops iterations, or as soon as the server suggests it.
func TestBackupsContinueAsNew(t *testing.T) {
	m := cluster.Member{Group: testGroup, Name: crawler(3), Runner: 1, Backup: 2, Timers: testTimers()}
	deadRunner := cluster.WatchResult{Dead: crawler(1), DeadRole: roles.RoleRunner}
	notClaimed := cluster.DiscoverResult{Claimed: false, By: crawler(2)}

	for _, tc := range []struct {
		name      string
		wf        any
		wait      any
		suggested bool
		loops     int
	}{
		{"PrimaryBackup/maxLoops", PrimaryBackup, fa.WatchRunners, false, maxLoops},
		{"PrimaryBackup/suggested", PrimaryBackup, fa.WatchRunners, true, 1},
		{"SecondaryBackup/maxLoops", SecondaryBackup, fa.WaitStandby, false, maxLoops},
		{"SecondaryBackup/suggested", SecondaryBackup, fa.WaitStandby, true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, rec := newEnv(t)
			env.SetContinueAsNewSuggested(tc.suggested)
			env.OnActivity(tc.wait, mock.Anything, mock.Anything).Return(deadRunner, nil)
			env.OnActivity(fa.Discover, mock.Anything, mock.Anything).Return(notClaimed, nil)
			env.ExecuteWorkflow(tc.wf, m)
			require.True(t, env.IsWorkflowCompleted())
			err := env.GetWorkflowError()
			require.True(t, workflow.IsContinueAsNewError(err), "%v", err)
			var can *workflow.ContinueAsNewError
			require.True(t, errors.As(err, &can))
			assert.Equal(t, workflowName(tc.wf), can.WorkflowType.Name)
			assert.Equal(t, 2*tc.loops, len(rec.started()))
			assert.Equal(t, tc.loops, rec.count("Discover"))
		})
	}
}
