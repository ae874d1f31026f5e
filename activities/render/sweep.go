package render

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// Swept is what Sweep cleaned up.
type Swept struct {
	Groups int // process groups killed
	Dirs   int // user-data-dirs removed
}

// Sweep removes what killed workers left behind in dir (the Pools'
// TempDir; empty: os.TempDir()): the user-data-dirs named DirPrefix-<pid>-<n>
// of a pid that is no longer running, and every process group of a
// process started with such a dir. A worker calls it at start, before its
// Pool starts a browser; the dirs of running workers are left alone.
func Sweep(dir string) (Swept, error) {
	if dir == "" {
		dir = os.TempDir()
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return Swept{}, err
	}
	var orphans []string
	for _, e := range entries {
		pid, ok := ownerPid(e.Name())
		if !ok || !e.IsDir() || pid == os.Getpid() || alive(pid) {
			continue
		}
		orphans = append(orphans, filepath.Join(dir, e.Name()))
	}
	var s Swept
	if len(orphans) == 0 {
		return s, nil
	}
	for _, pgid := range groupsUsing(orphans) {
		if syscall.Kill(-pgid, syscall.SIGKILL) == nil {
			s.Groups++
		}
	}
	var errs []error
	for _, d := range orphans {
		if err := os.RemoveAll(d); err != nil {
			errs = append(errs, err)
			continue
		}
		s.Dirs++
	}
	return s, errors.Join(errs...)
}

// ownerPid reads the worker pid of a user-data-dir's name.
func ownerPid(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, DirPrefix)
	if !ok {
		return 0, false
	}
	pidText, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	pid, err := strconv.Atoi(pidText)
	return pid, err == nil && pid > 0
}

// alive reports whether process pid runs (a zombie does not).
func alive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	if i := bytes.LastIndexByte(stat, ')'); i > 0 && i+2 < len(stat) {
		return stat[i+2] != 'Z'
	}
	return true
}

// groupsUsing returns the process groups of the processes whose command
// line names one of dirs as its --user-data-dir.
func groupsUsing(dirs []string) []int {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	seen := map[int]bool{}
	var out []int
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		if !UsesDir(pid, dirs...) {
			continue
		}
		pgid, err := syscall.Getpgid(pid)
		if err != nil || pgid <= 1 || seen[pgid] || pgid == syscall.Getpgrp() {
			continue
		}
		seen[pgid] = true
		out = append(out, pgid)
	}
	return out
}

// UsesDir reports whether process pid was started with one of dirs as
// its --user-data-dir.
func UsesDir(pid int, dirs ...string) bool {
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	for _, arg := range bytes.Split(cmdline, []byte{0}) {
		v, ok := bytes.CutPrefix(arg, []byte("--user-data-dir="))
		if !ok {
			continue
		}
		for _, d := range dirs {
			if string(v) == d {
				return true
			}
		}
	}
	return false
}

// Processes counts the running processes started with one of dirs as
// their --user-data-dir.
func Processes(dirs ...string) int {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	n := 0
	for _, p := range procs {
		if pid, err := strconv.Atoi(p.Name()); err == nil && alive(pid) && UsesDir(pid, dirs...) {
			n++
		}
	}
	return n
}

// GroupProcesses counts the running processes of the process groups.
func GroupProcesses(pgids ...int) int {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	n := 0
	for _, p := range procs {
		stat, err := os.ReadFile("/proc/" + p.Name() + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		// After "comm)": state ppid pgrp ...
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 3 || f[0] == "Z" {
			continue
		}
		g, err := strconv.Atoi(f[2])
		if err == nil && slices.Contains(pgids, g) {
			n++
		}
	}
	return n
}
