package jobs_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/activities/jobs/sqlstore"
)

// A rotation re-wraps every job of the group sealed for the old key —
// a row of the earlier format too — so that the new key opens them and
// the old one no more; other groups' jobs are left.
func TestRotateSecrets(t *testing.T) {
	ctx := testCtx(t)
	st, err := sqlstore.OpenSQLite(ctx, t.TempDir())
	require.NoError(t, err)
	defer st.Close()
	oldKey := newKey(t)
	from, err := jobs.NewSealer(oldKey)
	require.NoError(t, err)
	to, err := jobs.NewSealer(newKey(t))
	require.NoError(t, err)
	sec := jobs.Secrets{Cookie: map[string]string{"session": "rotated-sec"}}
	put := func(id, group string, sealed []byte) {
		spec := jobs.Spec{ID: id, Group: group, Seeds: []string{"http://127.0.0.1:1/"}, Options: crawl.DefaultOptions()}
		_, err := st.CreateJob(ctx, spec, []jobs.Entry{{URL: "http://127.0.0.1:1/"}})
		require.NoError(t, err)
		require.NoError(t, st.PutSecrets(ctx, id, from.KeyID(), sealed))
	}
	envSealed, err := from.Seal("new-format", sec)
	require.NoError(t, err)
	put("new-format", "g", envSealed)
	put("old-format", "g", sealedDirectly(t, oldKey, "old-format", sec))
	otherSealed, err := from.Seal("other-group", sec)
	require.NoError(t, err)
	put("other-group", "h", otherSealed)

	got, err := jobs.RotateSecrets(ctx, st, "g", from, to)
	require.NoError(t, err)
	assert.Equal(t, jobs.Rotated{Rewrapped: 1, Resealed: 1}, got)
	for _, id := range []string{"new-format", "old-format"} {
		keyID, sealed, err := st.Secrets(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, to.KeyID(), keyID)
		opened, err := to.Open(id, sealed)
		require.NoError(t, err)
		assert.Equal(t, sec, opened)
		_, err = from.Open(id, sealed)
		require.ErrorIs(t, err, jobs.ErrSecretsKey)
	}
	keyID, _, err := st.Secrets(ctx, "other-group")
	require.NoError(t, err)
	assert.Equal(t, from.KeyID(), keyID, "another group's job is left")
	again, err := jobs.RotateSecrets(ctx, st, "g", from, to)
	require.NoError(t, err)
	assert.Equal(t, jobs.Rotated{}, again, "run again: nothing left to do")
}
