package jobs_test

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/jobs"
)

func newKey(t *testing.T) []byte {
	k := make([]byte, jobs.SecretsKeyBytes)
	_, err := rand.Read(k)
	require.NoError(t, err)
	return k
}

// sealedDirectly seals as the earlier format did: AES-256-GCM under the
// group's key itself, the job's ID as additional data.
func sealedDirectly(t *testing.T, key []byte, job string, sec jobs.Secrets) []byte {
	plain, err := json.Marshal(sec)
	require.NoError(t, err)
	block, err := aes.NewCipher(key)
	require.NoError(t, err)
	aead, err := cipher.NewGCM(block)
	require.NoError(t, err)
	nonce := make([]byte, aead.NonceSize())
	_, err = rand.Read(nonce)
	require.NoError(t, err)
	return aead.Seal(nonce, nonce, plain, []byte(job))
}

// A submitter holding the group's public key seals and opens nothing,
// not even what it sealed; the workers' private key opens it. Two jobs'
// secrets have data keys of their own.
func TestEnvelopePublicKeySealsOnly(t *testing.T) {
	key := newKey(t)
	workers, err := jobs.NewSealer(key)
	require.NoError(t, err)
	submitter, err := jobs.NewPublicSealer(workers.KeyID(), workers.PublicKey())
	require.NoError(t, err)
	sec := jobs.Secrets{Cookie: map[string]string{"session": "cookie-sec-1"}}
	sealed, err := submitter.Seal("j1", sec)
	require.NoError(t, err)
	assert.NotContains(t, string(sealed), "cookie-sec-1")
	_, err = submitter.Open("j1", sealed)
	require.ErrorIs(t, err, jobs.ErrSecretsKey, "the public key opens nothing")
	got, err := workers.Open("j1", sealed)
	require.NoError(t, err)
	assert.Equal(t, sec, got)
	_, err = workers.Open("j2", sealed)
	require.ErrorIs(t, err, jobs.ErrSecretsKey, "sealed for another job")
	again, err := submitter.Seal("j1", sec)
	require.NoError(t, err)
	assert.NotEqual(t, sealed, again, "a fresh data key and nonce each time")
}

// A store row of the earlier format (sealed directly with the group's
// key) is still opened, and a rotation seals it again in an envelope.
func TestEnvelopeOpensTheEarlierFormat(t *testing.T) {
	key := newKey(t)
	s, err := jobs.NewSealer(key)
	require.NoError(t, err)
	sec := jobs.Secrets{Authorization: map[string]string{"Bearer": "old-row-token"}}
	old := sealedDirectly(t, key, "j1", sec)
	got, err := s.Open("j1", old)
	require.NoError(t, err)
	assert.Equal(t, sec, got)

	next, err := jobs.NewSealer(newKey(t))
	require.NoError(t, err)
	moved, err := s.Rewrap("j1", old, next)
	require.NoError(t, err)
	got, err = next.Open("j1", moved)
	require.NoError(t, err)
	assert.Equal(t, sec, got)
}

// A rotation re-wraps the job's data key for the new key pair and leaves
// the sealed data byte for byte; the old key opens it no more.
func TestEnvelopeRewrapKeepsTheData(t *testing.T) {
	oldS, err := jobs.NewSealer(newKey(t))
	require.NoError(t, err)
	newS, err := jobs.NewSealer(newKey(t))
	require.NoError(t, err)
	sec := jobs.Secrets{Headers: map[string]string{"X-Api-Key": "hdr-sec-2"}}
	sealed, err := oldS.Seal("j1", sec)
	require.NoError(t, err)
	moved, err := oldS.Rewrap("j1", sealed, newS)
	require.NoError(t, err)
	// The data (nonce and ciphertext) is the sealed bytes' tail, kept as
	// it is: the wrapped key before it is of the same size.
	require.Equal(t, len(sealed), len(moved))
	assert.True(t, bytes.HasSuffix(moved, sealed[len(sealed)-64:]), "the sealed data is untouched")
	assert.NotEqual(t, sealed, moved)
	got, err := newS.Open("j1", moved)
	require.NoError(t, err)
	assert.Equal(t, sec, got)
	_, err = oldS.Open("j1", moved)
	require.ErrorIs(t, err, jobs.ErrSecretsKey)
	_, err = newS.Rewrap("j2", moved, oldS)
	require.ErrorIs(t, err, jobs.ErrSecretsKey, "a data key is bound to its job")
}
