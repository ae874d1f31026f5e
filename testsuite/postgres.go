package testsuite

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvPostgresBin names the directory holding PostgreSQL's initdb and
// postgres binaries (default: the newest /usr/lib/postgresql/*/bin, then
// $PATH).
const EnvPostgresBin = "BATON_PG_BIN"

const (
	// pgReadyTimeout bounds how long a start (including crash recovery)
	// may take to accept connections.
	pgReadyTimeout = 60 * time.Second
	// pgInitdbTimeout bounds initdb.
	pgInitdbTimeout = 2 * time.Minute
	// pgStopGrace is how long Stop waits for a fast shutdown before it
	// SIGKILLs the server; pgCleanupGrace is the same at the end of the test.
	pgStopGrace    = 30 * time.Second
	pgCleanupGrace = 10 * time.Second
	// pgStartAttempts is how often a first start is retried with a new port
	// when the chosen port was taken in the meantime.
	pgStartAttempts = 3
	// pgErrTailBytes is how much of the server log goes into start errors.
	pgErrTailBytes = 4 << 10
	// defaultPostgresLib is where Debian's postgresql packages put their
	// versioned installations (<dir>/<version>/bin).
	defaultPostgresLib = "/usr/lib/postgresql"
	// pgSystemUser runs the server when the tests run as root (PostgreSQL
	// refuses to run as root); Debian's package creates it.
	pgSystemUser = "postgres"
	// pgSuperuser is the bootstrap superuser; it can log in only over the
	// unix socket (trust), never over TCP (it has no password).
	pgSuperuser = "postgres"
	// pgUser, pgPassword and pgDatabase are what DSN connects with.
	pgUser     = "baton"
	pgPassword = "baton-test"
	pgDatabase = "baton"
	// unixPathMax is sizeof(sockaddr_un.sun_path) on Linux, including the
	// terminating NUL.
	unixPathMax = 108
)

// Postgres is a PostgreSQL server started by StartPostgres. It listens on
// 127.0.0.1 on a port that stays the same across Restart, keeps its data
// directory for the lifetime of the test, and runs with fsync on, so a
// SIGKILL (Kill) loses no committed transaction.
//
// Clients connect with DSN as the user User with password Password
// (SCRAM-SHA-256 over TCP) to the database "baton", which that user owns.
// The user may create databases but is not a superuser.
type Postgres struct {
	t       testing.TB
	bin     string              // directory holding initdb and postgres
	cred    *syscall.Credential // the postgres system user when running as root, else nil
	dir     string              // t.TempDir(): data dir, socket dir, log
	dataDir string
	realDir string // dataDir with symlinks resolved, as in /proc/PID/cwd
	sockDir string
	logPath string
	host    string // the address it listens on; "" is 127.0.0.1
	port    int

	mu           sync.Mutex
	proc         *Process // current (possibly exited) postmaster
	starts       int
	bootstrapped bool // role and database created: readiness checks use DSN
	// staleShmKey is the SysV shared memory key of a killed postmaster,
	// whose segment the next start reclaims; cleanup removes it otherwise.
	staleShmKey string
}

// StartPostgres initialises a fresh PostgreSQL cluster in a directory of
// t.TempDir(), starts it on a free port of 127.0.0.1 and waits until it
// accepts connections with DSN. The server is killed and its files removed
// when the test ends. If PostgreSQL is not installed the test fails (it is
// skipped when BATON_ALLOW_SKIP=1); under -short the test is skipped.
//
// When the test runs as root, initdb and postgres run as the "postgres"
// system user, which then owns the server's directory.
func StartPostgres(t testing.TB) *Postgres {
	t.Helper()
	return StartPostgresOn(t, "")
}

// StartPostgresOn is StartPostgres listening on host, an IP address of
// this machine (e.g. the bridge of Hosts), with password logins allowed
// from the networks it is on; "" is 127.0.0.1.
func StartPostgresOn(t testing.TB, host string) *Postgres {
	t.Helper()
	skipIfShort(t, "PostgreSQL")
	bin, err := postgresBin()
	if err != nil {
		missingDependency(t, "PostgreSQL", err)
	}
	cred, err := postgresCredential()
	if err != nil {
		missingDependency(t, "PostgreSQL", err)
	}
	pg := &Postgres{t: t, bin: bin, cred: cred, dir: t.TempDir(), host: host}
	pg.dataDir = filepath.Join(pg.dir, "data")
	pg.logPath = filepath.Join(pg.dir, "postgres.log") // appended across restarts
	t.Cleanup(pg.cleanup)
	if err := pg.prepare(); err != nil {
		t.Fatalf("testsuite: postgres: %v", err)
	}

	var lastErr error
	for attempt := 1; attempt <= pgStartAttempts; attempt++ {
		if pg.port, err = freePort(); err != nil {
			t.Fatalf("testsuite: postgres: %v", err)
		}
		var conflict bool
		conflict, lastErr = pg.launch()
		if lastErr == nil {
			break
		}
		if !conflict {
			break
		}
		t.Logf("testsuite: postgres: port %d taken, retrying with another port", pg.port)
	}
	if lastErr != nil {
		t.Fatalf("testsuite: postgres: %v", lastErr)
	}
	if err := pg.bootstrap(); err != nil {
		t.Fatalf("testsuite: postgres: %v%s", err, pg.logTail(0))
	}
	return pg
}

// postgresBin returns the directory holding initdb and postgres: $BATON_PG_BIN,
// else the newest Debian installation, else the directory of postgres on
// $PATH.
func postgresBin() (string, error) {
	hasBinaries := func(dir string) error {
		for _, name := range []string{"initdb", "postgres"} {
			if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
				return err
			}
		}
		return nil
	}
	if dir := os.Getenv(EnvPostgresBin); dir != "" {
		if err := hasBinaries(dir); err != nil {
			return "", fmt.Errorf("PostgreSQL binaries not found in %s=%s: %w", EnvPostgresBin, dir, err)
		}
		return dir, nil
	}
	postmasters, _ := filepath.Glob(filepath.Join(defaultPostgresLib, "*", "bin", "postgres"))
	var dirs []string
	for _, p := range postmasters {
		if dir := filepath.Dir(p); hasBinaries(dir) == nil {
			dirs = append(dirs, dir)
		}
	}
	if len(dirs) > 0 {
		// .../<version>/bin: the highest version wins ("16" > "9.6").
		version := func(dir string) []int {
			var v []int
			for _, f := range strings.Split(filepath.Base(filepath.Dir(dir)), ".") {
				n, _ := strconv.Atoi(f)
				v = append(v, n)
			}
			return v
		}
		slices.SortFunc(dirs, func(a, b string) int { return slices.Compare(version(a), version(b)) })
		return dirs[len(dirs)-1], nil
	}
	if p, err := exec.LookPath("postgres"); err == nil {
		if dir := filepath.Dir(p); hasBinaries(dir) == nil {
			return dir, nil
		}
	}
	return "", fmt.Errorf("PostgreSQL not found: no %s/*/bin/postgres and no initdb and postgres on $PATH (set %s)",
		defaultPostgresLib, EnvPostgresBin)
}

// postgresCredential returns nil when not running as root, else the
// credential of the postgres system user, as PostgreSQL refuses to run as
// root.
func postgresCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup(pgSystemUser)
	if err != nil {
		return nil, fmt.Errorf("running as root, and PostgreSQL does not run as root; its system user %q: %w",
			pgSystemUser, err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("user %s: uid %q: %w", pgSystemUser, u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("user %s: gid %q: %w", pgSystemUser, u.Gid, err)
	}
	// No supplementary groups: root's must not leak into the server.
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, nil
}

// prepare creates the socket directory, hands the server's directory to
// the postgres user when running as root, and runs initdb.
func (pg *Postgres) prepare() error {
	pg.sockDir = filepath.Join(pg.dir, "s")
	if len(filepath.Join(pg.sockDir, ".s.PGSQL.65535")) >= unixPathMax {
		// A deep $TMPDIR or long test name: the socket path would not fit
		// in sockaddr_un, so put the socket in a short directory instead.
		dir, err := shortTempDir()
		if err != nil {
			return err
		}
		pg.t.Cleanup(func() { _ = os.RemoveAll(dir) })
		pg.sockDir = dir
	} else if err := os.Mkdir(pg.sockDir, 0o700); err != nil {
		return fmt.Errorf("create socket dir: %w", err)
	}
	if pg.cred != nil {
		if err := pg.handToServerUser(); err != nil {
			return err
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), pgInitdbTimeout)
	defer cancel()
	logFile, err := os.OpenFile(pg.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open log file: %w", err)
	}
	defer logFile.Close()
	// --no-sync only skips initdb's final fsync of the fresh cluster: a
	// killed server loses nothing that reached the page cache, and the
	// server itself runs with fsync on.
	cmd := exec.CommandContext(ctx, filepath.Join(pg.bin, "initdb"),
		"-D", pg.dataDir, "-U", pgSuperuser, "-E", "UTF8", "--locale=C",
		"--auth-local=trust", "--auth-host=scram-sha-256", "--no-sync")
	cmd.Dir = pg.dir
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = pg.sysProcAttr()
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("initdb %s: %w%s", pg.dataDir, err, pg.logTail(0))
	}
	if pg.host != "" {
		// initdb allows TCP logins from loopback only.
		if err := appendFile(filepath.Join(pg.dataDir, "pg_hba.conf"), "host all all samenet scram-sha-256\n"); err != nil {
			return err
		}
	}
	realDir, err := filepath.EvalSymlinks(pg.dataDir)
	if err != nil {
		return fmt.Errorf("resolve data dir: %w", err)
	}
	pg.realDir = realDir
	return nil
}

// shortTempDir creates a directory whose path leaves room for a socket
// name, in $TMPDIR or else /tmp.
func shortTempDir() (string, error) {
	for _, parent := range []string{os.TempDir(), "/tmp"} {
		if len(filepath.Join(parent, "baton-pg-0123456789", ".s.PGSQL.65535")) >= unixPathMax {
			continue
		}
		dir, err := os.MkdirTemp(parent, "baton-pg-")
		if err != nil {
			return "", fmt.Errorf("create socket dir: %w", err)
		}
		return dir, nil
	}
	return "", errors.New("no directory short enough for a unix socket path")
}

// handToServerUser makes the server's directories owned by the postgres
// system user and checks that it can reach them.
func (pg *Postgres) handToServerUser() error {
	for _, d := range []string{pg.dir, pg.sockDir} {
		if err := os.Chown(d, int(pg.cred.Uid), int(pg.cred.Gid)); err != nil {
			return fmt.Errorf("chown %s to %s: %w", d, pgSystemUser, err)
		}
	}
	// t.TempDir() is a directory in a per-test directory that os.MkdirTemp
	// created with mode 0700: let others traverse (not list) that one.
	parent := filepath.Dir(pg.dir)
	fi, err := os.Stat(parent)
	if err != nil {
		return err
	}
	if perm := fi.Mode().Perm(); perm&0o001 == 0 {
		if err := os.Chmod(parent, perm|0o011); err != nil {
			return fmt.Errorf("make %s searchable for %s: %w", parent, pgSystemUser, err)
		}
	}
	for _, start := range []string{pg.dir, pg.sockDir} {
		for d := filepath.Dir(start); ; d = filepath.Dir(d) {
			if err := pg.searchable(d); err != nil {
				return fmt.Errorf("the %s user cannot reach %s: %w; set TMPDIR (or GOTMPDIR) "+
					"to a directory it can reach", pgSystemUser, start, err)
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	return nil
}

// searchable checks (from the mode bits) that the postgres user may
// traverse dir.
func (pg *Postgres) searchable(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	perm := fi.Mode().Perm()
	switch {
	case st.Uid == pg.cred.Uid:
		perm &= 0o100
	case st.Gid == pg.cred.Gid:
		perm &= 0o010
	default:
		perm &= 0o001
	}
	if perm == 0 {
		return fmt.Errorf("%s (mode %v, owner %d:%d) is not searchable by it", dir, fi.Mode().Perm(), st.Uid, st.Gid)
	}
	return nil
}

// sysProcAttr is the harness's process attributes (own process group,
// parent-death signal), running as the postgres user when we are root.
func (pg *Postgres) sysProcAttr() *syscall.SysProcAttr {
	attr := sysProcAttr()
	attr.Credential = pg.cred
	return attr
}

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

// adminConn connects as the superuser over the unix socket.
func (pg *Postgres) adminConn(ctx context.Context) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig("sslmode=disable")
	if err != nil {
		return nil, err
	}
	// Override whatever PG* environment variables ParseConfig picked up.
	cfg.Host = pg.sockDir
	cfg.Port = uint16(pg.port)
	cfg.User = pgSuperuser
	cfg.Password = ""
	cfg.Database = "postgres"
	cfg.TLSConfig = nil
	cfg.Fallbacks = nil
	return pgx.ConnectConfig(ctx, cfg)
}

// bootstrap creates the client role and its database, then checks that
// DSN works (password authentication over TCP).
func (pg *Postgres) bootstrap() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pg.adminConn(ctx)
	if err != nil {
		return fmt.Errorf("bootstrap: connect as %s: %w", pgSuperuser, err)
	}
	defer conn.Close(context.Background())
	for _, stmt := range []string{
		fmt.Sprintf("CREATE ROLE %s LOGIN CREATEDB PASSWORD '%s'", pgx.Identifier{pgUser}.Sanitize(), pgPassword),
		fmt.Sprintf("CREATE DATABASE %s OWNER %s", pgx.Identifier{pgDatabase}.Sanitize(), pgx.Identifier{pgUser}.Sanitize()),
	} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("bootstrap: %s: %w", stmt, err)
		}
	}
	pg.mu.Lock()
	pg.bootstrapped = true
	pg.mu.Unlock()
	if err := pg.ping(); err != nil {
		return fmt.Errorf("bootstrap: connect with %s: %w", pg.DSN(), err)
	}
	return nil
}

// DSN returns the URL clients connect with:
// postgres://baton:baton-test@127.0.0.1:PORT/baton?sslmode=disable.
func (pg *Postgres) DSN() string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.UserPassword(pgUser, pgPassword),
		Host:     pg.Address(),
		Path:     "/" + pgDatabase,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// Address returns the TCP address, "127.0.0.1:port" (or the host given
// to StartPostgresOn).
func (pg *Postgres) Address() string {
	return net.JoinHostPort(pg.listenHost(), strconv.Itoa(pg.port))
}

func (pg *Postgres) listenHost() string {
	if pg.host == "" {
		return "127.0.0.1"
	}
	return pg.host
}

// Port returns the TCP port.
func (pg *Postgres) Port() int { return pg.port }

// User returns the role DSN connects as.
func (pg *Postgres) User() string { return pgUser }

// Password returns the password of User.
func (pg *Postgres) Password() string { return pgPassword }

// Database returns the database DSN connects to.
func (pg *Postgres) Database() string { return pgDatabase }

// DataDir returns the server's data directory (kept across restarts).
func (pg *Postgres) DataDir() string { return pg.dataDir }

// LogPath returns the server's log file (appended across restarts).
func (pg *Postgres) LogPath() string { return pg.logPath }

// Process returns the current postmaster process. A new Process is created
// by each Restart.
func (pg *Postgres) Process() *Process {
	pg.mu.Lock()
	defer pg.mu.Unlock()
	return pg.proc
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

// Deadlocks waits until no session of the client user is left (so every
// backend has flushed its statistics: close the stores first), then
// returns pg_stat_database.deadlocks of the client database: how many
// deadlocks PostgreSQL detected there since the server was initialised,
// however the clients retried them.
func (pg *Postgres) Deadlocks(t testing.TB) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pg.adminConn(ctx)
	if err != nil {
		t.Fatalf("testsuite: postgres: deadlocks: connect: %v", err)
	}
	defer conn.Close(context.Background())
	for {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE usename = $1`, pgUser).Scan(&n); err != nil {
			t.Fatalf("testsuite: postgres: deadlocks: sessions: %v", err)
		}
		if n == 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("testsuite: postgres: deadlocks: %d sessions of %s still open after 30 s (close every store first)", n, pgUser)
		case <-time.After(20 * time.Millisecond):
		}
	}
	var d int64
	if err := conn.QueryRow(ctx, `SELECT deadlocks FROM pg_stat_database WHERE datname = $1`, pgDatabase).Scan(&d); err != nil {
		t.Fatalf("testsuite: postgres: deadlocks: %v", err)
	}
	return d
}

// LogOffset is the server log's current size: pass it to LogSince.
func (pg *Postgres) LogOffset() int64 {
	fi, err := os.Stat(pg.logPath)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// LogSince returns what the server logged from offset (LogOffset) on.
func (pg *Postgres) LogSince(offset int64) string { return pg.logSince(offset) }

// Admin runs statements as the superuser in the client database (e.g. to
// make a read-only role for a test).
func (pg *Postgres) Admin(t testing.TB, stmts ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pg.adminConn(ctx)
	if err != nil {
		t.Fatalf("testsuite: postgres: admin: connect: %v", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "SELECT 1"); err != nil {
		t.Fatalf("testsuite: postgres: admin: %v", err)
	}
	cfg := conn.Config().Copy()
	cfg.Database = pgDatabase
	db, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("testsuite: postgres: admin: connect to %s: %v", pgDatabase, err)
	}
	defer db.Close(context.Background())
	for _, s := range stmts {
		if _, err := db.Exec(ctx, s); err != nil {
			t.Fatalf("testsuite: postgres: admin: %s: %v", s, err)
		}
	}
}

// DSNFor returns DSN with another user and password, or another address
// (empty: unchanged).
func (pg *Postgres) DSNFor(user, password, addr string) string {
	u, _ := url.Parse(pg.DSN())
	if user != "" {
		u.User = url.UserPassword(user, password)
	}
	if addr != "" {
		u.Host = addr
	}
	return u.String()
}

// Sessions counts the open sessions of a user.
func (pg *Postgres) Sessions(t testing.TB, user string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pg.adminConn(ctx)
	if err != nil {
		t.Fatalf("testsuite: postgres: sessions: %v", err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE usename = $1`, user).Scan(&n); err != nil {
		t.Fatalf("testsuite: postgres: sessions: %v", err)
	}
	return n
}
