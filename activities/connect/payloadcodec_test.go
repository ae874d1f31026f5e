package connect

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
)

func TestPayloadCodec(t *testing.T) {
	key := make([]byte, 32)
	rand.Read(key)
	c, err := NewPayloadCodec(key)
	require.NoError(t, err)
	dc := converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), c)
	p, err := dc.ToPayload(map[string]string{"seed": "http://shop.test/secret-path"})
	require.NoError(t, err)
	assert.Equal(t, EncodingEncrypted, string(p.Metadata[converter.MetadataEncoding]))
	assert.False(t, bytes.Contains(p.Data, []byte("secret-path")), "ciphertext only")
	var back map[string]string
	require.NoError(t, dc.FromPayload(p, &back))
	assert.Equal(t, "http://shop.test/secret-path", back["seed"])

	// Tampered, or another key: an error, never garbage.
	p.Data[len(p.Data)-1] ^= 1
	assert.ErrorIs(t, dc.FromPayload(p, &back), ErrPayloadKey)
	other := make([]byte, 32)
	rand.Read(other)
	c2, _ := NewPayloadCodec(other)
	enc, _ := c.Encode([]*commonpb.Payload{{Data: []byte("x")}})
	_, err = c2.Decode(enc)
	assert.ErrorContains(t, err, "encrypted with key "+c.KeyID())

	// A payload from before the key passes through.
	plain, _ := converter.GetDefaultDataConverter().ToPayload("old")
	out, err := c.Decode([]*commonpb.Payload{plain})
	require.NoError(t, err)
	assert.Equal(t, plain, out[0])
}

func TestLoadPayloadKey(t *testing.T) {
	dir := t.TempDir()
	key := make([]byte, 32)
	rand.Read(key)
	good := filepath.Join(dir, "k")
	require.NoError(t, os.WriteFile(good, []byte(hex.EncodeToString(key)+"\n"), 0o600))
	got, err := LoadPayloadKey(good)
	require.NoError(t, err)
	assert.Equal(t, key, got)

	open := filepath.Join(dir, "open")
	require.NoError(t, os.WriteFile(open, []byte(hex.EncodeToString(key)), 0o644))
	_, err = LoadPayloadKey(open)
	assert.ErrorContains(t, err, "readable by others")

	short := filepath.Join(dir, "short")
	require.NoError(t, os.WriteFile(short, []byte("abcd"), 0o600))
	_, err = LoadPayloadKey(short)
	assert.ErrorContains(t, err, "want 32 bytes")
	assert.NotContains(t, err.Error(), "abcd", "the key is never echoed")
}
