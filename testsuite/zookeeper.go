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

// ZooKeeper is a standalone ZooKeeper server started by StartZooKeeper. It
// listens on 127.0.0.1 on a port that stays the same across Restart, and
// keeps its data directory for the lifetime of the test.
//
// The server accepts session timeouts between 1s and 60s (tickTime 500ms),
// so tests can use short sessions to make ephemeral znodes of killed
// processes disappear quickly. The 4lw commands ruok, stat, srvr and mntr
// are enabled.
type ZooKeeper struct {
	t         testing.TB
	port      int
	dir       string
	confPath  string
	java      string
	classpath string

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
	skipIfShort(t, "ZooKeeper")
	java, classpath, err := zooKeeperInstall()
	if err != nil {
		missingDependency(t, "ZooKeeper", err)
	}
	zk := &ZooKeeper{t: t, dir: t.TempDir(), java: java}
	confDir := filepath.Join(zk.dir, "conf")
	dataDir := filepath.Join(zk.dir, "data")
	for _, d := range []string{confDir, dataDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatalf("testsuite: zookeeper: create %s: %v", d, err)
		}
	}
	// The conf dir goes first on the classpath so a logging config placed
	// there would be picked up.
	zk.classpath = confDir + string(os.PathListSeparator) + classpath
	zk.confPath = filepath.Join(confDir, "zoo.cfg")
	t.Cleanup(zk.cleanup)

	var lastErr error
	for attempt := 1; attempt <= zkStartAttempts; attempt++ {
		if zk.port, err = freePort(); err != nil {
			t.Fatalf("testsuite: zookeeper: %v", err)
		}
		if err := zk.writeConfig(dataDir); err != nil {
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

func (zk *ZooKeeper) writeConfig(dataDir string) error {
	cfg := strings.Join([]string{
		"tickTime=500",
		"minSessionTimeout=1000",
		"maxSessionTimeout=60000",
		"standaloneEnabled=true",
		"reconfigEnabled=false",
		"clientPortAddress=127.0.0.1",
		"clientPort=" + strconv.Itoa(zk.port),
		"dataDir=" + dataDir,
		"maxClientCnxns=0",
		"admin.enableServer=false",
		"4lw.commands.whitelist=ruok,stat,srvr,mntr",
		"",
	}, "\n")
	if err := os.WriteFile(zk.confPath, []byte(cfg), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", zk.confPath, err)
	}
	return nil
}

// launch starts a server process with the current config and waits until
// it is ready. On failure the process is killed.
func (zk *ZooKeeper) launch() error {
	zk.mu.Lock()
	zk.starts++
	spec := ProcessSpec{
		Name: fmt.Sprintf("zookeeper-%d", zk.starts),
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
	if err == nil {
		zk.proc = proc
	}
	zk.mu.Unlock()
	if err != nil {
		return fmt.Errorf("start: %w", err)
	}
	err = poll(zkReadyTimeout, pollInterval, func() (bool, error) {
		if proc.Exited() {
			return false, errPermanent{fmt.Errorf("server exited during startup: %w", proc.Wait(0))}
		}
		if err := zkServing(zk.Addr()); err != nil {
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

// Addr returns the client address, "127.0.0.1:port".
func (zk *ZooKeeper) Addr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(zk.port))
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
			zk.t.Errorf("testsuite: zookeeper: stop: %v", err)
		}
	}
}

// Kill SIGKILLs the server (simulating a crash) and waits for it to exit.
// Failures are reported with t.Errorf.
func (zk *ZooKeeper) Kill() {
	if p := zk.Process(); p != nil {
		if err := p.kill(); err != nil {
			zk.t.Errorf("testsuite: zookeeper: %v", err)
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
		t.Fatalf("testsuite: zookeeper: restart: %v (server output is logged below)", err)
	}
}

func (zk *ZooKeeper) cleanup() {
	p := zk.Process()
	if p == nil {
		return
	}
	if err := p.kill(); err != nil {
		zk.t.Errorf("testsuite: zookeeper: cleanup: %v", err)
	}
	if zk.t.Failed() {
		zk.t.Logf("testsuite: zookeeper %s output, full log at %s:\n%s",
			zk.Addr(), p.LogPath(), p.LogTail(logTailBytes))
	}
}
