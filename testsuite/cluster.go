package testsuite

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/activities/jobs/sqlstore"
	"github.com/batoncrawl/baton/activities/metadata"
	"github.com/batoncrawl/baton/roles"
)

// Cluster is a Baton cluster of real baton-worker processes on a real
// ZooKeeper and Temporal dev server, with typed access to its metadata for
// assertions. Methods must be called from the test goroutine.
type Cluster struct {
	T testing.TB
	// ZK is the standalone server NewCluster started; nil when the cluster
	// uses an Ensemble or other servers (WithEnsemble, WithZooKeeperHosts).
	ZK *ZooKeeper
	// Ensemble is the ensemble given with WithEnsemble, if any.
	Ensemble *Ensemble
	Temporal *Temporal
	Worker   string // baton-worker binary
	Starter  string // baton binary
	Group    string
	Root     string
	Runner   int
	Backup   int
	// Args are extra worker flags (timers, capacity).
	Args    []string
	DataDir string
	// Store is the job store's DSN (WithPostgres); "" is SQLite under
	// DataDir, shared by the workers as on one host.
	Store    string
	Postgres *Postgres
	// SeparateDataDirs gives every worker its own data directory, as on
	// separate machines (WithPostgres sets it).
	SeparateDataDirs bool
	Meta             *metadata.Cluster
	// Hosts puts every worker on a host of its own (WithHosts); nil: all
	// on this one.
	Hosts *Hosts

	zkHosts string // set by WithEnsemble/WithZooKeeperHosts, or ZK.Addr()
	// ZKAuth is the ZooKeeper digest credentials user:password the
	// cluster runs with (WithZooKeeperAuth), "" for none; give it to
	// starter processes as BATON_ZK_AUTH.
	ZKAuth       string
	temporalOpts []TemporalOption

	workerPkg string // WithWorkerBinary
	// PayloadKeyFile is the payload key of WithPayloadKey ("" without).
	PayloadKeyFile string

	mu      sync.Mutex
	workers map[string]*Process
}

// ClusterOption customises NewCluster.
type ClusterOption func(*Cluster)

// WithPayloadKey encrypts every Temporal payload of the cluster: a fresh
// key file (PayloadKeyFile) given to every worker and to StarterArgs.
func WithPayloadKey() ClusterOption {
	return func(c *Cluster) {
		key := make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			c.T.Fatalf("payload key: %v", err)
		}
		c.PayloadKeyFile = filepath.Join(c.T.TempDir(), "payload.key")
		if err := os.WriteFile(c.PayloadKeyFile, []byte(hex.EncodeToString(key)+"\n"), 0o600); err != nil {
			c.T.Fatalf("payload key: %v", err)
		}
		c.Args = append(c.Args, "--payload-key-file", c.PayloadKeyFile)
	}
}

// WithWorkerBinary runs the cluster's instances with a worker binary of
// one's own, built from pkg (BuildWorker), instead of baton-worker.
func WithWorkerBinary(pkg string) ClusterOption {
	return func(c *Cluster) { c.workerPkg = pkg }
}

// WithWorkerArgs adds flags to every worker.
func WithWorkerArgs(args ...string) ClusterOption {
	return func(c *Cluster) { c.Args = append(c.Args, args...) }
}

// FastTimers is the worker flag for the fast timer profile.
var FastTimers = WithWorkerArgs("--timers", "fast")

// WithZooKeeperHosts makes the cluster use already running ZooKeeper
// servers (comma-separated host:port, the form of --zk-hosts) instead of
// starting a standalone one; Cluster.ZK stays nil.
func WithZooKeeperHosts(hosts string) ClusterOption {
	return func(c *Cluster) { c.zkHosts = hosts }
}

// WithEnsemble makes the cluster use a ZooKeeper ensemble started by
// StartEnsemble: workers get --zk-hosts e.Hosts(). Cluster.ZK stays nil.
func WithEnsemble(e *Ensemble) ClusterOption {
	return func(c *Cluster) {
		c.Ensemble = e
		c.zkHosts = e.Hosts()
	}
}

// WithWebUI starts the cluster's Temporal dev server with its Web UI (see
// Temporal.UIAddress).
func WithWebUI() ClusterOption {
	return func(c *Cluster) { c.temporalOpts = append(c.temporalOpts, WithTemporalUI()) }
}

// WithTemporalOptions starts the cluster's Temporal dev server with opts,
// e.g. WithTemporalDatabase() to restart it mid-test.
func WithTemporalOptions(opts ...TemporalOption) ClusterOption {
	return func(c *Cluster) { c.temporalOpts = append(c.temporalOpts, opts...) }
}

// WithPostgres keeps the job data in pg (its own database, not
// Temporal's), with every worker on its own data directory, as on
// separate machines.
func WithPostgres(pg *Postgres) ClusterOption {
	return func(c *Cluster) { c.Postgres, c.Store, c.SeparateDataDirs = pg, pg.DSN(), true }
}

// WithZooKeeperAuth runs the cluster with ZooKeeper digest credentials
// user:password: the workers read them from a file (--zk-auth-file), the
// harness's store (Meta) authenticates with them, and Baton's znodes get an
// ACL for that user only.
func WithZooKeeperAuth(auth string) ClusterOption {
	return func(c *Cluster) { c.ZKAuth = auth }
}

// NewCluster starts ZooKeeper (unless WithEnsemble or WithZooKeeperHosts
// is given) and Temporal, and prepares a group of runner+backup instances
// named sc-crawler_1... It starts no worker: call Start.
func NewCluster(t testing.TB, runner, backup int, opts ...ClusterOption) *Cluster {
	t.Helper()
	c := &Cluster{T: t, Runner: runner, Backup: backup,
		Group: "g" + sanitize(strings.ToLower(t.Name())), Root: "/baton-test", DataDir: t.TempDir(),
		workers: map[string]*Process{}}
	if len(c.Group) > 60 {
		c.Group = c.Group[:60]
	}
	for _, o := range opts {
		o(c)
	}
	if c.zkHosts == "" {
		c.ZK = StartZooKeeperOn(t, c.serverIP())
		c.zkHosts = c.ZK.Addr()
	}
	c.Temporal = StartTemporal(t, c.temporalOpts...)
	c.Worker, c.Starter = BuildBinaries(t)
	if c.workerPkg != "" {
		c.Worker = BuildWorker(t, c.workerPkg)
	}
	if c.ZKAuth != "" {
		f := filepath.Join(t.TempDir(), "zk-auth")
		if err := os.WriteFile(f, []byte(c.ZKAuth+"\n"), 0o600); err != nil {
			t.Fatalf("write %s: %v", f, err)
		}
		c.Args = append(c.Args, "--zk-auth-file", f)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cfg := metadata.DefaultZooKeeperConfig()
	cfg.Hosts = strings.Split(c.zkHosts, ",")
	cfg.Auth = c.ZKAuth
	store, err := metadata.DialZooKeeper(ctx, cfg)
	if err != nil {
		t.Fatalf("dial zookeeper: %v", err)
	}
	t.Cleanup(func() { store.Close() })
	c.Meta = metadata.NewCluster(store, c.Root, c.Group)
	return c
}

// ZKHosts returns the ZooKeeper servers the cluster uses, comma-separated
// (the workers' --zk-hosts).
func (c *Cluster) ZKHosts() string { return c.zkHosts }

// Name returns the name of instance i.
func Name(i int) string { return fmt.Sprintf("sc-crawler_%d", i) }

// WorkerArgs returns the flags of instance name.
func (c *Cluster) WorkerArgs(name string) []string {
	dir := c.DataDir
	if c.SeparateDataDirs {
		dir = filepath.Join(c.DataDir, name)
	}
	args := []string{"--name", name, "--group", c.Group, "--runner", fmt.Sprint(c.Runner),
		"--backup", fmt.Sprint(c.Backup), "--zk-hosts", c.zkHosts, "--zk-root", c.Root,
		"--temporal-address", c.Temporal.Address(), "--data-dir", dir, "--log-level", "info"}
	if c.Store != "" {
		args = append(args, "--store", c.Store)
	}
	if c.SeparateDataDirs {
		// Machines of one group share its secrets key (the CLI's default,
		// under DataDir).
		args = append(args, "--secrets-key-file", filepath.Join(c.DataDir, "secrets.key"))
	}
	return append(args, c.Args...)
}

// StarterArgs returns the global flags of the baton CLI for the cluster
// (ZooKeeper, Temporal, the job store).
func (c *Cluster) StarterArgs() []string {
	args := []string{"--zk-hosts", c.zkHosts, "--zk-root", c.Root, "--group", c.Group,
		"--temporal-address", c.Temporal.Address(), "--data-dir", c.DataDir}
	if c.Store != "" {
		args = append(args, "--store", c.Store)
	}
	if c.PayloadKeyFile != "" {
		args = append(args, "--payload-key-file", c.PayloadKeyFile)
	}
	return args
}

// OpenStore opens the cluster's job store from the test process (closed
// when the test ends).
func (c *Cluster) OpenStore() jobs.Store {
	c.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	js, err := sqlstore.Open(ctx, sqlstore.Config{Store: c.Store, DataDir: c.DataDir})
	if err != nil {
		c.T.Fatalf("open the job store: %v", err)
	}
	c.T.Cleanup(func() { js.Close() })
	return js
}

// Start starts (or restarts) instance i with optional extra environment.
func (c *Cluster) Start(i int, env ...string) *Process {
	c.T.Helper()
	return c.StartWith(i, nil, env...)
}

// StartWith starts (or restarts) instance i with extra flags after the
// cluster's (a repeated flag's last value wins, e.g. "--zk-hosts" of a
// Proxy) and optional extra environment.
func (c *Cluster) StartWith(i int, args []string, env ...string) *Process {
	c.T.Helper()
	name := Name(i)
	all := append(c.WorkerArgs(name), args...)
	p := StartProcess(c.T, ProcessSpec{Name: name, Path: c.Worker, Args: all, Env: env, Netns: c.netns(i)})
	c.mu.Lock()
	c.workers[name] = p
	c.mu.Unlock()
	return p
}

// StartAll starts instances 1..runner+backup.
func (c *Cluster) StartAll() {
	for i := 1; i <= c.Runner+c.Backup; i++ {
		c.Start(i)
	}
}

// Process returns the current process of instance i.
func (c *Cluster) Process(i int) *Process {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.workers[Name(i)]
}

// Kill SIGKILLs instance i and returns when it is gone.
func (c *Cluster) Kill(i int) time.Time {
	p := c.Process(i)
	at := time.Now()
	p.Kill()
	return at
}

// Role reads an instance's role ("" if unreadable).
func (c *Cluster) Role(i int) roles.Role {
	n, _, err := c.Meta.GetNode(context.Background(), Name(i))
	if err != nil {
		return ""
	}
	return n.Role
}

// Group reads GroupState.
// It rides out a transient loss of the ZooKeeper connection.
func (c *Cluster) GroupState() roles.GroupState {
	var g roles.GroupState
	Eventually(c.T, 20*time.Second, "GroupState to be readable", func() (bool, error) {
		var err error
		g, _, err = c.Meta.GetGroup(context.Background())
		return err == nil, err
	})
	return g
}

// Task reads instance i's Task, riding out a transient connection loss.
func (c *Cluster) Task(i int) roles.Task {
	var t roles.Task
	Eventually(c.T, 20*time.Second, "the Task of "+Name(i)+" to be readable", func() (bool, error) {
		var err error
		t, _, err = c.Meta.GetTask(context.Background(), Name(i))
		return err == nil, err
	})
	return t
}

// WaitRoles waits until every listed instance has its role.
func (c *Cluster) WaitRoles(timeout time.Duration, want map[int]roles.Role) {
	c.T.Helper()
	Eventually(c.T, timeout, fmt.Sprintf("roles %v", want), func() (bool, error) {
		for i, r := range want {
			if got := c.Role(i); got != r {
				return false, fmt.Errorf("%s is %q, want %q", Name(i), got, r)
			}
		}
		return true, nil
	})
}

// WaitElected waits for the initial election: 1..runner are runners and the
// rest backups.
func (c *Cluster) WaitElected(timeout time.Duration) {
	want := map[int]roles.Role{}
	for i := 1; i <= c.Runner+c.Backup; i++ {
		want[i] = roles.RoleBackup
		if i <= c.Runner {
			want[i] = roles.RoleRunner
		}
	}
	c.WaitRoles(timeout, want)
}

// Assign writes a Task of the given URLs to instance i (as `baton task
// assign` does).
func (c *Cluster) Assign(i int, urls []string) {
	c.T.Helper()
	ctx := context.Background()
	cur, v, err := c.Meta.GetTask(ctx, Name(i))
	if err != nil {
		c.T.Fatalf("read task: %v", err)
	}
	t := roles.EmptyTask()
	for k, u := range urls {
		t.RunningContent = append(t.RunningContent, roles.Request{TaskID: k, URL: u, Method: "GET"})
	}
	t = t.Replacing(cur)
	if _, err := c.Meta.Store.Set(ctx, c.Meta.TaskPath(Name(i)), metadata.Encode(t), v); err != nil {
		c.T.Fatalf("assign task to %s: %v", Name(i), err)
	}
}

// WaitTaskProgress waits until instance i's Task has at least n results.
func (c *Cluster) WaitTaskProgress(timeout time.Duration, i, n int) {
	c.T.Helper()
	Eventually(c.T, timeout, fmt.Sprintf("%s to record %d results", Name(i), n), func() (bool, error) {
		t := c.Task(i)
		return t.NextIndex >= n, fmt.Errorf("next_index %d", t.NextIndex)
	})
}

// WaitTaskDone waits until instance i holds a done Task.
func (c *Cluster) WaitTaskDone(timeout time.Duration, i int) roles.Task {
	c.T.Helper()
	var t roles.Task
	Eventually(c.T, timeout, fmt.Sprintf("%s's task to be done", Name(i)), func() (bool, error) {
		t = c.Task(i)
		return t.RunningStatus == roles.TaskDone && (t.Holder == Name(i) || t.Holder == ""),
			fmt.Errorf("status %s holder %q next %d/%d", t.RunningStatus, t.Holder, t.NextIndex, len(t.RunningContent))
	})
	return t
}

// AssertExactlyOnce checks that a finished Task recorded every request's
// result once: task_ids 0..n-1 each once, counters adding up to n.
func AssertExactlyOnce(t testing.TB, task roles.Task, n int) {
	t.Helper()
	if len(task.RunningContent) != n {
		t.Fatalf("task has %d requests, want %d", len(task.RunningContent), n)
	}
	var ids []int
	for _, d := range task.ResultDetail {
		ids = append(ids, d.TaskID)
	}
	slices.Sort(ids)
	want := make([]int, n)
	for i := range want {
		want[i] = i
	}
	if !slices.Equal(ids, want) {
		t.Fatalf("results recorded for task_ids %v, want each of 0..%d exactly once", ids, n-1)
	}
	if got := task.RunningResult.SuccessCount + task.RunningResult.FailCount; got != n {
		t.Fatalf("running_result counts %d results, want %d", got, n)
	}
	if task.NextIndex != n || task.RunningStatus != roles.TaskDone {
		t.Fatalf("task at %d/%d, status %s", task.NextIndex, n, task.RunningStatus)
	}
}

// Site is a loopback HTTP site whose pages take Delay each and count hits.
type Site struct {
	*httptest.Server
	Delay time.Duration
	mu    sync.Mutex
	hits  map[string]int
}

// NewSite serves /p/N pages with a per-page delay.
func NewSite(t testing.TB, delay time.Duration) *Site {
	s := &Site{Delay: delay, hits: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.hits[r.URL.Path]++
		s.mu.Unlock()
		select {
		case <-time.After(s.Delay):
		case <-r.Context().Done():
			return
		}
		if strings.HasPrefix(r.URL.Path, "/missing") {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintf(w, "<html><title>%s</title></html>", r.URL.Path)
	}))
	t.Cleanup(s.Close)
	return s
}

// URLs returns n page URLs.
func (s *Site) URLs(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s/%s/%d", s.URL, prefix, i)
	}
	return out
}
