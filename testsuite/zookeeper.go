package testsuite

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	// zkReadyTimeout bounds how long a ZooKeeper start may take to answer
	// ruok with imok.
	zkReadyTimeout = 30 * time.Second
	// zkStopGrace is how long Stop waits after SIGTERM before SIGKILL.
	zkStopGrace = 15 * time.Second
	// zkStartAttempts is how often a first start is retried with a new port
	// when the chosen port was taken in the meantime.
	zkStartAttempts = 3
	// defaultZooKeeperHome is where Debian's zookeeper package lives.
	defaultZooKeeperHome = "/usr/share/zookeeper"
	// zkMainClass is the server entry point (standalone when no quorum is
	// configured).
	zkMainClass = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
)

// ZooKeeper is a standalone ZooKeeper server started by StartZooKeeper, or
// one member of an Ensemble. It listens on 127.0.0.1 on a port that stays the
// same across Restart, and keeps its data directory for the lifetime of the
// test.
//
// The server accepts session timeouts between 1s and 60s (tickTime 500ms),
// so tests can use short sessions to make ephemeral znodes of killed
// processes disappear quickly. The 4lw commands ruok, stat, srvr, mntr,
// wchs and cons are enabled.
type ZooKeeper struct {
	t         testing.TB
	label     string // names the server in messages and process names
	host      string // the address it listens on; "" is 127.0.0.1
	port      int
	dir       string
	confPath  string
	java      string
	classpath string
	// quorum holds the ensemble settings of a member of an Ensemble
	// (server.N lines, limits); empty for a standalone server.
	quorum []string
	// extra are more zoo.cfg lines (StartZooKeeperWith).
	extra []string
	// ready checks that the server at addr serves clients.
	ready func(addr string) error

	mu     sync.Mutex
	proc   *Process // current (possibly exited) server process
	starts int
}

// StartZooKeeper starts a ZooKeeper server for the test and waits until it
// answers ruok with imok. The server is stopped when the test ends. If
// ZooKeeper or Java is not installed the test fails (it is skipped when
// BATON_ALLOW_SKIP=1); under -short the test is skipped.
func StartZooKeeper(t testing.TB) *ZooKeeper {
	t.Helper()
	return StartZooKeeperOn(t, "")
}

// StartZooKeeperOn is StartZooKeeper listening on host, an IP address of
// this machine (e.g. the bridge of Hosts); "" is 127.0.0.1.
func StartZooKeeperOn(t testing.TB, host string) *ZooKeeper {
	t.Helper()
	return startZooKeeper(t, host, nil)
}

// StartZooKeeperWith is StartZooKeeper with more zoo.cfg lines, e.g.
// ZooKeeperEnforceAuth.
func StartZooKeeperWith(t testing.TB, extraConfig ...string) *ZooKeeper {
	t.Helper()
	return startZooKeeper(t, "", extraConfig)
}

// ZooKeeperEnforceAuth are the zoo.cfg lines of a server that refuses
// every request of a session not authenticated with digest credentials
// (ZooKeeper 3.7+), as the local stack's and the Compose ensemble run.
var ZooKeeperEnforceAuth = []string{
	"authProvider.1=org.apache.zookeeper.server.auth.DigestAuthenticationProvider",
	"enforce.auth.enabled=true",
	"enforce.auth.schemes=digest",
}

func startZooKeeper(t testing.TB, host string, extra []string) *ZooKeeper {
	t.Helper()
	skipIfShort(t, "ZooKeeper")
	java, classpath, err := zooKeeperInstall()
	if err != nil {
		missingDependency(t, "ZooKeeper", err)
	}
	zk, err := newZooKeeperServer(t, "zookeeper", t.TempDir(), java, classpath)
	if err != nil {
		t.Fatalf("testsuite: zookeeper: %v", err)
	}
	zk.ready = zkServing
	zk.host = host
	zk.extra = extra
	t.Cleanup(zk.cleanup)

	var lastErr error
	for attempt := 1; attempt <= zkStartAttempts; attempt++ {
		if zk.port, err = freePort(); err != nil {
			t.Fatalf("testsuite: zookeeper: %v", err)
		}
		if err := zk.writeConfig(); err != nil {
			t.Fatalf("testsuite: zookeeper: %v", err)
		}
		lastErr = zk.launch()
		if lastErr == nil {
			return zk
		}
		if !zk.portConflict() {
			break
		}
		t.Logf("testsuite: zookeeper: port %d taken, retrying with another port: %v", zk.port, lastErr)
	}
	t.Fatalf("testsuite: zookeeper: %v (server output is logged below)", lastErr)
	return nil
}

// newZooKeeperServer prepares (without starting) a server whose config,
// data and log live under dir. The caller sets port, quorum and ready, and
// registers zk.cleanup.
func newZooKeeperServer(t testing.TB, label, dir, java, classpath string) (*ZooKeeper, error) {
	zk := &ZooKeeper{t: t, label: label, dir: dir, java: java}
	confDir := filepath.Join(zk.dir, "conf")
	for _, d := range []string{confDir, zk.DataDir()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("create %s: %w", d, err)
		}
	}
	// The conf dir goes first on the classpath so a logging config placed
	// there would be picked up.
	zk.classpath = confDir + string(os.PathListSeparator) + classpath
	zk.confPath = filepath.Join(confDir, "zoo.cfg")
	return zk, nil
}

// zooKeeperInstall locates java and the ZooKeeper server classpath (without
// the config dir).
func zooKeeperInstall() (java, classpath string, err error) {
	java, err = findJava()
	if err != nil {
		return "", "", err
	}
	if cp := os.Getenv(EnvZooKeeperClasspath); cp != "" {
		return java, cp, nil
	}
	home := os.Getenv(EnvZooKeeperHome)
	if home == "" {
		home = defaultZooKeeperHome
	}
	// Upstream tarball layout: $ZK_HOME/lib/*.jar.
	if jars, _ := filepath.Glob(filepath.Join(home, "lib", "*.jar")); len(jars) > 0 {
		return java, filepath.Join(home, "lib", "*"), nil
	}
	// Debian layout: zkEnv.sh uses /usr/share/java/zookeeper.jar, whose
	// manifest Class-Path names its dependencies. Debian puts no SLF4J
	// binding on the server classpath; add slf4j-simple (stderr) so the
	// server's log ends up in the process log.
	const debJar = "/usr/share/java/zookeeper.jar"
	if _, err := os.Stat(filepath.Join(home, "bin", "zkServer.sh")); err != nil {
		return "", "", fmt.Errorf("ZooKeeper not found: %w (set %s)", err, EnvZooKeeperHome)
	}
	if _, err := os.Stat(debJar); err != nil {
		return "", "", fmt.Errorf("ZooKeeper server jar: %w", err)
	}
	cp := debJar
	if _, err := os.Stat("/usr/share/java/slf4j-simple.jar"); err == nil {
		cp += string(os.PathListSeparator) + "/usr/share/java/slf4j-simple.jar"
	}
	return java, cp, nil
}

func findJava() (string, error) {
	if home := os.Getenv("JAVA_HOME"); home != "" {
		java := filepath.Join(home, "bin", "java")
		if _, err := os.Stat(java); err == nil {
			return java, nil
		}
	}
	java, err := exec.LookPath("java")
	if err != nil {
		return "", fmt.Errorf("java runtime not found: %w", err)
	}
	return java, nil
}

// writeConfig writes zoo.cfg for the current port: a standalone server, or
// an ensemble member when zk.quorum is set.
func (zk *ZooKeeper) writeConfig() error {
	lines := []string{
		"tickTime=500",
		"minSessionTimeout=1000",
		"maxSessionTimeout=60000",
		"reconfigEnabled=false",
		"clientPortAddress=" + zk.listenHost(),
		"clientPort=" + strconv.Itoa(zk.port),
		"dataDir=" + zk.DataDir(),
		"maxClientCnxns=0",
		"admin.enableServer=false",
		"4lw.commands.whitelist=ruok,stat,srvr,mntr,wchs,cons",
	}
	if len(zk.quorum) == 0 {
		lines = append(lines, "standaloneEnabled=true")
	} else {
		lines = append(lines, "standaloneEnabled=false")
		lines = append(lines, zk.quorum...)
	}
	lines = append(lines, zk.extra...)
	cfg := strings.Join(append(lines, ""), "\n")
	if err := os.WriteFile(zk.confPath, []byte(cfg), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", zk.confPath, err)
	}
	return nil
}

// launch starts a server process with the current config and waits until
// it is ready. On failure the process is killed.
func (zk *ZooKeeper) launch() error {
	proc, err := zk.start()
	if err != nil {
		return err
	}
	return zk.awaitReady(proc, zkReadyTimeout)
}

// start starts a server process with the current config without waiting
// for it to serve.
func (zk *ZooKeeper) start() (*Process, error) {
	zk.mu.Lock()
	defer zk.mu.Unlock()
	zk.starts++
	spec := ProcessSpec{
		Name: fmt.Sprintf("%s-%d", zk.label, zk.starts),
		Path: zk.java,
		Args: []string{
			"-Xms32m", "-Xmx1g", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
			"-XX:-UsePerfData", "-Djava.awt.headless=true",
			"-Dzookeeper.log.dir=" + zk.dir,
			"-Dorg.slf4j.simpleLogger.defaultLogLevel=info",
			"-Dorg.slf4j.simpleLogger.showDateTime=true",
			"-cp", zk.classpath, zkMainClass, zk.confPath,
		},
		Dir:     zk.dir,
		LogPath: filepath.Join(zk.dir, "zookeeper.log"), // appended across restarts
	}
	proc, err := startProcess(zk.t, spec)
	if err != nil {
		return nil, fmt.Errorf("start: %w", err)
	}
	zk.proc = proc
	return proc, nil
}

// awaitReady polls zk.ready until it passes, the process exits or timeout
// passes. On failure the process is killed.
func (zk *ZooKeeper) awaitReady(proc *Process, timeout time.Duration) error {
	err := poll(timeout, pollInterval, func() (bool, error) {
		if proc.Exited() {
			return false, errPermanent{fmt.Errorf("server exited during startup: %w", proc.Wait(0))}
		}
		if err := zk.ready(zk.Addr()); err != nil {
			return false, err
		}
		return true, nil
	})
	if err != nil {
		if kerr := proc.kill(); kerr != nil {
			err = errors.Join(err, kerr)
		}
		return fmt.Errorf("not ready on %s: %w", zk.Addr(), err)
	}
	return nil
}

// zkServing checks that the server at addr answers ruok with imok and
// serves requests.
func zkServing(addr string) error {
	out, err := FourLetterWord(addr, "ruok")
	if err != nil {
		return err
	}
	if out != "imok" {
		return fmt.Errorf("ruok answered %q, want imok", out)
	}
	out, err = FourLetterWord(addr, "srvr")
	if err != nil {
		return err
	}
	if !strings.Contains(out, "Mode:") {
		return fmt.Errorf("srvr answered %q", out)
	}
	return nil
}

// portConflict reports whether the last start failed because the port was
// in use.
func (zk *ZooKeeper) portConflict() bool {
	return strings.Contains(zk.logTail(), "Address already in use")
}

func (zk *ZooKeeper) logTail() string {
	p := zk.Process()
	if p == nil {
		return ""
	}
	return p.LogTail(logTailBytes)
}

// FourLetterWord sends a ZooKeeper four-letter-word command (e.g. "ruok",
// "srvr", "mntr") to addr and returns the reply.
func FourLetterWord(addr, cmd string) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return "", fmt.Errorf("4lw %s: %w", cmd, err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		return "", fmt.Errorf("4lw %s: set deadline: %w", cmd, err)
	}
	if _, err := io.WriteString(conn, cmd); err != nil {
		return "", fmt.Errorf("4lw %s: write: %w", cmd, err)
	}
	out, err := io.ReadAll(conn)
	if err != nil {
		return "", fmt.Errorf("4lw %s: read: %w", cmd, err)
	}
	return string(out), nil
}

// Addr returns the client address, "127.0.0.1:port" (or the host given
// to StartZooKeeperOn).
func (zk *ZooKeeper) Addr() string {
	return net.JoinHostPort(zk.listenHost(), strconv.Itoa(zk.port))
}

func (zk *ZooKeeper) listenHost() string {
	if zk.host == "" {
		return "127.0.0.1"
	}
	return zk.host
}

// Port returns the client port.
func (zk *ZooKeeper) Port() int { return zk.port }

// DataDir returns the server's data directory (kept across restarts).
func (zk *ZooKeeper) DataDir() string { return filepath.Join(zk.dir, "data") }

// Process returns the current server process (nil before the first start).
// A new Process is created by each Restart.
func (zk *ZooKeeper) Process() *Process {
	zk.mu.Lock()
	defer zk.mu.Unlock()
	return zk.proc
}

// Stop shuts the server down gracefully (SIGTERM, then SIGKILL after 15s)
// and waits for it to exit. Stopping a stopped server is a no-op. Failures
// are reported with t.Errorf.
func (zk *ZooKeeper) Stop() {
	if p := zk.Process(); p != nil {
		if err := p.stop(zkStopGrace); err != nil {
			zk.t.Errorf("testsuite: %s: stop: %v", zk.label, err)
		}
	}
}

// Kill SIGKILLs the server (simulating a crash) and waits for it to exit.
// Failures are reported with t.Errorf.
func (zk *ZooKeeper) Kill() {
	if p := zk.Process(); p != nil {
		if err := p.kill(); err != nil {
			zk.t.Errorf("testsuite: %s: %v", zk.label, err)
		}
	}
}

// Restart stops the server if it is running (gracefully) and starts it again
// on the same port with the same data directory, waiting until it is ready.
// It fails t if the server does not come back.
func (zk *ZooKeeper) Restart(t testing.TB) {
	t.Helper()
	zk.Stop()
	if err := zk.launch(); err != nil {
		t.Fatalf("testsuite: %s: restart: %v (server output is logged below)", zk.label, err)
	}
}

func (zk *ZooKeeper) cleanup() {
	p := zk.Process()
	if p == nil {
		return
	}
	if err := p.kill(); err != nil {
		zk.t.Errorf("testsuite: %s: cleanup: %v", zk.label, err)
	}
	if zk.t.Failed() {
		zk.t.Logf("testsuite: %s %s output, full log at %s:\n%s",
			zk.label, zk.Addr(), p.LogPath(), p.LogTail(logTailBytes))
	}
}
