package metadata

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/roles"
)

// FuzzClusterReads writes any bytes into each kind of znode (as a foreign
// or broken client could) and reads them back through the Cluster: a read
// returns the decoded value or a *CorruptError naming the znode's path and
// the field at fault; the znode is left as it was (an operator can still
// see what was there), and UpdateGroup refuses to overwrite a corrupted
// group state.
func FuzzClusterReads(f *testing.F) {
	for _, s := range []string{
		`{"group":"g","role":"runner"}`,
		`{"total_crawler":2,"total_runner":1,"total_backup":1,"standby_id":"2","current_crawler":[],"current_runner":["g_1"],"current_backup":["g_2"],"fail_crawler":[],"fail_runner":[],"fail_backup":[]}`,
		`{"running_content":[{"task_id":1,"url":"http://127.0.0.1/","method":"GET"}],"cookie":{},"authorization":{},"in_progressing_id":"","running_result":{"success_count":0,"fail_count":0},"running_status":"nothing","result_detail":[],"epoch":1,"next_index":0}`,
		`{"heart_rhythm_time":"2026-01-02T03:04:05.000006Z","time_format":"2006-01-02T15:04:05.000000Z07:00","update_time":"0.5s","update_timeout":"2s","heart_rhythm_timeout":"3","healthy_state":"Healthy","task_state":"nothing"}`,
		`{"role":"backup-runner","standby":true}`,
		"", "null", "{", "[]", `{"total_crawler":"three"}`, "\x00\xff",
	} {
		for kind := range uint8(5) {
			f.Add([]byte(s), kind)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, kind uint8) {
		ctx := context.Background()
		c := NewCluster(NewMemory(), "/fuzz", "g")
		var p string
		var read func() (any, error)
		switch kind % 5 {
		case 0:
			p = c.NodePath("g_1")
			read = func() (any, error) { v, _, err := c.GetNode(ctx, "g_1"); return v, err }
		case 1:
			p = c.GroupPath()
			read = func() (any, error) { v, _, err := c.GetGroup(ctx); return v, err }
		case 2:
			p = c.TaskPath("g_1")
			read = func() (any, error) { v, _, err := c.GetTask(ctx, "g_1"); return v, err }
		case 3:
			p = c.HeartbeatPath("g_1")
			read = func() (any, error) { v, _, err := c.GetHeartbeat(ctx, "g_1"); return v, err }
		case 4:
			p = c.MemberPath("g_1")
			read = func() (any, error) { v, _, err := c.GetMember(ctx, "g_1"); return v, err }
		}
		_, err := c.Store.(*Memory).create(p, data, Persistent, true)
		require.NoError(t, err)
		v, err := read()
		if err != nil {
			var ce *CorruptError
			require.True(t, errors.As(err, &ce), "%v (%T) is not a *CorruptError", err, err)
			require.Equal(t, p, ce.Path)
			var fe *roles.FieldError
			require.ErrorAs(t, err, &fe)
			require.NotEmpty(t, fe.Field)
			require.ErrorIs(t, err, roles.ErrInvalid)
			require.Contains(t, err.Error(), p, "the error names the znode")
			if kind%5 == 1 {
				_, uerr := c.UpdateGroup(ctx, func(g *roles.GroupState) error { g.TotalCrawler = 1; return nil })
				require.True(t, errors.As(uerr, &ce), "UpdateGroup on a corrupted group: %v", uerr)
			}
		} else {
			// A value that reads back is written back unchanged.
			_, err := c.Put(ctx, p, v, 0)
			require.NoError(t, err)
			again, err := read()
			require.NoError(t, err, "what was read is written and read back")
			require.Equal(t, v, again)
			return
		}
		got, ver, err := c.Store.Get(ctx, p)
		require.NoError(t, err)
		require.Equal(t, int32(0), ver, "a read or a refused update does not write")
		require.Equal(t, string(data), string(got), "the corrupted znode is left as it was")
	})
}
