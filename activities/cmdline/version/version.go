// Package version holds the version of Baton's two binaries, baton and
// baton-worker: the one the build set, or else what the Go toolchain
// recorded in the binary (module version, VCS revision).
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version is set by the build:
//
//	go build -ldflags "-X github.com/batoncrawl/baton/activities/cmdline/version.Version=v1.2.3" ./starter
//
// (the Makefile passes `git describe --tags --always --dirty`). Empty, it
// is read from the binary's build information.
var Version = ""

// String returns the version, the VCS revision when the toolchain
// recorded one, and the Go version, e.g. "v1.2.3 (commit 0a1b2c3d4e5f, go1.23.4)".
func String() string {
	info, ok := debug.ReadBuildInfo()
	return format(Version, info, ok)
}

func format(set string, info *debug.BuildInfo, ok bool) string {
	v, rev, dirty := set, "", false
	if ok {
		if v == "" && info.Main.Version != "" {
			v = info.Main.Version // "(devel)" for a build in the repository
		}
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	if v == "" {
		v = "(devel)"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "-dirty"
	}
	if rev == "" {
		return fmt.Sprintf("%s (%s)", v, runtime.Version())
	}
	return fmt.Sprintf("%s (commit %s, %s)", v, rev, runtime.Version())
}
