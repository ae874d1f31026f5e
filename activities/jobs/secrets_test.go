package jobs_test

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/jobs"
)

func secretSpec() jobs.Spec {
	o := crawl.DefaultOptions()
	o.Headers = map[string]string{"X-Trace": "trace-secret-1"}
	o.Proxy = "socks5://bob:pw-secret-2@127.0.0.1:1080"
	return jobs.Spec{ID: "j1", Group: "g", Seeds: []string{"http://127.0.0.1:1/"}, Options: o,
		Cookie: map[string]string{"session": "cookie-secret-3"}, Authorization: map[string]string{"Bearer": "token-secret-4"}}
}

func TestSplitSecretsLeavesNoValue(t *testing.T) {
	spec := secretSpec()
	public, sec := jobs.SplitSecrets(spec)
	enc, err := jobs.EncodeSpecForTest(public)
	require.NoError(t, err)
	for _, v := range sec.Values() {
		assert.NotContains(t, string(enc), v, "a secret value in the spec that travels")
	}
	assert.Equal(t, []string{"cookie session", "authorization Bearer", "header X-Trace", "proxy credentials"}, public.Secrets)
	assert.Equal(t, "socks5://127.0.0.1:1080", public.Options.Proxy)
	back := sec.Apply(public)
	assert.Equal(t, spec.Cookie, back.Cookie)
	assert.Equal(t, spec.Authorization, back.Authorization)
	assert.Equal(t, spec.Options.Headers, back.Options.Headers)
	assert.Equal(t, spec.Options.Proxy, back.Options.Proxy)
}

func TestSealer(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "k", jobs.DefaultSecretsKeyFile)
	s, created, err := jobs.EnsureSecretsKey(path)
	require.NoError(t, err)
	assert.True(t, created)
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	again, created, err := jobs.EnsureSecretsKey(path)
	require.NoError(t, err)
	assert.False(t, created)
	assert.Equal(t, s.KeyID(), again.KeyID())

	_, sec := jobs.SplitSecrets(secretSpec())
	sealed, err := s.Seal("j1", sec)
	require.NoError(t, err)
	for _, v := range sec.Values() {
		assert.NotContains(t, string(sealed), v)
	}
	got, err := again.Open("j1", sealed)
	require.NoError(t, err)
	assert.Equal(t, sec, got)
	_, err = again.Open("j2", sealed)
	require.ErrorIs(t, err, jobs.ErrSecretsKey, "sealed for another job")
	other, _, err := jobs.EnsureSecretsKey(filepath.Join(dir, "other.key"))
	require.NoError(t, err)
	assert.NotEqual(t, s.KeyID(), other.KeyID())
	_, err = other.Open("j1", sealed)
	require.ErrorIs(t, err, jobs.ErrSecretsKey)
	assert.NotContains(t, err.Error(), "secret-")

	require.NoError(t, os.Chmod(path, 0o644))
	_, err = jobs.LoadSecretsKey(path)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "chmod 600")
	_, err = jobs.LoadSecretsKey(filepath.Join(dir, "missing"))
	require.ErrorIs(t, err, jobs.ErrNoSecretsKey)
}

// Processes of one host starting at once agree on one key.
func TestEnsureSecretsKeyRace(t *testing.T) {
	path := filepath.Join(t.TempDir(), jobs.DefaultSecretsKeyFile)
	var wg sync.WaitGroup
	ids := make([]string, 16)
	errs := make([]error, 16)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, _, err := jobs.EnsureSecretsKey(path)
			errs[i] = err
			if err == nil {
				ids[i] = s.KeyID()
			}
		}()
	}
	wg.Wait()
	for i := range ids {
		require.NoError(t, errs[i])
		assert.Equal(t, ids[0], ids[i])
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	for _, e := range entries {
		assert.False(t, strings.HasPrefix(e.Name(), ".secrets-key-"), "temporary file left: %s", e.Name())
	}
}
