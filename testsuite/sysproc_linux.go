package testsuite

import "syscall"

// sysProcAttr puts the child in its own process group (so the whole group can
// be signalled) and has the kernel SIGKILL it if the test binary dies (e.g.
// on a go test -timeout panic), so no server outlives the test run.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
