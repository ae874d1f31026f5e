package testsuite_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/batoncrawl/baton/testsuite"
)

// This file measures the CPU a benchmark's servers and workers used
// (Linux's /proc), so that a benchmark reports what a crawl cost the
// machine besides how fast it went.

// clockTicks is Linux's USER_HZ, the unit of /proc/<pid>/stat's times.
const clockTicks = 100

// procTimes returns a process's parent pid, its own user+system CPU time
// and that of its children it has waited for; ok is false when the process
// is gone.
func procTimes(pid int) (ppid int, self, children time.Duration, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, 0, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 > len(s) {
		return 0, 0, 0, false
	}
	// After the command name: state (field 3), ppid (4), ..., utime (14),
	// stime (15), cutime (16), cstime (17).
	f := strings.Fields(s[i+2:])
	if len(f) < 15 {
		return 0, 0, 0, false
	}
	n := make([]int64, 5)
	for k, at := range []int{1, 11, 12, 13, 14} {
		if n[k], err = strconv.ParseInt(f[at], 10, 64); err != nil {
			return 0, 0, 0, false
		}
	}
	tick := time.Second / clockTicks
	return int(n[0]), time.Duration(n[1]+n[2]) * tick, time.Duration(n[3]+n[4]) * tick, true
}

// treeCPU is the CPU time of process pid and of its children, those
// running (one level down: PostgreSQL's backends) and those it has reaped.
func treeCPU(pid int) time.Duration {
	_, self, reaped, ok := procTimes(pid)
	if !ok {
		return 0
	}
	total := self + reaped
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, c, _, ok := procTimes(child); ok && ppid == pid {
			total += c
		}
	}
	return total
}

// crawlCPU reads the CPU time used so far by PostgreSQL and by the
// cluster's workers (instances 1..n).
func crawlCPU(pg *testsuite.Postgres, c *testsuite.Cluster, n int) (server, workers time.Duration) {
	server = treeCPU(pg.Process().Pid())
	for i := 1; i <= n; i++ {
		if p := c.Process(i); p != nil {
			workers += treeCPU(p.Pid())
		}
	}
	return server, workers
}
