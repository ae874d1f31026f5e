package metadata

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMemoryExpireSession(t *testing.T) {
	m := NewMemory()
	ctx := context.Background()
	_, err := m.Create(ctx, "/n/a_1/state", []byte("persistent"), Persistent)
	require.NoError(t, err)
	_, err = m.Create(ctx, "/n/a_1/alive", []byte("a_1"), Ephemeral)
	require.NoError(t, err)
	seq, err := m.Create(ctx, "/n/lock/lock-", nil, EphemeralSequential)
	require.NoError(t, err)

	_, _, wPersistent, err := m.GetW(ctx, "/n/a_1/state")
	require.NoError(t, err)
	_, _, wEphemeral, err := m.GetW(ctx, "/n/a_1/alive")
	require.NoError(t, err)
	_, _, wMissing, err := m.GetW(ctx, "/n/a_1/missing")
	require.ErrorIs(t, err, ErrNotFound)
	before := m.Session()

	m.ExpireSession()

	assert.Equal(t, before+1, m.Session(), "the session number changes")
	assert.True(t, fired(wPersistent), "every watch fires on a session loss")
	assert.True(t, fired(wEphemeral))
	assert.True(t, fired(wMissing))
	_, _, err = m.Get(ctx, "/n/a_1/alive")
	require.ErrorIs(t, err, ErrNotFound, "ephemeral znodes are gone")
	_, _, err = m.Get(ctx, seq)
	require.ErrorIs(t, err, ErrNotFound, "sequential ephemeral znodes are gone")
	data, v, err := m.Get(ctx, "/n/a_1/state")
	require.NoError(t, err)
	assert.Equal(t, "persistent", string(data), "persistent znodes stay")
	assert.Equal(t, int32(0), v)
	kids, err := m.Children(ctx, "/n/a_1")
	require.NoError(t, err)
	assert.Equal(t, []string{"state"}, kids)

	// The store works on in the new session, and ephemerals can be made again.
	_, err = m.Create(ctx, "/n/a_1/alive", []byte("again"), Ephemeral)
	require.NoError(t, err)
	_, _, w, err := m.GetW(ctx, "/n/a_1/state")
	require.NoError(t, err)
	assert.False(t, fired(w), "a new watch is not fired by the old expiry")
	m.ExpireSession()
	assert.Equal(t, before+2, m.Session())
	assert.True(t, fired(w))
}

func TestMemoryWatchPlaceholderIsInvisible(t *testing.T) {
	m := NewMemory()
	ctx := context.Background()
	_, err := m.Create(ctx, "/p", nil, Persistent)
	require.NoError(t, err)
	_, _, ch, err := m.GetW(ctx, "/p/later")
	require.ErrorIs(t, err, ErrNotFound)
	kids, err := m.Children(ctx, "/p")
	require.NoError(t, err)
	assert.Empty(t, kids)
	require.NoError(t, m.Delete(ctx, "/p", AnyVersion), "a placeholder is not a child")
	_, err = m.Create(ctx, "/p/later", nil, Persistent)
	require.NoError(t, err, "parents are created again")
	assert.True(t, fired(ch))
}
