package worker

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGoBuildIDIsTheToolchains: the checksum the worker gives Temporal is
// the executable's Go build ID, as `go tool buildid` reads it.
func TestGoBuildIDIsTheToolchains(t *testing.T) {
	exe, err := os.Executable()
	require.NoError(t, err)
	out, err := exec.Command("go", "tool", "buildid", exe).Output()
	if err != nil {
		t.Skipf("go tool buildid: %v", err)
	}
	id, err := goBuildID(exe)
	require.NoError(t, err)
	assert.Equal(t, strings.TrimSpace(string(out)), id)
	_, err = goBuildID("buildid_test.go")
	assert.Error(t, err, "not an executable")
}
