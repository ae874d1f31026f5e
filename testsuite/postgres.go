package testsuite

import (
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
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
