package testsuite

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// ErrWaitTimeout is returned (wrapped) by Process.Wait when the process is
// still running at the deadline.
var ErrWaitTimeout = errors.New("process still running")

// killWait bounds how long Kill and the cleanup wait for a SIGKILLed process
// to be reaped.
const killWait = 15 * time.Second

// logTailBytes is how much of a process log is printed when a test fails.
const logTailBytes = 16 << 10

// ProcessSpec describes a child process for StartProcess.
type ProcessSpec struct {
	// Name labels the process in messages and names its log file; it
	// defaults to the base name of Path.
	Name string
	// Path is the executable (a path, or a name looked up in $PATH).
	Path string
	// Args are the command-line arguments, without the program name.
	Args []string
	// Env is appended to the test process's environment (later entries
	// win), in "KEY=value" form.
	Env []string
	// Dir is the working directory; empty means the test's working dir.
	Dir string
	// LogPath is the file receiving stdout and stderr (appended to). It
	// defaults to a fresh file in t.TempDir().
	LogPath string
	// Netns is the network namespace to run in (`ip netns exec Netns`,
	// which execs Path in place: the pid is the same); "" is the test's.
	// See Hosts.
	Netns string
}

// Process is a real child process started by StartProcess. It runs in its
// own process group, its stdout and stderr go to a log file, and it is
// SIGKILLed (with its whole group) when the test ends. Its methods are safe
// for concurrent use.
type Process struct {
	t       testing.TB
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{} // closed once the process has been reaped
	waitErr error         // cmd.Wait result; read only after done is closed
	killed  atomic.Bool   // set once Kill or the cleanup sent SIGKILL
}

var processSeq atomic.Int64

// StartProcess starts the process described by spec and registers a cleanup
// that kills its process group and, if the test failed, logs the tail of its
// output. It fails the test if the process cannot be started.
func StartProcess(t testing.TB, spec ProcessSpec) *Process {
	t.Helper()
	p, err := startProcess(t, spec)
	if err != nil {
		t.Fatalf("testsuite: %v", err)
	}
	t.Cleanup(p.cleanup)
	return p
}

// startProcess starts spec without registering a cleanup; callers own the
// process's lifetime.
func startProcess(t testing.TB, spec ProcessSpec) (*Process, error) {
	name := spec.Name
	if name == "" {
		name = filepath.Base(spec.Path)
	}
	logPath := spec.LogPath
	if logPath == "" {
		logPath = filepath.Join(t.TempDir(), fmt.Sprintf("%s-%d.log", sanitize(name), processSeq.Add(1)))
	}
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("start %s: open log file: %w", name, err)
	}
	// The child gets its own copy of the descriptor; the parent's copy is
	// not needed after Start.
	defer logFile.Close()

	cmd := exec.Command(spec.Path, spec.Args...)
	if spec.Netns != "" {
		cmd = exec.Command("ip", append([]string{"netns", "exec", spec.Netns, spec.Path}, spec.Args...)...)
	}
	cmd.Env = append(os.Environ(), spec.Env...)
	cmd.Dir = spec.Dir
	cmd.Stdout = logFile // an *os.File is handed to the child directly:
	cmd.Stderr = logFile // no copying goroutines, so Wait never blocks on them
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s (%s): %w", name, spec.Path, err)
	}
	p := &Process{t: t, name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == os.PathSeparator || r == ' ' {
			return '_'
		}
		return r
	}, s)
}

// Name returns the label of the process.
func (p *Process) Name() string { return p.name }

// Pid returns the process id (which is also its process-group id).
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// LogPath returns the file receiving the process's stdout and stderr.
func (p *Process) LogPath() string { return p.logPath }

// Logs returns everything the process has written to stdout and stderr so
// far. If the log cannot be read, the read error is returned as the text.
func (p *Process) Logs() string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return fmt.Sprintf("<cannot read log %s: %v>", p.logPath, err)
	}
	return string(b)
}

// LogTail returns at most the last n bytes of the process's output.
func (p *Process) LogTail(n int) string {
	logs := p.Logs()
	if len(logs) > n {
		return "...\n" + logs[len(logs)-n:]
	}
	return logs
}

// WaitForLog polls the process output until it contains substr, failing the
// test after timeout.
func (p *Process) WaitForLog(t testing.TB, timeout time.Duration, substr string) {
	t.Helper()
	Eventually(t, timeout, fmt.Sprintf("%s to log %q", p.name, substr), func() (bool, error) {
		if strings.Contains(p.Logs(), substr) {
			return true, nil
		}
		if p.Exited() {
			return false, errPermanent{fmt.Errorf("%s exited (%v) without logging %q", p.name, p.waitErr, substr)}
		}
		return false, nil
	})
}

// Done returns a channel that is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited (and been reaped).
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// ExitCode returns the exit code, -1 if the process was killed by a signal,
// or -2 if it is still running.
func (p *Process) ExitCode() int {
	if !p.Exited() {
		return -2
	}
	return p.cmd.ProcessState.ExitCode()
}

// Signal sends sig to the process itself (not to its group), e.g.
// syscall.SIGTERM to request a graceful shutdown.
func (p *Process) Signal(sig os.Signal) error {
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("signal %v to %s (pid %d): %w", sig, p.name, p.Pid(), err)
	}
	return nil
}

// signalGroup sends sig to the process group; a group that is already gone
// is not an error.
func (p *Process) signalGroup(sig syscall.Signal) error {
	if err := syscall.Kill(-p.Pid(), sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal %v to process group of %s (pgid %d): %w", sig, p.name, p.Pid(), err)
	}
	return nil
}

// Wait waits up to timeout for the process to exit and returns its exit
// error: nil for exit status 0, an *exec.ExitError otherwise. If the process
// is still running at the deadline it returns an error wrapping
// ErrWaitTimeout. Wait may be called any number of times.
func (p *Process) Wait(timeout time.Duration) error {
	if !p.Exited() {
		timer := time.NewTimer(timeout)
		defer timer.Stop()
		select {
		case <-p.done:
		case <-timer.C:
			return fmt.Errorf("%s (pid %d) after %v: %w", p.name, p.Pid(), timeout, ErrWaitTimeout)
		}
	}
	if p.waitErr != nil {
		return fmt.Errorf("%s (pid %d): %w", p.name, p.Pid(), p.waitErr)
	}
	return nil
}

// Kill sends SIGKILL to the process and everything in its process group
// (simulating a crash) and waits for it to be reaped. Failures are reported
// with t.Errorf. Killing an exited process is a no-op.
func (p *Process) Kill() {
	if err := p.kill(); err != nil {
		p.t.Errorf("testsuite: %v", err)
	}
}

func (p *Process) kill() error {
	p.killed.Store(true)
	if err := p.signalGroup(syscall.SIGKILL); err != nil {
		return err
	}
	if err := p.Wait(killWait); errors.Is(err, ErrWaitTimeout) {
		return fmt.Errorf("kill: %w", err)
	}
	return nil
}

// stop asks the process group to terminate with SIGTERM and escalates to
// SIGKILL after grace.
func (p *Process) stop(grace time.Duration) error {
	if p.Exited() {
		// Reap stragglers left in the group, if any.
		return p.signalGroup(syscall.SIGKILL)
	}
	if err := p.signalGroup(syscall.SIGTERM); err != nil {
		return err
	}
	if err := p.Wait(grace); errors.Is(err, ErrWaitTimeout) {
		return p.kill()
	}
	return p.signalGroup(syscall.SIGKILL)
}

// cleanup kills the process group and, if the test failed, logs where the
// output is and its tail.
func (p *Process) cleanup() {
	if err := p.kill(); err != nil {
		p.t.Errorf("testsuite: cleanup: %v", err)
	}
	// Binaries built with the race detector (GOFLAGS=-race go test ...)
	// report data races on their output and run on: fail the test.
	if strings.Contains(p.Logs(), "WARNING: DATA RACE") {
		p.t.Errorf("testsuite: %s (pid %d) reported a data race; full log at %s", p.name, p.Pid(), p.logPath)
	}
	if p.t.Failed() {
		p.t.Logf("testsuite: %s (pid %d) output, full log at %s:\n%s",
			p.name, p.Pid(), p.logPath, p.LogTail(logTailBytes))
	}
}
