//go:build recordhistory

package workflows

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/batoncrawl/baton/roles"
	"github.com/batoncrawl/baton/testsuite"
)

// TestRecordPrimaryBackupHistory records testdata/primary_backup_history.json
// for TestReplayPrimaryBackupHistory. It is not part of the normal test
// run; run it by hand after an intended change of the workflow code:
//
//	go test -tags recordhistory -run TestRecordPrimaryBackupHistory ./workflows/
//
// It starts a Temporal dev server on loopback ports (testsuite.StartTemporal),
// a worker in this process with the REAL activities on an in-memory store
// (runner 1's heartbeat an hour old by the activities' clock, its Task half
// done), runs PrimaryBackup of crawler 2 to completion and writes the
// history as JSON (protojson of history.v1.History, the format of
// `temporal workflow show --output json`).
func TestRecordPrimaryBackupHistory(t *testing.T) {
	tmp := testsuite.StartTemporal(t)
	c := tmp.Client(t)

	cl := newCluster(t, 1, 1)
	cl.putTask(1, processingTask(5, 2, crawler(1), 4))
	m := cl.member(2)
	queue := TaskQueue(m.Group, m.Name)
	w := worker.New(c, queue, worker.Options{})
	Register(w)
	cl.acts(newClock(t0.Add(time.Hour)).Now).register(w)
	require.NoError(t, w.Start())
	defer w.Stop()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id := childID(m.Group, m.Name, "primary-backup")
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: id, TaskQueue: queue,
		TypedSearchAttributes: temporal.NewSearchAttributes(
			AttrCluster.ValueSet(m.Group), AttrCrawler.ValueSet(m.Name), AttrRole.ValueSet("primary-backup")),
	}, PrimaryBackup, m)
	require.NoError(t, err)
	var res RoleResult
	require.NoError(t, run.Get(ctx, &res))
	assert.Equal(t, RoleResult{Reason: ReasonActivated, Role: roles.RoleRunner, TookOver: []string{crawler(1)}}, res)
	assertRunnerFailedOver(t, cl, 1, 2)

	var h historypb.History
	it := c.GetWorkflowHistory(ctx, id, run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		require.NoError(t, err)
		h.Events = append(h.Events, e)
	}
	data, err := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(&h)
	require.NoError(t, err)
	out := filepath.Join("testdata", "primary_backup_history.json")
	require.NoError(t, os.MkdirAll(filepath.Dir(out), 0o755))
	require.NoError(t, os.WriteFile(out, append(data, '\n'), 0o644))
	t.Logf("wrote %s: %d events", out, len(h.Events))
}
