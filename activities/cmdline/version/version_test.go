package version

import (
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestFormat(t *testing.T) {
	info := &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0a1b2c3d4e5f60718293a4b5c6d7e8f901234567"}, {Key: "vcs.modified", Value: "true"}}}
	gov := runtime.Version()
	assert.Equal(t, "v1.2.3 (commit 0a1b2c3d4e5f-dirty, "+gov+")", format("v1.2.3", info, true), "the build's version wins")
	assert.Equal(t, "(devel) (commit 0a1b2c3d4e5f-dirty, "+gov+")", format("", info, true))
	assert.Equal(t, "v0.4.0 ("+gov+")", format("", &debug.BuildInfo{Main: debug.Module{Version: "v0.4.0"}}, true), "go install module@v0.4.0")
	assert.Equal(t, "(devel) ("+gov+")", format("", nil, false))
}
