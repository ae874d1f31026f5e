package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReadSecretFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cookies")
	require.NoError(t, os.WriteFile(path, []byte("# session cookies\nsession=abc=def\n\n theme = dark\n"), 0o600))
	m, err := readSecretFile("cookie-file", path, "=")
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"session": "abc=def", "theme": " dark"}, m)

	require.NoError(t, os.WriteFile(path, []byte("ok=1\nsupersecretvalue\n"), 0o600))
	_, err = readSecretFile("cookie-file", path, "=")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "line 2")
	assert.NotContains(t, err.Error(), "supersecretvalue")

	hp := filepath.Join(t.TempDir(), "headers")
	require.NoError(t, os.WriteFile(hp, []byte("X-Api-Key: k1\nX-Trace:t\n"), 0o600))
	h, err := readSecretFile("header-file", hp, ":")
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"X-Api-Key": "k1", "X-Trace": "t"}, h)
	assert.Equal(t, map[string]string{"a": "flag", "b": "file"}, merge(map[string]string{"a": "flag"}, map[string]string{"a": "file", "b": "file"}))
}
