package testsuite

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// PgBouncer is Debian's pgbouncer in transaction pooling mode in front of
// a Postgres: a client's transactions may each run on another server
// connection, so nothing may outlive a transaction (named prepared
// statements, SET, session advisory locks).
type PgBouncer struct {
	pg   *Postgres
	port int
	proc *Process
}

// StartPgBouncer starts pgbouncer on a free loopback port in transaction
// mode, with a pool of poolSize server connections, in front of pg (the
// client user and database), configured as an operator would: it
// accepts no startup parameter but the ones it tracks (and
// extra_float_digits, which many drivers send). It is stopped when the test ends. Without pgbouncer the test fails (skipped
// with BATON_ALLOW_SKIP=1).
func StartPgBouncer(t testing.TB, pg *Postgres, poolSize int) *PgBouncer {
	t.Helper()
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/pgbouncer"); serr == nil {
			bin, err = "/usr/sbin/pgbouncer", nil
		}
	}
	if err != nil {
		if os.Getenv("BATON_ALLOW_SKIP") == "1" {
			t.Skip("pgbouncer is not installed (make deps installs it)")
		}
		t.Fatalf("testsuite: pgbouncer is not installed (make deps, or deployments/scripts/install-postgres.sh, or apt-get install pgbouncer): %v", err)
	}
	dir, err := os.MkdirTemp("", "pgbouncer")
	if err != nil {
		t.Fatalf("testsuite: pgbouncer: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatalf("testsuite: pgbouncer: %v", err)
	}
	b := &PgBouncer{pg: pg, port: FreePort(t)}
	users := filepath.Join(dir, "users.txt")
	ini := filepath.Join(dir, "pgbouncer.ini")
	logPath := filepath.Join(dir, "pgbouncer.log")
	write := func(path, data string) {
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatalf("testsuite: pgbouncer: %v", err)
		}
		if pg.cred != nil {
			_ = os.Chown(path, int(pg.cred.Uid), int(pg.cred.Gid))
		}
	}
	write(users, fmt.Sprintf("%q %q\n", pgUser, pgPassword))
	write(logPath, "")
	write(ini, strings.Join([]string{
		"[databases]",
		fmt.Sprintf("%s = host=127.0.0.1 port=%d dbname=%s", pgDatabase, pg.port, pgDatabase),
		"[pgbouncer]",
		"listen_addr = 127.0.0.1",
		"listen_port = " + strconv.Itoa(b.port),
		"unix_socket_dir =",
		"auth_type = scram-sha-256",
		"auth_file = " + users,
		"pool_mode = transaction",
		"default_pool_size = " + strconv.Itoa(poolSize),
		"max_client_conn = 200",
		"logfile = " + logPath,
		"ignore_startup_parameters = extra_float_digits",
		"",
	}, "\n"))
	cmd := exec.Command(bin, ini)
	cmd.Dir = dir
	cmd.SysProcAttr = pg.sysProcAttr()
	out, err := os.OpenFile(filepath.Join(dir, "stdout.log"), os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatalf("testsuite: pgbouncer: %v", err)
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("testsuite: pgbouncer: start: %v", err)
	}
	b.proc = &Process{t: t, name: "pgbouncer", cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		b.proc.waitErr = cmd.Wait()
		close(b.proc.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-b.proc.done
		if t.Failed() {
			data, _ := os.ReadFile(logPath)
			t.Logf("testsuite: pgbouncer log:\n%s", data)
		}
	})
	err = poll(30*time.Second, pollInterval, func() (bool, error) {
		if b.proc.Exited() {
			data, _ := os.ReadFile(filepath.Join(dir, "stdout.log"))
			return false, errPermanent{fmt.Errorf("pgbouncer exited: %s", data)}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, b.DSN())
		if err != nil {
			return false, err
		}
		defer conn.Close(context.Background())
		var one int
		return true, conn.QueryRow(ctx, "SELECT 1", pgx.QueryExecModeSimpleProtocol).Scan(&one)
	})
	if err != nil {
		t.Fatalf("testsuite: pgbouncer not ready on %s: %v", b.Address(), err)
	}
	return b
}

// Address is pgbouncer's "127.0.0.1:port".
func (b *PgBouncer) Address() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(b.port)) }

// DSN connects to the client database through pgbouncer.
func (b *PgBouncer) DSN() string {
	u, _ := url.Parse(b.pg.DSN())
	u.Host = b.Address()
	return u.String()
}
