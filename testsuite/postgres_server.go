package testsuite

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// This file runs the postmaster: its settings, start, readiness, fast
// shutdown, kill (with every backend) and the end of the test.

// serverArgs are the postgres command-line settings.
func (pg *Postgres) serverArgs() []string {
	set := func(kv ...string) []string {
		var args []string
		for _, s := range kv {
			args = append(args, "-c", s)
		}
		return args
	}
	args := []string{"-D", pg.dataDir}
	if os.Getenv("BATON_PG_STATEMENTS") != "" {
		// Statements' counts, rows, WAL and plans, for a benchmark's report
		// (the extension is created where read); off by default: it
		// costs the server CPU on every statement.
		args = append(args, set("shared_preload_libraries=pg_stat_statements", "pg_stat_statements.track_planning=on")...)
	}
	return append(args, set(
		"listen_addresses="+pg.listenHost(),
		"port="+strconv.Itoa(pg.port),
		// A quoted list entry; "" is a literal quote.
		`unix_socket_directories="`+strings.ReplaceAll(pg.sockDir, `"`, `""`)+`"`,
		"unix_socket_permissions=0700",
		"max_connections=200",
		"shared_buffers=16MB",
		"huge_pages=off",
		// Dynamic shared memory as files in the data dir rather than in
		// /dev/shm (often 64MB in containers), from where a killed server's
		// segments would not be removed with the test's files.
		"dynamic_shared_memory_type=mmap",
		// Durability: what a SIGKILL test relies on.
		"fsync=on",
		"synchronous_commit=on",
		"full_page_writes=on",
		// A new WAL file is not zero-filled first (its last byte is
		// written): a fresh server otherwise writes 16 MB every few
		// seconds of a crawl's commits and stalls every commit under way
		// for 40-55 ms each time on this disk, where a server that has run
		// for a while reuses its old files. WAL's own page headers say
		// where it ends, as in a reused file.
		"wal_init_zero=off",
		"password_encryption=scram-sha-256",
		"logging_collector=off",
		"log_destination=stderr",
	)...)
}

// launch starts the postmaster and waits until it accepts connections. On
// failure the server is killed; conflict reports whether the port was taken.
func (pg *Postgres) launch() (conflict bool, err error) {
	proc, offset, err := pg.start()
	if err != nil {
		return false, err
	}
	err = poll(pgReadyTimeout, pollInterval, func() (bool, error) {
		if proc.Exited() {
			return false, errPermanent{fmt.Errorf("postgres exited during startup: %w", proc.Wait(0))}
		}
		if err := pg.ping(); err != nil {
			return false, err
		}
		return true, nil
	})
	if err == nil {
		return false, nil
	}
	if kerr := pg.kill(); kerr != nil {
		err = errors.Join(err, kerr)
	}
	conflict = strings.Contains(pg.logSince(offset), "Address already in use")
	return conflict, fmt.Errorf("not ready on %s: %w%s", pg.Address(), err, pg.logTail(offset))
}

// start starts a postmaster without waiting for it to serve; offset is the
// size of the log before it started.
func (pg *Postgres) start() (*Process, int64, error) {
	pg.mu.Lock()
	defer pg.mu.Unlock()
	pg.starts++
	pg.staleShmKey = "" // reclaimed by the new postmaster
	var offset int64
	if fi, err := os.Stat(pg.logPath); err == nil {
		offset = fi.Size()
	}
	name := fmt.Sprintf("postgres-%d", pg.starts)
	logFile, err := os.OpenFile(pg.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, 0, fmt.Errorf("start %s: open log file: %w", name, err)
	}
	defer logFile.Close()
	// Like startProcess, but with the credential of the postgres user.
	cmd := exec.Command(filepath.Join(pg.bin, "postgres"), pg.serverArgs()...)
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	cmd.Dir = pg.dir
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = pg.sysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, 0, fmt.Errorf("start %s (%s): %w", name, cmd.Path, err)
	}
	p := &Process{t: pg.t, name: name, cmd: cmd, logPath: pg.logPath, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	pg.proc = p
	return p, offset, nil
}

// ping connects once (DSN after bootstrap, the superuser over the unix
// socket before) and runs a query.
func (pg *Postgres) ping() error {
	pg.mu.Lock()
	bootstrapped := pg.bootstrapped
	pg.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var conn *pgx.Conn
	var err error
	if bootstrapped {
		conn, err = pgx.Connect(ctx, pg.DSN())
	} else {
		conn, err = pg.adminConn(ctx)
	}
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	var one int
	return conn.QueryRow(ctx, "SELECT 1").Scan(&one)
}

// Kill SIGKILLs the postmaster and all its backends and auxiliary processes
// (simulating a crash) and waits until they are gone and the port is free,
// so Restart can follow (it runs crash recovery). Failures are reported with
// t.Errorf.
func (pg *Postgres) Kill() {
	if err := pg.kill(); err != nil {
		pg.t.Errorf("testsuite: postgres: kill: %v", err)
	}
}

// Stop shuts the server down with a fast shutdown (SIGINT: clients are
// disconnected, a shutdown checkpoint is written), SIGKILLing it if that
// takes longer than 30s. Stopping a stopped server is a no-op. Failures
// are reported with t.Errorf.
func (pg *Postgres) Stop() {
	if err := pg.stop(pgStopGrace); err != nil {
		pg.t.Errorf("testsuite: postgres: stop: %v", err)
	}
}

// Restart stops the server if it is running (fast shutdown) and starts it
// again on the same port with the same data directory, waiting until DSN
// accepts connections. It fails the test that started the server if it
// does not come back, so call it from that test's goroutine.
func (pg *Postgres) Restart() {
	pg.t.Helper()
	if err := pg.stop(pgStopGrace); err != nil {
		pg.t.Fatalf("testsuite: postgres: restart: %v", err)
	}
	if _, err := pg.launch(); err != nil {
		pg.t.Fatalf("testsuite: postgres: restart: %v", err)
	}
}

func (pg *Postgres) stop(grace time.Duration) error {
	p := pg.Process()
	if p == nil {
		return nil
	}
	if !p.Exited() {
		if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil && !errors.Is(err, os.ErrProcessDone) {
			return fmt.Errorf("fast shutdown: %w", err)
		}
		if err := p.Wait(grace); errors.Is(err, ErrWaitTimeout) {
			pg.t.Logf("testsuite: postgres: fast shutdown took longer than %v; killing it", grace)
			return pg.kill()
		}
	}
	// The postmaster waits for its children during a shutdown; this only
	// collects stragglers of a server that had died by itself.
	return pg.kill()
}

// kill SIGKILLs the postmaster and every process running in the data
// directory, waits until they are gone and the port is free, and removes
// the lock files they left.
func (pg *Postgres) kill() error {
	p := pg.Process()
	if p == nil {
		return nil
	}
	// Backends call setsid, so they are not in the postmaster's process
	// group; they are found by their working directory, the data dir.
	// Freeze the postmaster first so it forks no new one meanwhile.
	if !p.Exited() {
		_ = syscall.Kill(p.Pid(), syscall.SIGSTOP)
	}
	others := pg.serverProcesses()
	var errs []error
	if err := p.kill(); err != nil {
		errs = append(errs, err)
	}
	for _, pid := range others {
		if pid != p.Pid() {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	err := poll(killWait, pollInterval, func() (bool, error) {
		if left := pg.serverProcesses(); len(left) > 0 {
			for _, pid := range left {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			return false, fmt.Errorf("processes %v still running in %s", left, pg.dataDir)
		}
		l, err := net.Listen("tcp", pg.Address())
		if err != nil {
			return false, fmt.Errorf("port still in use: %w", err)
		}
		return true, l.Close()
	})
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	// Nothing of this server runs any more: its lock files are stale. The
	// postmaster would find that out itself unless their pids were reused.
	// The lock file names the shared memory segment left behind.
	pidFile := filepath.Join(pg.dataDir, "postmaster.pid")
	if b, err := os.ReadFile(pidFile); err == nil {
		if lines := strings.Split(string(b), "\n"); len(lines) > 6 {
			if f := strings.Fields(lines[6]); len(f) > 0 {
				pg.mu.Lock()
				pg.staleShmKey = f[0]
				pg.mu.Unlock()
			}
		}
	}
	for _, f := range []string{
		pidFile,
		filepath.Join(pg.sockDir, fmt.Sprintf(".s.PGSQL.%d.lock", pg.port)),
	} {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// serverProcesses lists the live processes whose working directory is the
// data directory: the postmaster and all its children (zombies have none).
func (pg *Postgres) serverProcesses() []int {
	if pg.realDir == "" {
		return nil
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd")); err == nil && cwd == pg.realDir {
			pids = append(pids, pid)
		}
	}
	return pids
}

// logSince returns the server log from offset on.
func (pg *Postgres) logSince(offset int64) string {
	f, err := os.Open(pg.logPath)
	if err != nil {
		return ""
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return ""
	}
	b, _ := io.ReadAll(f)
	return string(b)
}

// logTail formats the end of the log written since offset for an error.
func (pg *Postgres) logTail(offset int64) string {
	s := pg.logSince(offset)
	if len(s) > pgErrTailBytes {
		s = "...\n" + s[len(s)-pgErrTailBytes:]
	}
	if strings.TrimSpace(s) == "" {
		return ""
	}
	return fmt.Sprintf("\n--- tail of %s ---\n%s", pg.logPath, s)
}

// cleanup shuts the server down (fast, so it removes its shared memory),
// and removes the shared memory segment of a server killed last.
func (pg *Postgres) cleanup() {
	if err := pg.stop(pgCleanupGrace); err != nil {
		pg.t.Errorf("testsuite: postgres: cleanup: %v", err)
	}
	// Baton's store takes its locks in one order: a deadlock PostgreSQL
	// detected (and the store retried, a second lost each) is a defect,
	// whatever the test asserted. (The server log, not the statistics,
	// which a crash recovery resets.)
	if n := strings.Count(pg.logSince(0), "deadlock detected"); n > 0 {
		pg.t.Errorf("testsuite: postgres: the server detected %d deadlocks (see %s)", n, pg.logPath)
	}
	pg.mu.Lock()
	key := pg.staleShmKey
	pg.mu.Unlock()
	if key != "" {
		// Best effort: a leaked segment is only 56 bytes, but they count
		// against the system-wide limit (kernel.shmmni).
		if ipcrm, err := exec.LookPath("ipcrm"); err == nil {
			cmd := exec.Command(ipcrm, "-M", key)
			if out, err := cmd.CombinedOutput(); err != nil {
				pg.t.Logf("testsuite: postgres: remove shared memory key %s: %v: %s", key, err, out)
			}
		}
	}
	if pg.t.Failed() && pg.Process() != nil {
		s := pg.logSince(0)
		if len(s) > logTailBytes {
			s = "...\n" + s[len(s)-logTailBytes:]
		}
		pg.t.Logf("testsuite: postgres %s output, full log at %s:\n%s", pg.Address(), pg.logPath, s)
	}
}
