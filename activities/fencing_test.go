package activities_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/cluster"
	"github.com/batoncrawl/baton/roles"
)

// The old runner is still alive when it is declared dead: its next write
// is refused, and the new holder records every result exactly once.
func TestFencingStaleRunner(t *testing.T) {
	f := newClusterFixture(t, 2, 1)
	f.start()
	ctx := context.Background()
	f.assign(2, requests(3))

	gate := newGate()
	old := goRun(func() (cluster.RunTaskResult, error) {
		return f.acts(gate).RunTask(ctx, cluster.RunTaskInput{Member: f.member(2)})
	})
	assert.Equal(t, 0, gate.next(t).TaskID)
	gate.ok(t)
	assert.Equal(t, 1, gate.next(t).TaskID) // the old runner is inside request 1
	// Request 0's result is written beside request 1's fetch, not before it.
	for deadline := time.Now().Add(waitLimit); len(taskIDs(f.task(2))) == 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	require.Equal(t, []int{0}, taskIDs(f.task(2)), "request 0 is recorded")

	// Meanwhile the backup declares it dead and takes over.
	a3 := f.acts(nil)
	in := peer(f.member(3), 2, roles.RoleRunner)
	_, err := a3.Discover(ctx, in)
	require.NoError(t, err)
	_, err = a3.Activate(ctx, in)
	require.NoError(t, err)
	h, err := a3.HandOver(ctx, in, false)
	require.NoError(t, err)
	require.True(t, h.Pending)

	// The old runner finishes request 1 and tries to record it.
	gate.ok(t)
	res, err := await(t, old, "old RunTask")
	require.Error(t, err)
	assert.True(t, cluster.IsFenced(err), "a stale holder's write is refused with a fencing error: %v", err)
	assert.Equal(t, 1, res.Ran, "only its first result was recorded")
	deadTask := f.task(2)
	assert.Equal(t, []int{0}, taskIDs(deadTask), "nothing written after the hand-over")
	assert.Equal(t, name(3), deadTask.Holder)

	// The old runner is fenced at once from now on.
	_, err = f.acts(&recordingFetcher{}).RunTask(ctx, cluster.RunTaskInput{Member: f.member(2)})
	assert.True(t, cluster.IsFenced(err), "%v", err)
	w, err := f.acts(nil).WaitTask(ctx, f.member(2))
	require.NoError(t, err)
	assert.Equal(t, cluster.WaitTaskResult{Fenced: true, Role: roles.RoleDeadRunner}, w)
	// Even running the Task it was handed over to is refused.
	_, err = f.acts(&recordingFetcher{}).RunTask(ctx, cluster.RunTaskInput{Member: f.member(2), Owner: name(3)})
	assert.True(t, cluster.IsFenced(err), "%v", err)

	// The new holder runs from request 1.
	rf := &recordingFetcher{}
	res, err = f.acts(rf).RunTask(ctx, cluster.RunTaskInput{Member: f.member(3)})
	require.NoError(t, err)
	assert.Equal(t, []int{1, 2}, rf.ids())
	final := f.task(3)
	assert.Equal(t, roles.TaskDone, final.RunningStatus)
	assert.Equal(t, []int{0, 1, 2}, taskIDs(final), "request 1 is recorded once, by the new holder")
	assert.Equal(t, roles.RunningResult{SuccessCount: 3}, final.RunningResult)
	assert.Equal(t, "ok", final.ResultDetail[1].Response, "request 1's result is the new holder's")
	assert.Equal(t, final.Epoch, final.ResultDetail[1].Epoch)
	assert.Less(t, final.ResultDetail[0].Epoch, final.Epoch, "request 0 was recorded under the old epoch")
}

// A Task whose holder changed (a hand-over) fences the old holder even if
// its own NodeState did not change.
func TestFencingByTaskHolder(t *testing.T) {
	f := newClusterFixture(t, 2, 1)
	f.start()
	ctx := context.Background()
	f.assign(1, requests(2))
	gate := newGate()
	old := goRun(func() (cluster.RunTaskResult, error) {
		return f.acts(gate).RunTask(ctx, cluster.RunTaskInput{Member: f.member(1)})
	})
	gate.next(t)
	tk := f.task(1)
	tk.Holder, tk.Epoch = name(3), tk.Epoch+1
	_, err := f.c().Put(ctx, f.c().TaskPath(name(1)), tk, -1)
	require.NoError(t, err)
	gate.ok(t)
	_, err = await(t, old, "RunTask")
	assert.True(t, cluster.IsFenced(err), "%v", err)
	assert.Empty(t, f.task(1).ResultDetail)
	_, err = f.acts(&recordingFetcher{}).RunTask(ctx, cluster.RunTaskInput{Member: f.member(1)})
	assert.True(t, cluster.IsFenced(err), "a Task held by another instance is not run: %v", err)
}

// All-are-Runner mode: the survivor adopts the dead runner's Task in place.
func TestFencingAdoptedTask(t *testing.T) {
	f := newClusterFixture(t, 3, 0)
	f.start()
	ctx := context.Background()
	f.assign(2, requests(3))
	gate := newGate()
	old := goRun(func() (cluster.RunTaskResult, error) {
		return f.acts(gate).RunTask(ctx, cluster.RunTaskInput{Member: f.member(2)})
	})
	gate.next(t)
	gate.ok(t)
	gate.next(t)

	a1 := f.acts(nil)
	in := peer(f.member(1), 2, roles.RoleRunner)
	d, err := a1.Discover(ctx, in)
	require.NoError(t, err)
	require.True(t, d.Claimed)
	pos, err := a1.Activate(ctx, in)
	require.NoError(t, err)
	assert.Equal(t, cluster.Position{Role: roles.RoleRunner, AllRunner: true}, pos)
	assert.Equal(t, gs(3, 3, 0, "", names(1, 3), names(1, 3), nil, names(2), names(2), nil), f.group())
	h, err := a1.HandOver(ctx, in, true)
	require.NoError(t, err)
	assert.Equal(t, cluster.HandOverResult{Owner: name(2), Pending: true, Status: roles.TaskProcessing}, h)
	adopted := f.task(2)
	assert.Equal(t, name(1), adopted.Holder)
	assert.Equal(t, name(2), adopted.HandedOverFrom)
	h2, err := a1.HandOver(ctx, in, true)
	require.NoError(t, err)
	assert.Equal(t, h, h2, "idempotent")
	assert.Equal(t, adopted, f.task(2))

	gate.ok(t)
	_, err = await(t, old, "old RunTask")
	assert.True(t, cluster.IsFenced(err), "%v", err)

	rf := &recordingFetcher{}
	res, err := f.acts(rf).RunTask(ctx, cluster.RunTaskInput{Member: f.member(1), Owner: name(2)})
	require.NoError(t, err)
	assert.Equal(t, name(2), res.Owner)
	assert.Equal(t, []int{1, 2}, rf.ids())
	final := f.task(2)
	assert.Equal(t, []int{0, 1, 2}, taskIDs(final))
	assert.Equal(t, roles.TaskDone, final.RunningStatus)
	assert.Empty(t, f.task(1).RunningContent, "the survivor's own Task is untouched")
}

// All-are-Runner mode: a dead runner whose Task a survivor is still running
// in place cannot rejoin yet, since rejoining resets that Task znode.
func TestRejoinWhileAdoptedTaskRuns(t *testing.T) {
	f := newClusterFixture(t, 3, 0)
	f.start()
	ctx := context.Background()
	f.assign(2, requests(2))
	a1 := f.acts(nil)
	in := peer(f.member(1), 2, roles.RoleRunner)
	_, err := a1.Discover(ctx, in)
	require.NoError(t, err)
	_, err = a1.Activate(ctx, in)
	require.NoError(t, err)
	_, err = a1.HandOver(ctx, in, true)
	require.NoError(t, err)
	adopted := f.task(2)
	require.True(t, adopted.Pending())

	_, err = f.acts(nil).Register(ctx, f.member(2))
	require.Error(t, err, "rejoining now would wipe the adopted Task")
	assert.Equal(t, cluster.ErrTypeNotReady, errType(err), "%v", err)
	assert.Equal(t, adopted, f.task(2))

	rf := &recordingFetcher{}
	_, err = f.acts(rf).RunTask(ctx, cluster.RunTaskInput{Member: f.member(1), Owner: name(2)})
	require.NoError(t, err)
	assert.Equal(t, []int{0, 1}, rf.ids(), "the adopted Task was not lost")

	res, err := f.acts(nil).Register(ctx, f.member(2))
	require.NoError(t, err)
	assert.Equal(t, cluster.RegisterResult{Role: roles.RoleRunner, Rejoined: true}, res)
	assert.Equal(t, gs(3, 3, 0, "", names(1, 3, 2), names(1, 3, 2), nil, nil, nil, nil), f.group())
}

// A store session loss while a request runs does not stop a holder that
// still holds its Task.
func TestRunTaskAcrossSessionLoss(t *testing.T) {
	f := newClusterFixture(t, 1, 1)
	f.start()
	ctx := context.Background()
	f.assign(1, requests(2))
	gate := newGate()
	run := goRun(func() (cluster.RunTaskResult, error) {
		return f.acts(gate).RunTask(ctx, cluster.RunTaskInput{Member: f.member(1)})
	})
	gate.next(t)
	f.mem.ExpireSession()
	gate.ok(t)
	gate.next(t)
	gate.ok(t)
	res, err := await(t, run, "RunTask")
	require.NoError(t, err)
	assert.Equal(t, roles.TaskDone, res.Status)
	assert.Equal(t, []int{0, 1}, taskIDs(f.task(1)))
}

// All-are-Runner mode: if the survivor that adopted a dead runner's Task
// dies too, the original runner takes its Task back when it rejoins.
func TestRejoinReclaimsTaskOfDeadAdopter(t *testing.T) {
	f := newClusterFixture(t, 3, 0)
	f.start()
	ctx := context.Background()
	f.assign(2, requests(3))
	f.crashMidTask(2, 1)
	a1 := f.acts(nil)
	in := peer(f.member(1), 2, roles.RoleRunner)
	_, err := a1.Discover(ctx, in)
	require.NoError(t, err)
	_, err = a1.Activate(ctx, in)
	require.NoError(t, err)
	_, err = a1.HandOver(ctx, in, true)
	require.NoError(t, err)
	adopted := f.task(2)
	// The adopter dies before running it; runner 3 claims the adopter.
	in3 := peer(f.member(3), 1, roles.RoleRunner)
	_, err = f.acts(nil).Discover(ctx, in3)
	require.NoError(t, err)

	res, err := f.acts(nil).Register(ctx, f.member(2))
	require.NoError(t, err)
	assert.Equal(t, cluster.RegisterResult{Role: roles.RoleRunner, Rejoined: true}, res)
	back := f.task(2)
	assert.Equal(t, name(2), back.Holder)
	assert.Greater(t, back.Epoch, adopted.Epoch, "the dead adopter is fenced")
	assert.Equal(t, 1, back.NextIndex)
	w, err := f.acts(nil).WaitTask(ctx, f.member(2))
	require.NoError(t, err)
	assert.True(t, w.Pending)
	rf := &recordingFetcher{}
	_, err = f.acts(rf).RunTask(ctx, cluster.RunTaskInput{Member: f.member(2)})
	require.NoError(t, err)
	assert.Equal(t, []int{1, 2}, rf.ids())
	assert.Equal(t, []int{0, 1, 2}, taskIDs(f.task(2)))
	_, err = f.acts(&recordingFetcher{}).RunTask(ctx, cluster.RunTaskInput{Member: f.member(1), Owner: name(2)})
	assert.True(t, cluster.IsFenced(err), "the dead adopter cannot write: %v", err)
}

// All-are-Runner mode: when the adopter dies, the survivor that claims it
// adopts the Task it held too; the original runner still cannot rejoin
// while that survivor runs it.
func TestRejoinWaitsForTheNextAdopter(t *testing.T) {
	f := newClusterFixture(t, 3, 0)
	f.start()
	ctx := context.Background()
	f.assign(2, requests(2))
	in := peer(f.member(1), 2, roles.RoleRunner)
	_, err := f.acts(nil).Discover(ctx, in)
	require.NoError(t, err)
	_, err = f.acts(nil).Activate(ctx, in)
	require.NoError(t, err)
	_, err = f.acts(nil).HandOver(ctx, in, true)
	require.NoError(t, err)
	// Runner 1 dies holding runner 2's Task; runner 3 takes over both.
	in3 := peer(f.member(3), 1, roles.RoleRunner)
	_, err = f.acts(nil).Discover(ctx, in3)
	require.NoError(t, err)
	_, err = f.acts(nil).Activate(ctx, in3)
	require.NoError(t, err)
	_, err = f.acts(nil).HandOver(ctx, in3, true)
	require.NoError(t, err)
	require.Equal(t, name(3), f.task(2).Holder)

	_, err = f.acts(nil).Register(ctx, f.member(2))
	require.Error(t, err)
	assert.Equal(t, cluster.ErrTypeNotReady, errType(err), "%v", err)
	rf := &recordingFetcher{}
	_, err = f.acts(rf).RunTask(ctx, cluster.RunTaskInput{Member: f.member(3), Owner: name(2)})
	require.NoError(t, err)
	assert.Equal(t, []int{0, 1}, rf.ids())
	_, err = f.acts(nil).Register(ctx, f.member(2))
	require.NoError(t, err)
}
