package testsuite

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// RunMeasured runs cmd to its end and returns how long it took and its
// own peak resident set size in KiB: its VmHWM, sampled every 5 ms until
// it exits (rusage's maxrss would count the memory of the process that
// started it, which the child shares until its exec).
func RunMeasured(cmd *exec.Cmd) (time.Duration, int, error) {
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, 0, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	peak := 0
	for {
		select {
		case err := <-done:
			return time.Since(start), peak, err
		case <-time.After(5 * time.Millisecond):
			peak = max(peak, vmHWM(cmd.Process.Pid))
		}
	}
}

// vmHWM is a process's peak RSS so far, in KiB (0 once it is gone).
func vmHWM(pid int) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return n
		}
	}
	return 0
}
