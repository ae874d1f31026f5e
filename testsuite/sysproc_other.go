//go:build unix && !linux

package testsuite

import "syscall"

// sysProcAttr puts the child in its own process group so the whole group can
// be signalled.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
