package testsuite

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
)

const (
	// temporalReadyTimeout bounds how long a dev server may take to become
	// healthy.
	temporalReadyTimeout = 60 * time.Second
	// temporalStartAttempts is how often a start is retried with new ports
	// when a chosen port was taken in the meantime.
	temporalStartAttempts = 3
	// temporalDialTimeout bounds one client dial.
	temporalDialTimeout = 5 * time.Second
	// temporalStopGrace is how long Stop waits after SIGTERM before SIGKILL.
	temporalStopGrace = 15 * time.Second
)

// DefaultNamespace is the namespace the dev servers serve.
const DefaultNamespace = "default"

// SearchAttributes lists the custom search attributes registered (all of
// type Keyword) on every Temporal dev server the harness and the local stack
// start.
var SearchAttributes = []string{"BatonCluster", "BatonCrawler", "BatonRole", "BatonJob"}

// TemporalOption customises StartTemporal.
type TemporalOption func(*temporalConfig)

type temporalConfig struct {
	ui            bool
	persistent    bool
	dynamicConfig []string
	extraArgs     []string
	ip            string // the address the server listens on; "" is 127.0.0.1
}

// WithTemporalDatabase keeps the server's state in a SQLite file
// (--db-filename, see Temporal.DBPath) instead of in memory, so that the
// server can be stopped and started again on the same database
// (Temporal.Stop, Kill, Start, Restart) with its workflows intact.
func WithTemporalDatabase() TemporalOption {
	return func(c *temporalConfig) { c.persistent = true }
}

// WithTemporalUI enables the Web UI on a free port (see Temporal.UIAddress);
// by default the server runs headless.
func WithTemporalUI() TemporalOption {
	return func(c *temporalConfig) { c.ui = true }
}

// TransferPollRPS is how often the dev server's history shard may read its
// transfer queue (history.transferProcessorMaxPollRPS), as the local stack
// sets it (deployments/scripts/stack.sh): a workflow task or an activity
// not dispatched eagerly is handed to matching when the queue is read, and
// the server's default, 20 a second, on the dev server's single shard held
// each one 25 ms on average (BenchmarkTemporalDispatch).
const TransferPollRPS = 1000

// WithTemporalDynamicConfig sets a server dynamic-config value; jsonValue is
// a JSON literal, e.g. WithTemporalDynamicConfig("limit.maxIDLength", "1000").
// It overrides the harness's own settings of the same key (the CLI keeps
// the last value given; BenchmarkTemporalDispatch sets the server's default
// transfer queue rate back this way).
func WithTemporalDynamicConfig(key, jsonValue string) TemporalOption {
	return func(c *temporalConfig) { c.dynamicConfig = append(c.dynamicConfig, key+"="+jsonValue) }
}

// WithTemporalIP makes the server reachable on ip, an IP address of this
// machine (e.g. the bridge of Hosts), instead of 127.0.0.1: Address names
// ip. The dev server's services tell each other 127.0.0.1 whatever --ip
// says (on another address they cannot reach each other), so it listens on
// 0.0.0.0.
func WithTemporalIP(ip string) TemporalOption {
	return func(c *temporalConfig) { c.ip = ip }
}

// WithTemporalArgs appends raw arguments to `temporal server start-dev`.
func WithTemporalArgs(args ...string) TemporalOption {
	return func(c *temporalConfig) { c.extraArgs = append(c.extraArgs, args...) }
}

// Temporal is a Temporal dev server (`temporal server start-dev`, in-memory
// persistence unless WithTemporalDatabase) started by StartTemporal,
// listening on 127.0.0.1. Its ports stay the same across Start.
type Temporal struct {
	t      testing.TB
	bin    string
	dir    string
	cfg    temporalConfig
	port   int
	uiPort int // 0 when headless

	mu     sync.Mutex
	proc   *Process // current (possibly exited) server process
	starts int
}

// StartTemporal starts a Temporal dev server for the test on free loopback
// ports, with namespace "default" and the Baton search attributes
// registered, and waits (up to 60s) until an SDK client can dial it and its
// health check passes. The server is killed when the test ends. If the
// temporal CLI is not installed the test fails (it is skipped when
// BATON_ALLOW_SKIP=1); under -short the test is skipped.
//
// The binary is $BATON_TEMPORAL_BIN, else <repo>/.stack/bin/temporal, else
// temporal on $PATH.
func StartTemporal(t testing.TB, opts ...TemporalOption) *Temporal {
	t.Helper()
	skipIfShort(t, "Temporal")
	var cfg temporalConfig
	for _, o := range opts {
		o(&cfg)
	}
	bin, err := findTemporal()
	if err != nil {
		missingDependency(t, "Temporal CLI", err)
	}
	tmp := &Temporal{t: t, bin: bin, dir: t.TempDir(), cfg: cfg}
	t.Cleanup(tmp.cleanup)

	var lastErr error
	for attempt := 1; attempt <= temporalStartAttempts; attempt++ {
		if tmp.port, err = freePort(); err != nil {
			t.Fatalf("testsuite: temporal: %v", err)
		}
		if cfg.ui {
			if tmp.uiPort, err = freePort(); err != nil {
				t.Fatalf("testsuite: temporal: %v", err)
			}
		}
		if lastErr = tmp.launch(); lastErr == nil {
			return tmp
		}
		if p := tmp.Process(); p == nil || !temporalPortConflict(p.Logs()) {
			break // not a port conflict
		}
		t.Logf("testsuite: temporal: port conflict, retrying with other ports: %v", lastErr)
		if tmp.cfg.persistent {
			// A failed first start may have created the database.
			_ = os.Remove(tmp.DBPath())
		}
	}
	t.Fatalf("testsuite: temporal: %v", lastErr)
	return nil
}

// temporalPortConflict reports whether a dev server's log says one of its
// ports was taken between freePort and its start: "can't set" (the UI's
// port) or a gRPC listener's "address already in use" (after which the dev
// server panics).
func temporalPortConflict(logs string) bool {
	return strings.Contains(logs, "can't set") || strings.Contains(logs, "address already in use")
}

func findTemporal() (string, error) {
	if bin := os.Getenv(EnvTemporalBin); bin != "" {
		if _, err := os.Stat(bin); err != nil {
			return "", fmt.Errorf("%s=%s: %w", EnvTemporalBin, bin, err)
		}
		return bin, nil
	}
	if root, err := findRepoRoot(); err == nil {
		bin := filepath.Join(root, ".stack", "bin", "temporal")
		if _, err := os.Stat(bin); err == nil {
			return bin, nil
		}
	}
	bin, err := exec.LookPath("temporal")
	if err != nil {
		return "", fmt.Errorf("temporal CLI not in %s, .stack/bin or $PATH: %w", EnvTemporalBin, err)
	}
	return bin, nil
}

// launch starts one server process on the chosen ports and waits for it.
// On failure the process is killed and the error carries its log tail.
func (tmp *Temporal) launch() error {
	args := []string{
		"server", "start-dev",
		"--ip", tmp.bindIP(),
		"--port", strconv.Itoa(tmp.port),
		"--namespace", DefaultNamespace,
		"--log-level", "warn",
	}
	if tmp.cfg.ui {
		args = append(args, "--ui-port", strconv.Itoa(tmp.uiPort))
	} else {
		args = append(args, "--headless")
	}
	if tmp.cfg.persistent {
		args = append(args, "--db-filename", tmp.DBPath())
	}
	for _, sa := range SearchAttributes {
		args = append(args, "--search-attribute", sa+"=Keyword")
	}
	// One partition per task queue, as the local stack does: on a single dev
	// server the default four partitions add ~40 ms to every dispatch. Eager
	// activities, as the local stack has too: an activity scheduled on the
	// workflow's own task queue comes back in the workflow task's reply.
	// The transfer queue read at up to 1000 times a second, not 20: the dev
	// server has one history shard, whose default limit of 20 reads a
	// second held every workflow task 25 ms on average before a worker got
	// it (a cluster spreads its workflows over hundreds of shards).
	args = append(args, "--dynamic-config-value", "matching.numTaskqueueReadPartitions=1",
		"--dynamic-config-value", "matching.numTaskqueueWritePartitions=1",
		"--dynamic-config-value", "system.enableActivityEagerExecution=true",
		"--dynamic-config-value", "history.transferProcessorMaxPollRPS="+strconv.Itoa(TransferPollRPS))
	for _, dc := range tmp.cfg.dynamicConfig {
		args = append(args, "--dynamic-config-value", dc)
	}
	args = append(args, tmp.cfg.extraArgs...)

	tmp.mu.Lock()
	tmp.starts++
	n := tmp.starts
	tmp.mu.Unlock()
	xdg := filepath.Join(tmp.dir, fmt.Sprintf("config-%d", n))
	proc, err := startProcess(tmp.t, ProcessSpec{
		Name: fmt.Sprintf("temporal-%d", n),
		Path: tmp.bin,
		Args: args,
		Dir:  tmp.dir,
		// Keep the CLI away from the user's ~/.config/temporalio files.
		Env:     []string{"XDG_CONFIG_HOME=" + xdg},
		LogPath: filepath.Join(tmp.dir, fmt.Sprintf("temporal-%d.log", n)),
	})
	if err != nil {
		return err
	}
	tmp.mu.Lock()
	tmp.proc = proc
	tmp.mu.Unlock()

	err = poll(temporalReadyTimeout, pollInterval, func() (bool, error) {
		if proc.Exited() {
			return false, errPermanent{fmt.Errorf("server exited during startup: %w", proc.Wait(0))}
		}
		if err := tmp.healthy(); err != nil {
			return false, err
		}
		return true, nil
	})
	if err != nil {
		if kerr := proc.kill(); kerr != nil {
			err = errors.Join(err, kerr)
		}
		return fmt.Errorf("not ready on %s: %w\n%s", tmp.Address(), err, proc.LogTail(logTailBytes))
	}
	return nil
}

// DBPath returns the SQLite file holding the server's state
// (WithTemporalDatabase); without that option the state is in memory and
// the file is never created.
func (tmp *Temporal) DBPath() string { return filepath.Join(tmp.dir, "temporal.db") }

// Stop shuts the server down gracefully (SIGTERM, then SIGKILL after 15s)
// and waits for it to exit. Stopping a stopped server is a no-op.
// Failures are reported with t.Errorf.
func (tmp *Temporal) Stop() {
	if p := tmp.Process(); p != nil {
		if err := p.stop(temporalStopGrace); err != nil {
			tmp.t.Errorf("testsuite: temporal: stop: %v", err)
		}
	}
}

// Kill SIGKILLs the server (simulating a crash) and waits for it to exit.
// Failures are reported with t.Errorf.
func (tmp *Temporal) Kill() {
	if p := tmp.Process(); p != nil {
		if err := p.kill(); err != nil {
			tmp.t.Errorf("testsuite: temporal: %v", err)
		}
	}
}

// Start starts a stopped (or killed) server again on the same ports and
// database and waits until it is healthy. It needs WithTemporalDatabase:
// an in-memory server's state died with it. It fails t if the server is
// running or does not come back.
func (tmp *Temporal) Start(t testing.TB) {
	t.Helper()
	if !tmp.cfg.persistent {
		t.Fatalf("testsuite: temporal: Start after Stop needs WithTemporalDatabase (the in-memory state is gone)")
	}
	if p := tmp.Process(); p != nil && !p.Exited() {
		t.Fatalf("testsuite: temporal: Start: the server (pid %d) is still running", p.Pid())
	}
	if err := tmp.launch(); err != nil {
		t.Fatalf("testsuite: temporal: start again on %s: %v", tmp.DBPath(), err)
	}
}

// Restart stops the server gracefully and starts it again on the same
// ports and database (see Start).
func (tmp *Temporal) Restart(t testing.TB) {
	t.Helper()
	tmp.Stop()
	tmp.Start(t)
}

func (tmp *Temporal) cleanup() {
	if p := tmp.Process(); p != nil {
		p.cleanup()
	}
}

// healthy dials the server and checks its health and the default namespace.
func (tmp *Temporal) healthy() error {
	ctx, cancel := context.WithTimeout(context.Background(), temporalDialTimeout)
	defer cancel()
	c, err := client.DialContext(ctx, tmp.clientOptions())
	if err != nil {
		return fmt.Errorf("dial %s: %w", tmp.Address(), err)
	}
	defer c.Close()
	if _, err := c.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
		return fmt.Errorf("check health of %s: %w", tmp.Address(), err)
	}
	if _, err := c.WorkflowService().DescribeNamespace(ctx,
		&workflowservice.DescribeNamespaceRequest{Namespace: DefaultNamespace}); err != nil {
		return fmt.Errorf("describe namespace %q: %w", DefaultNamespace, err)
	}
	return nil
}

// Address returns the frontend gRPC address, "127.0.0.1:port" (or the
// address of WithTemporalIP).
func (tmp *Temporal) Address() string {
	return net.JoinHostPort(tmp.listenIP(), strconv.Itoa(tmp.port))
}

func (tmp *Temporal) bindIP() string {
	if tmp.cfg.ip == "" {
		return "127.0.0.1"
	}
	return "0.0.0.0"
}

func (tmp *Temporal) listenIP() string {
	if tmp.cfg.ip == "" {
		return "127.0.0.1"
	}
	return tmp.cfg.ip
}

// Namespace returns the namespace to use ("default").
func (tmp *Temporal) Namespace() string { return DefaultNamespace }

// UIAddress returns the Web UI URL, or "" if the server is headless.
func (tmp *Temporal) UIAddress() string {
	if tmp.uiPort == 0 {
		return ""
	}
	return "http://" + net.JoinHostPort(tmp.listenIP(), strconv.Itoa(tmp.uiPort))
}

// Process returns the current server process (nil before the first
// start); each Start creates a new one.
func (tmp *Temporal) Process() *Process {
	tmp.mu.Lock()
	defer tmp.mu.Unlock()
	return tmp.proc
}

// ClientOptions returns SDK client options for this server: address,
// namespace and a logger that only prints warnings and errors (to stderr).
func (tmp *Temporal) ClientOptions() client.Options {
	return tmp.clientOptions()
}

func (tmp *Temporal) clientOptions() client.Options {
	return client.Options{
		HostPort:  tmp.Address(),
		Namespace: DefaultNamespace,
		Logger:    QuietTemporalLogger(),
	}
}

// Client dials a new SDK client for this server and closes it when the test
// ends. It fails the test if dialing fails.
func (tmp *Temporal) Client(t testing.TB) client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.DialContext(ctx, tmp.clientOptions())
	if err != nil {
		t.Fatalf("testsuite: temporal: dial %s: %v", tmp.Address(), err)
	}
	t.Cleanup(c.Close)
	return c
}

// QuietTemporalLogger returns an SDK logger that writes only warnings and
// errors to stderr, keeping test output readable.
func QuietTemporalLogger() sdklog.Logger {
	return sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr,
		&slog.HandlerOptions{Level: slog.LevelWarn})))
}
