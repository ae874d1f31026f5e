package workflows

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"

	"github.com/batoncrawl/baton/activities/cluster"
	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/metadata"
	"github.com/batoncrawl/baton/roles"
)

// forever is how long a mocked wait blocks on the workflow clock: longer
// than any test, so the wait ends only when the workflow cancels it.
const forever = 7 * 24 * time.Hour

func runnerMember(backup, capacity int) cluster.Member {
	return cluster.Member{Group: testGroup, Name: crawler(1), Runner: 3, Backup: backup, Timers: testTimers(), Capacity: capacity}
}

func runInput(m cluster.Member, owner string) cluster.RunTaskInput {
	return cluster.RunTaskInput{Member: m, Owner: owner}
}

// TestRunnerFenced: a Runner whose RunTask is refused by the fence, or
// whose WaitTask finds it marked dead, ends with ReasonFenced.
func TestRunnerFenced(t *testing.T) {
	m := runnerMember(1, 0)

	t.Run("RunTask fenced", func(t *testing.T) {
		env, rec := newEnv(t)
		env.OnActivity(ra.WaitTask, mock.Anything, m).Return(cluster.WaitTaskResult{Pending: true, Role: roles.RoleRunner}, nil).Once()
		env.OnActivity(ra.RunTask, mock.Anything, runInput(m, m.Name)).Return(cluster.RunTaskResult{}, fencedErr()).Once()
		env.ExecuteWorkflow(Runner, m)
		assert.Equal(t, RoleResult{Reason: ReasonFenced}, roleResult(t, env))
		assert.Equal(t, []string{"WaitTask", "RunTask"}, rec.started())
		env.AssertExpectations(t)
	})

	t.Run("WaitTask finds it dead", func(t *testing.T) {
		env, rec := newEnv(t)
		env.OnActivity(ra.WaitTask, mock.Anything, m).Return(cluster.WaitTaskResult{Fenced: true, Role: roles.RoleDeadRunner}, nil).Once()
		env.ExecuteWorkflow(Runner, m)
		assert.Equal(t, RoleResult{Reason: ReasonFenced, Role: roles.RoleDeadRunner}, roleResult(t, env))
		assert.Equal(t, []string{"WaitTask"}, rec.started())
	})

	t.Run("a non-retryable RunTask failure fails the workflow", func(t *testing.T) {
		env, _ := newEnv(t)
		env.OnActivity(ra.WaitTask, mock.Anything, m).Return(cluster.WaitTaskResult{Pending: true, Role: roles.RoleRunner}, nil).Once()
		env.OnActivity(ra.RunTask, mock.Anything, mock.Anything).Return(cluster.RunTaskResult{}, fatalErr()).Once()
		env.ExecuteWorkflow(Runner, m)
		require.True(t, env.IsWorkflowCompleted())
		assert.True(t, hasErrType(env.GetWorkflowError(), "TestFatal"), "%v", env.GetWorkflowError())
	})

	t.Run("a corrupted Task is retried until repaired", func(t *testing.T) {
		env, rec := newEnv(t)
		env.OnActivity(ra.WaitTask, mock.Anything, m).Return(cluster.WaitTaskResult{Pending: true, Role: roles.RoleRunner}, nil).Once()
		env.OnActivity(ra.RunTask, mock.Anything, runInput(m, m.Name)).
			Return(cluster.RunTaskResult{}, corruptErr("/baton/node/"+m.Name+"/task")).Twice()
		env.OnActivity(ra.RunTask, mock.Anything, runInput(m, m.Name)).
			Return(cluster.RunTaskResult{Owner: m.Name, Status: roles.TaskDone}, nil).Once()
		env.OnActivity(ra.WaitTask, mock.Anything, m).Return(cluster.WaitTaskResult{Fenced: true, Role: roles.RoleDeadRunner}, nil).Once()
		env.ExecuteWorkflow(Runner, m)
		assert.Equal(t, RoleResult{Reason: ReasonFenced, Role: roles.RoleDeadRunner}, roleResult(t, env))
		assert.Equal(t, []string{"WaitTask", "RunTask", "RunTask", "RunTask", "WaitTask"}, rec.started())
		var attempts []int32
		for _, c := range rec.callsOf("RunTask") {
			attempts = append(attempts, c.Attempt)
		}
		assert.Equal(t, []int32{1, 2, 3}, attempts, "one activity, retried")
		env.AssertExpectations(t)
	})
}

// TestRunnerRealFenced runs the Runner with the REAL activities: its Task
// runs, and then it finds itself marked dead by a backup and stops.
func TestRunnerRealFenced(t *testing.T) {
	cl := newCluster(t, 1, 1)
	tk := roles.EmptyTask()
	tk.RunningContent = requests(3)
	tk.Epoch = cl.task(1).Epoch
	cl.putTask(1, tk)

	env, rec := newEnv(t)
	acts := cl.acts(newClock(t0).Now)
	acts.register(env)
	// When the Task has run, backup 2 declares runner 1 dead (it is
	// partitioned away); WaitTask or the ring watch sees it through its
	// NodeState watch.
	env.SetOnActivityCompletedListener(func(info *activity.Info, _ converter.EncodedValue, err error) {
		if info.ActivityType.Name != "RunTask" {
			return
		}
		assert.NoError(t, err)
		n := cl.node(1)
		n.Role, n.TakenOverBy = roles.RoleDeadRunner, crawler(2)
		_, perr := cl.c.Put(context.Background(), cl.c.NodePath(crawler(1)), n, metadata.AnyVersion)
		assert.NoError(t, perr)
	})
	env.ExecuteWorkflow(Runner, cl.member(1))
	assert.Equal(t, RoleResult{Reason: ReasonFenced, Role: roles.RoleDeadRunner}, roleResult(t, env))
	// The fence is seen by the ring watch or by a second WaitTask,
	// whichever reads the NodeState first.
	started := rec.without("WatchRunners")
	require.GreaterOrEqual(t, len(started), 2)
	assert.Equal(t, []string{"WaitTask", "RunTask"}, started[:2])
	assert.Equal(t, 1, rec.count("RunTask"))
	assert.Equal(t, 1, rec.count("WatchRunners"), "the runner watches its ring successors beside its Task loop")

	done := cl.task(1)
	assert.Equal(t, roles.TaskDone, done.RunningStatus)
	assert.Equal(t, roles.RunningResult{SuccessCount: 3}, done.RunningResult)
	assert.Len(t, done.ResultDetail, 3)
	assert.Equal(t, crawler(1), done.Holder)
}

// TestRunnerContinueAsNew: the Runner's loop continues as new after
// maxLoops selector rounds (or when the server suggests it), and only
// once no Task is running.
func TestRunnerContinueAsNew(t *testing.T) {
	m := runnerMember(1, 0)
	for _, tc := range []struct {
		name      string
		suggested bool
		runs      int
	}{
		{"maxLoops", false, maxLoops / 2}, // each Task is two rounds: WaitTask, RunTask
		{"suggested", true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, rec := newEnv(t)
			env.SetContinueAsNewSuggested(tc.suggested)
			env.OnActivity(ra.WaitTask, mock.Anything, m).Return(cluster.WaitTaskResult{Pending: true, Role: roles.RoleRunner}, nil)
			env.OnActivity(fa.WatchRunners, mock.Anything, cluster.WatchInput{Member: m}).Return(cluster.WatchResult{}, nil).After(forever)
			env.OnActivity(ra.RunTask, mock.Anything, runInput(m, m.Name)).
				Return(cluster.RunTaskResult{Owner: m.Name, Status: roles.TaskDone}, nil).After(time.Minute)
			env.ExecuteWorkflow(Runner, m)
			require.True(t, env.IsWorkflowCompleted())
			err := env.GetWorkflowError()
			require.True(t, workflow.IsContinueAsNewError(err), "%v", err)
			var can *workflow.ContinueAsNewError
			require.True(t, errors.As(err, &can))
			assert.Equal(t, "Runner", can.WorkflowType.Name)
			assert.Equal(t, tc.runs, rec.count("RunTask"))
			assert.Equal(t, tc.runs, rec.count("WaitTask"), "no wait left behind")
		})
	}
}

// TestAllAreRunnerTakesOverDeadPeer: in All-are-Runner mode (no backups)
// the Runner watches its peers beside its own wait; when a peer dies it
// runs Discover, Activate and HandOver(adopt=true) and runs the dead
// peer's Task (RunTask with Owner = the dead peer) beside its own.
func TestAllAreRunnerTakesOverDeadPeer(t *testing.T) {
	m := runnerMember(0, 2)
	in := cluster.PeerInput{Member: m, Dead: crawler(2), DeadRole: roles.RoleRunner}
	env, rec := newEnv(t)
	env.OnActivity(ra.WaitTask, mock.Anything, m).Return(cluster.WaitTaskResult{}, nil).After(forever)
	env.OnActivity(fa.WatchRunners, mock.Anything, cluster.WatchInput{Member: m, Free: 2}).
		Return(cluster.WatchResult{Dead: crawler(2), DeadRole: roles.RoleRunner, Position: cluster.Position{Role: roles.RoleRunner, AllRunner: true}}, nil).Once()
	env.OnActivity(fa.Discover, mock.Anything, in).Return(cluster.DiscoverResult{Claimed: true, By: m.Name}, nil).Once()
	env.OnActivity(fa.Activate, mock.Anything, in).Return(cluster.Position{Role: roles.RoleRunner, AllRunner: true}, nil).Once()
	env.OnActivity(fa.HandOver, mock.Anything, in, true).
		Return(cluster.HandOverResult{Owner: crawler(2), Pending: true, Status: roles.TaskProcessing}, nil).Once()
	env.OnActivity(ra.RunTask, mock.Anything, runInput(m, crawler(2))).
		Return(cluster.RunTaskResult{Owner: crawler(2), Status: roles.TaskDone}, nil).After(time.Minute).Once()
	// While the adopted Task runs there is room for one more (Free 1);
	// the watch then reports that this runner was itself marked dead.
	env.OnActivity(fa.WatchRunners, mock.Anything, cluster.WatchInput{Member: m, Free: 1}).
		Return(cluster.WatchResult{Changed: true, Position: cluster.Position{Role: roles.RoleDeadRunner}}, nil).After(time.Hour).Once()
	var canceled []string
	env.SetOnActivityCanceledListener(func(info *activity.Info) { canceled = append(canceled, info.ActivityType.Name) })

	env.ExecuteWorkflow(Runner, m)
	assert.Equal(t, RoleResult{Reason: ReasonFenced, Role: roles.RoleDeadRunner, TookOver: []string{crawler(2)}}, roleResult(t, env))
	assertOrder(t, rec.started(), "WatchRunners", "Discover", "Activate", "HandOver", "RunTask")
	assert.Equal(t, map[string]int{"WaitTask": 1, "WatchRunners": 2, "Discover": 1, "Activate": 1, "HandOver": 1, "RunTask": 1}, rec.counts())
	assert.Equal(t, []string{"WaitTask"}, canceled, "the wait is cancelled when the role ends")
	env.AssertExpectations(t)
}

// TestRunnerRemovesADeadBackup: with backups, a busy runner whose ring
// watch finds a backup dead removes it (Discover, Activate; nothing to hand
// over) and keeps running its Task and watching (Free 0: it takes no dead
// runner over).
func TestRunnerRemovesADeadBackup(t *testing.T) {
	m := runnerMember(1, 0)
	in := cluster.PeerInput{Member: m, Dead: crawler(4), DeadRole: roles.RoleBackup}
	env, rec := newEnv(t)
	env.OnActivity(ra.WaitTask, mock.Anything, m).Return(cluster.WaitTaskResult{Pending: true, Role: roles.RoleRunner}, nil).Once()
	env.OnActivity(ra.RunTask, mock.Anything, runInput(m, m.Name)).
		Return(cluster.RunTaskResult{Owner: m.Name, Status: roles.TaskDone}, nil).After(time.Hour).Once()
	env.OnActivity(fa.WatchRunners, mock.Anything, cluster.WatchInput{Member: m}).
		Return(cluster.WatchResult{Dead: crawler(4), DeadRole: roles.RoleBackup, Position: cluster.Position{Role: roles.RoleRunner}}, nil).After(time.Minute).Once()
	env.OnActivity(fa.Discover, mock.Anything, in).Return(cluster.DiscoverResult{Claimed: true, By: m.Name}, nil).Once()
	env.OnActivity(fa.Activate, mock.Anything, in).Return(cluster.Position{Role: roles.RoleRunner}, nil).Once()
	env.OnActivity(fa.WatchRunners, mock.Anything, cluster.WatchInput{Member: m}).
		Return(cluster.WatchResult{Changed: true, Position: cluster.Position{Role: roles.RoleDeadRunner}}, nil).After(2 * time.Hour).Once()
	env.OnActivity(ra.WaitTask, mock.Anything, m).Return(cluster.WaitTaskResult{}, nil).After(forever).Once()

	env.ExecuteWorkflow(Runner, m)
	assert.Equal(t, RoleResult{Reason: ReasonFenced, Role: roles.RoleDeadRunner, TookOver: []string{crawler(4)}}, roleResult(t, env))
	assert.Equal(t, []string{"WatchRunners", "Discover", "Activate", "WatchRunners"}, rec.without("WaitTask", "RunTask"))
	assert.Equal(t, 1, rec.count("RunTask"))
	env.AssertNotCalled(t, "HandOver", mock.Anything, mock.Anything, mock.Anything)
	env.AssertExpectations(t)
}

// TestAllAreRunnerAtCapacity: at capacity the Runner takes no dead peer
// over (the avalanche guard). With capacity 1 and its own Task running,
// the watch started beside the wait (Free 1) is cancelled and started
// again with Free 0, so it only reports dead peers for a survivor with
// room; when the Task has finished it watches with Free 1 again.
func TestAllAreRunnerAtCapacity(t *testing.T) {
	m := runnerMember(0, 1)
	env, rec := newEnv(t)
	const runTime = time.Hour
	env.OnActivity(ra.WaitTask, mock.Anything, m).Return(cluster.WaitTaskResult{Pending: true, Role: roles.RoleRunner}, nil).After(time.Minute).Once()
	env.OnActivity(ra.RunTask, mock.Anything, runInput(m, m.Name)).
		Return(cluster.RunTaskResult{Owner: m.Name, Status: roles.TaskDone}, nil).After(runTime).Once()
	env.OnActivity(fa.WatchRunners, mock.Anything, cluster.WatchInput{Member: m, Free: 1}).
		Return(cluster.WatchResult{Dead: crawler(2), DeadRole: roles.RoleRunner}, nil).After(forever).Once()
	env.OnActivity(fa.WatchRunners, mock.Anything, cluster.WatchInput{Member: m, Free: 0}).
		Return(cluster.WatchResult{}, nil).After(forever).Once()
	env.OnActivity(ra.WaitTask, mock.Anything, m).Return(cluster.WaitTaskResult{}, nil).After(forever).Once()
	env.OnActivity(fa.WatchRunners, mock.Anything, cluster.WatchInput{Member: m, Free: 1}).
		Return(cluster.WatchResult{Changed: true, Position: cluster.Position{Role: roles.RoleDeadRunner}}, nil).After(time.Minute).Once()
	var canceled []string
	env.SetOnActivityCanceledListener(func(info *activity.Info) { canceled = append(canceled, info.ActivityType.Name) })

	env.ExecuteWorkflow(Runner, m)
	assert.Equal(t, RoleResult{Reason: ReasonFenced, Role: roles.RoleDeadRunner}, roleResult(t, env), "a watch that finds the runner marked dead fences it")
	assert.Equal(t, []string{"WatchRunners", "WatchRunners", "WaitTask"}, canceled)
	watches := rec.callsOf("WatchRunners")
	require.Len(t, watches, 3)
	ran := rec.callsOf("RunTask")
	require.Len(t, ran, 1)
	assert.Equal(t, ran[0].At, watches[1].At, "at capacity the watch goes on, reporting only")
	assert.False(t, watches[2].At.Before(ran[0].At.Add(runTime)), "room again only once the Task has run")
	env.AssertNotCalled(t, "Discover", mock.Anything, mock.Anything)
}

// TestAllAreRunnerPeerClaimedByAnother: a dead peer that another survivor
// claimed is not activated nor handed over here.
func TestAllAreRunnerPeerClaimedByAnother(t *testing.T) {
	m := runnerMember(0, 2)
	env, rec := newEnv(t)
	env.OnActivity(ra.WaitTask, mock.Anything, m).Return(cluster.WaitTaskResult{Fenced: true, Role: roles.RoleDeadRunner}, nil).After(time.Hour).Once()
	env.OnActivity(fa.WatchRunners, mock.Anything, mock.Anything).
		Return(cluster.WatchResult{Dead: crawler(2), DeadRole: roles.RoleRunner}, nil).Once()
	env.OnActivity(fa.Discover, mock.Anything, mock.Anything).Return(cluster.DiscoverResult{Claimed: false, By: crawler(3)}, nil).Once()
	env.OnActivity(fa.WatchRunners, mock.Anything, mock.Anything).Return(cluster.WatchResult{}, nil).After(forever).Once()
	env.ExecuteWorkflow(Runner, m)
	assert.Equal(t, RoleResult{Reason: ReasonFenced, Role: roles.RoleDeadRunner}, roleResult(t, env))
	assert.Equal(t, []string{"Discover", "WatchRunners"}, rec.without("WaitTask")[1:])
	env.AssertNotCalled(t, "Activate", mock.Anything, mock.Anything)
	env.AssertNotCalled(t, "HandOver", mock.Anything, mock.Anything, mock.Anything)
	env.AssertNotCalled(t, "RunTask", mock.Anything, mock.Anything)
}

// TestAllAreRunnerRealAdoption runs an All-are-Runner Runner with the REAL
// activities: peer 2's heartbeat is stale (peer 3's is fresh), its Task is
// half done. Runner 1 claims it, adopts the Task in place (epoch + 1,
// holder 1), runs the rest of it beside its own Task, and finally is
// fenced on its own Task, which another instance took over meanwhile.
func TestAllAreRunnerRealAdoption(t *testing.T) {
	cl := newCluster(t, 3, 0)
	cl.capacity = 2
	now := t0.Add(time.Hour)
	cl.beatAt(3, now)
	dead := processingTask(4, 1, crawler(2), 3)
	cl.putTask(2, dead)
	own := roles.EmptyTask()
	own.RunningContent = []roles.Request{{TaskID: 1, URL: "http://127.0.0.1:1/own", Method: "GET"}}
	own.Epoch = cl.task(1).Epoch
	cl.putTask(1, own)

	acts := cl.acts(newClock(now).Now)
	// Runner 1's own request is in flight until the adopted Task is done;
	// then its own Task turns out to have been taken over by crawler 3.
	// (The adopted requests wait until the own one is in flight, so the
	// order is the same on every run.)
	ownInFlight, adoptedDone := make(chan struct{}), make(chan struct{})
	var ownOnce sync.Once
	acts.Fetcher = fetchFunc(func(ctx context.Context, req roles.Request) crawl.Page {
		wait := ownInFlight
		if req.URL == own.RunningContent[0].URL {
			ownOnce.Do(func() { close(ownInFlight) })
			wait = adoptedDone
		}
		select {
		case <-wait:
		case <-ctx.Done():
		}
		return crawl.Page{URL: req.URL, StatusCode: 200, FinalURL: req.URL, Title: "ok"}
	})
	env, rec := newEnv(t)
	acts.register(env)
	env.SetOnActivityCompletedListener(func(info *activity.Info, v converter.EncodedValue, err error) {
		if info.ActivityType.Name != "RunTask" || err != nil {
			return
		}
		var r cluster.RunTaskResult
		assert.NoError(t, v.Get(&r))
		if r.Owner == crawler(2) {
			tk := cl.task(1)
			tk.Holder, tk.Epoch = crawler(3), tk.Epoch+1
			cl.putTask(1, tk)
			close(adoptedDone)
		}
	})
	env.ExecuteWorkflow(Runner, cl.member(1))

	assert.Equal(t, RoleResult{Reason: ReasonFenced, TookOver: []string{crawler(2)}}, roleResult(t, env))
	assertOrder(t, rec.started(), "Discover", "Activate", "HandOver")
	c := rec.counts()
	assert.Equal(t, 1, c["Discover"])
	assert.Equal(t, 1, c["Activate"])
	assert.Equal(t, 1, c["HandOver"])
	assert.Equal(t, 2, c["RunTask"])
	assert.Equal(t, 1, c["WaitTask"])
	var owners []string
	for _, call := range rec.callsOf("RunTask") {
		var in cluster.RunTaskInput
		require.NoError(t, call.Args.Get(&in))
		owners = append(owners, in.Owner)
	}
	assert.ElementsMatch(t, []string{crawler(1), crawler(2)}, owners)

	assertRunnerFailedOver(t, cl, 2, 1)
	g := cl.group()
	assert.ElementsMatch(t, []string{crawler(1), crawler(3)}, g.CurrentRunner)
	adopted := cl.task(2)
	assert.Equal(t, roles.TaskDone, adopted.RunningStatus)
	assert.Equal(t, crawler(1), adopted.Holder)
	assert.Equal(t, dead.Epoch+1, adopted.Epoch)
	assert.Equal(t, 4, adopted.NextIndex)
	assert.Equal(t, roles.RunningResult{SuccessCount: 4}, adopted.RunningResult)
	for i, d := range adopted.ResultDetail {
		want := dead.Epoch
		if i > 0 {
			want = dead.Epoch + 1 // run by the survivor
		}
		assert.Equal(t, want, d.Epoch, "result %d recorded once, with the epoch of its run", i)
	}
	assert.Empty(t, cl.task(1).ResultDetail, "the fenced runner recorded nothing")
}

// fetchFunc is a crawl.Fetcher that answers every fetch with its func.
type fetchFunc func(ctx context.Context, req roles.Request) crawl.Page

func (f fetchFunc) Fetch(ctx context.Context, req roles.Request, _ crawl.Auth, _ int, _ crawl.Options) crawl.Page {
	return f(ctx, req)
}

func (f fetchFunc) FetchSitemap(ctx context.Context, req roles.Request, _ crawl.Auth, _ crawl.Options) crawl.Page {
	return f(ctx, req)
}
