package testsuite

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// This file sets a test's PostgreSQL cluster up: the binaries, the system
// user it runs as under root, its directories, initdb.

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
