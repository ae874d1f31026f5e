// Package worker runs one Baton crawler instance — what the baton-worker
// command runs, and what your own worker binary runs with your crawlers:
// it connects to ZooKeeper and Temporal, serves its own task queue, and
// starts or resumes its Lifecycle workflow (register, elect, run its role).
// Every flag can be set from the environment (BATON_<FLAG>). Its exit codes
// are package exitcode's, shared with baton.
//
// A worker binary of your own registers your crawlers (package crawler)
// and is run, configured and deployed exactly as baton-worker is:
//
//	func main() {
//		os.Exit(worker.Main(shop.NewCrawler()))
//	}
package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/spf13/cobra"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/batoncrawl/baton/activities/cluster"
	"github.com/batoncrawl/baton/activities/cmdline/exitcode"
	"github.com/batoncrawl/baton/activities/cmdline/flagenv"
	"github.com/batoncrawl/baton/activities/cmdline/version"
	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/crawler"
	"github.com/batoncrawl/baton/activities/failover"
	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/activities/metadata"
	"github.com/batoncrawl/baton/activities/render"
	"github.com/batoncrawl/baton/activities/scale"
	"github.com/batoncrawl/baton/roles"
	"github.com/batoncrawl/baton/workflows"
)

// Main runs a worker configured by the command line and the environment
// (the flags of baton-worker) with the given crawlers besides the built-in
// one, until it stops (SIGTERM, Ctrl-C), and returns its exit code: the
// body of a worker binary's main is os.Exit(worker.Main(crawlers...)).
// It calls itself by the binary's name (in --help, --version and its
// errors) and lists the crawlers it carries in --help and --version.
func Main(crawlers ...*crawler.Crawler) int {
	return Program{Name: filepath.Base(os.Args[0]), Crawlers: crawlers}.Execute(os.Args[1:], os.Stdout, os.Stderr)
}

// Execute is Main with its arguments and outputs given, named
// baton-worker.
func Execute(args []string, stdout, stderr io.Writer, crawlers ...*crawler.Crawler) int {
	return Program{Crawlers: crawlers}.Execute(args, stdout, stderr)
}

// Program is a worker binary: its name and the crawlers it carries
// besides the built-in one.
type Program struct {
	// Name is what it calls itself in --help, --version and its errors;
	// "" means baton-worker.
	Name     string
	Crawlers []*crawler.Crawler
}

// Execute runs the worker with args (Main).
func (p Program) Execute(args []string, stdout, stderr io.Writer) int {
	restoreGC()
	name := p.Name
	if name == "" || name == "." || name == string(filepath.Separator) {
		name = "baton-worker"
	}
	cfg := DefaultConfig()
	cmd := p.command(name, &cfg)
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	cmd.SetArgs(args)
	err := cmd.Execute()
	if err == nil {
		return exitcode.OK
	}
	fmt.Fprintf(stderr, "%s: %v\n", name, err)
	code := exitcode.Of(err)
	if code == exitcode.Failure && strings.Contains(err.Error(), "unknown command") {
		code = exitcode.Usage // cobra.NoArgs: a stray argument
	}
	if code == exitcode.Usage {
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", name)
	}
	return code
}

// command is the worker's command, named name, configured into cfg.
func (p Program) command(name string, cfg *Config) *cobra.Command {
	carried := carriedList(p.Crawlers)
	cmd := &cobra.Command{
		Use:     name,
		Short:   "Run one Baton crawler instance (a Runner or a Backup Runner)",
		Version: version.String(),
		Long: name + ` runs one crawler instance of a Baton cluster.

It registers the instance in ZooKeeper, takes part in the election, and runs
its role (Runner, Primary or Secondary Backup Runner) as durable Temporal
workflows on its own task queue. Restarted with the same --name it resumes;
declared dead meanwhile, it rejoins as a backup.

Crawlers it carries: ` + carried + `.

Every flag can also be set with an environment variable, shown with it.

Exit codes (the same for baton):
  0 stopped cleanly (SIGTERM, Ctrl-C)
  1 failure at run time
  2 bad usage or configuration (nothing was started)
  5 ZooKeeper, Temporal or the job store unreachable within --connect-timeout

Secrets are read from files or the environment, never from the command
line: ZooKeeper digest credentials user:password from --zk-auth-file or
$BATON_ZK_AUTH, a Temporal API key from --temporal-api-key-file or
$BATON_TEMPORAL_API_KEY, and the mTLS private key from
--temporal-tls-key-file.`,
		Example: `  ` + name + ` --name sc-crawler_1 --runner 2 --backup 1
  BATON_NAME=sc-crawler_2 BATON_TIMERS=fast ` + name,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := flagenv.Bind(cmd.Flags()); err != nil {
				return exitcode.With(exitcode.Usage, err)
			}
			if err := cfg.ApplyProfile(cmd.Flags()); err != nil {
				return exitcode.With(exitcode.Usage, err)
			}
			if err := cfg.Validate(); err != nil {
				return exitcode.With(exitcode.Usage, fmt.Errorf("invalid configuration: %w", err))
			}
			crawlers, err := checkCrawlers(p.Crawlers)
			if err != nil {
				return exitcode.With(exitcode.Usage, err)
			}
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
			defer stop()
			return run(ctx, *cfg, crawlers)
		},
	}
	cmd.SetVersionTemplate(name + " {{.Version}}\ncrawlers: " + carried + "\n")
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return exitcode.With(exitcode.Usage, err) })
	cfg.AddFlags(cmd.Flags())
	flagenv.Document(cmd.Flags(), "BATON")
	return cmd
}

// carriedList names the crawlers a binary carries with their versions,
// the built-in one first: "builtin v1.2.0, shop 1.0".
func carriedList(list []*crawler.Crawler) string {
	names := []string{roles.BuiltinCrawler + " " + builtinVersion()}
	for _, c := range list {
		if c == nil {
			continue
		}
		n := c.Name()
		if v := c.Version(); v != "" {
			n += " " + v
		}
		names = append(names, n)
	}
	return strings.Join(names, ", ")
}

// builtinVersion is the version of the built-in crawler: the version of
// the Baton module the binary is built with (its -X version when set;
// the module's version in a worker binary of your own, whose main module
// is yours; "(devel)" for a build in Baton's repository).
func builtinVersion() string {
	if version.Version != "" {
		return version.Version
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "(devel)"
	}
	if info.Main.Path == batonModule && info.Main.Version != "" {
		return info.Main.Version
	}
	for _, d := range info.Deps {
		if d.Path == batonModule {
			if d.Replace != nil && d.Replace.Version != "" {
				return d.Replace.Version
			}
			return d.Version
		}
	}
	return "(devel)"
}

// batonModule is the path of Baton's module.
const batonModule = "github.com/batoncrawl/baton"

func newLogger(cfg Config) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(cfg.LogLevel))
	opts := &slog.HandlerOptions{Level: lvl}
	var h slog.Handler = slog.NewTextHandler(os.Stderr, opts)
	if cfg.LogFormat == "json" {
		h = slog.NewJSONHandler(os.Stderr, opts)
	}
	return slog.New(h).With("instance", cfg.Name, "group", cfg.Group)
}

// checkCrawlers validates the crawlers a worker binary registers and
// returns them by name: each valid, each name once.
func checkCrawlers(list []*crawler.Crawler) (map[string]*crawler.Crawler, error) {
	out := map[string]*crawler.Crawler{}
	for _, c := range list {
		if c == nil {
			return nil, errors.New("crawlers: nil crawler")
		}
		if err := c.Validate(); err != nil {
			return nil, fmt.Errorf("crawlers: %w", err)
		}
		if _, dup := out[c.Name()]; dup {
			return nil, fmt.Errorf("crawlers: %q registered twice", c.Name())
		}
		out[c.Name()] = c
	}
	return out, nil
}

// advertised is what the worker writes in its Crawlers znode: the built-in
// crawler (its version is the binary's) and the registered ones, by name.
func advertised(crawlers map[string]*crawler.Crawler) roles.Crawlers {
	cr := roles.Crawlers{List: []roles.CrawlerInfo{{Name: roles.BuiltinCrawler, Version: builtinVersion()}}}
	names := make([]string, 0, len(crawlers))
	for n := range crawlers {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		c := crawlers[n]
		ci := roles.CrawlerInfo{Name: n, Version: c.Version(), Labels: c.Labels()}
		for _, o := range c.OptionSpecs() {
			ci.Options = append(ci.Options, roles.CrawlerOption{Key: o.Key, Kind: o.Kind, Default: o.Default, Secret: o.Secret})
		}
		cr.List = append(cr.List, ci)
	}
	return cr
}

func run(ctx context.Context, cfg Config, crawlers map[string]*crawler.Crawler) error {
	log := newLogger(cfg)
	slog.SetDefault(log)
	applyGCPercent(cfg.GCPercent)
	metrics, err := startMetrics(cfg.MetricsAddr, cfg.MetricsJobGrace, log)
	if err != nil {
		return err
	}
	defer metrics.Close()
	stopPprof, err := startPprof(cfg.PprofAddr, log)
	if err != nil {
		return err
	}
	defer stopPprof()
	dctx, cancel := context.WithTimeout(ctx, cfg.ConnectTimeout)
	defer cancel()
	store, err := dialMetadata(dctx, cfg, log)
	if err != nil {
		return err
	}
	defer store.Close()
	tc, err := dialTemporal(dctx, cfg, log, metrics)
	if err != nil {
		return err
	}
	defer tc.Close()
	// The crawlers this binary carries, for the job assignment and the CLI
	// (a job's batches go only to Runners that carry its crawler).
	if err := metadata.NewCluster(store, cfg.ZK.Root, cfg.Group).SetCrawlers(dctx, cfg.Name, advertised(crawlers)); err != nil {
		return fmt.Errorf("advertise crawlers: %w", err)
	}
	if len(crawlers) > 0 {
		log.Info("crawlers", "carried", advertised(crawlers).List)
	}
	js, err := openJobStore(dctx, cfg, log, store)
	if err != nil {
		return err
	}
	defer js.Close()
	sealer, limits, err := groupKeys(dctx, cfg, log, store)
	if err != nil {
		return err
	}
	engine := crawl.NewEngine()
	defer engine.CloseRenderer() // the browsers of rendered pages, process groups and all
	if s, err := render.Sweep(""); err != nil || s.Groups+s.Dirs > 0 {
		log.Info("swept the browsers of stopped workers", "process_groups", s.Groups, "user_data_dirs", s.Dirs, "error", err)
	}
	if engine.Policy, err = cfg.Policy(); err != nil {
		return err
	}
	if cfg.DenyPrivate {
		log.Info("deny-private: every request of every job and Task refuses private, loopback and link-local addresses")
	}
	leaving := &atomic.Bool{}
	closer := instanceCloser{tc: tc}
	batches := &jobs.BatchRunner{Store: jobs.TypedSpecs(js), Pages: engine, Metrics: metrics.Baton, Concurrency: cfg.Concurrency, Sealer: sealer,
		Crawlers: crawlers, Limits: limits}
	deps := &cluster.Deps{Store: store, Root: cfg.ZK.Root, Batches: batches,
		Log: log, Metrics: metrics.Baton}
	// Items of this worker's crawlers go to their sinks beside the crawl.
	sinkCtx, stopSinks := context.WithCancel(ctx)
	defer stopSinks()
	// A worker carrying crawlers of its own marks their jobs delivered,
	// sinks or none.
	if len(crawlers) > 0 {
		d := &jobs.Deliverer{Store: js, Crawlers: crawlers, Group: cfg.Group, Holder: cfg.Name, Log: log.With("component", "sinks"),
			Metrics: metrics.Baton, Client: engine.Client(false), MaxBatchBytes: cfg.MaxSinkBatchBytes, MaxFailures: cfg.SinkMaxFailures}
		go d.Run(sinkCtx)
	}
	ws := &workerSet{tc: tc, log: log, leaving: leaving}
	defer ws.stop()
	// The group's job queue is served by its Runners only: a Backup starts
	// its worker there when it is first seen a Runner (it took a Task over).
	deps.OnRole = func(r roles.Role) {
		if r == roles.RoleRunner {
			ws.startLater(workflows.JobQueue(cfg.Group))
		}
	}
	acts := append(activitySet(deps, engine, cfg.MaxResultDetail, leaving, closer),
		&jobs.Activities{Store: js, Meta: store, Root: cfg.ZK.Root, Timers: cfg.Timers, Log: log, Metrics: metrics.Baton,
			Local: jobs.Local{Group: cfg.Group, Name: cfg.Name, Runner: batches}},
		&jobs.ScheduleActivities{Temporal: tc})
	queue := workflows.TaskQueue(cfg.Group, cfg.Name)
	useBuildIDAsChecksum()
	reclaimActivities(dctx, tc, cfg.Temporal.Namespace, cfg.Group, cfg.Name, log)
	ws.acts = acts
	if err := ws.start(queue); err != nil {
		return err
	}
	return runLifecycle(ctx, cfg, log, tc, queue, func() { leave(log, cfg, store, cfg.Member(), leaving, closer, ws.stop) })
}

// runLifecycle starts or resumes the instance's Lifecycle workflow on
// queue and waits for it; on SIGTERM (ctx done) it leaves the group. A
// Lifecycle closed by a peer that declared the instance dead is started
// again.
func runLifecycle(ctx context.Context, cfg Config, log *slog.Logger, tc client.Client, queue string, leaveGroup func()) error {
	for {
		run, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
			ID:                                       workflows.LifecycleID(cfg.Group, cfg.Name),
			TaskQueue:                                queue,
			WorkflowIDReusePolicy:                    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
			WorkflowExecutionErrorWhenAlreadyStarted: false,
			// The first workflow task comes back in the start's reply, to
			// this process's worker on queue: no dispatch through the
			// server's matching and no poll to wait for (the server falls
			// back to dispatching it when it does not start it eagerly).
			EnableEagerStart: true,
			TypedSearchAttributes: temporal.NewSearchAttributes(
				workflows.AttrCluster.ValueSet(cfg.Group), workflows.AttrCrawler.ValueSet(cfg.Name),
				workflows.AttrRole.ValueSet("lifecycle")),
			Memo: workflows.InstanceMemo(cfg.Group, cfg.Name, "lifecycle"),
		}, workflows.Lifecycle, workflows.LifecycleInput{Member: cfg.Member()})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("start lifecycle workflow: %w", err)
		}
		log.Info("worker running", "task_queue", queue, "workflow_id", run.GetID(), "run_id", run.GetRunID(),
			"runner", cfg.Runner, "backup", cfg.Backup, "timers", cfg.Timers.String())
		errc := make(chan error, 1)
		go func() { errc <- run.Get(ctx, nil) }()
		select {
		case <-ctx.Done():
			leaveGroup()
			return nil
		case err := <-errc:
			if temporal.IsTerminatedError(err) && ctx.Err() == nil {
				// Closed by a peer that declared this instance dead and took
				// its place (it was cut off, not dead): register again.
				log.Warn("this instance's lifecycle was closed by the cluster (declared dead); registering again", "err", err)
				continue
			}
			if err != nil && !errors.Is(err, context.Canceled) {
				return fmt.Errorf("lifecycle workflow ended: %w", err)
			}
			return nil
		}
	}
}

// activitySet returns the activities of every capability over deps, as
// the worker registers them (with the crawl jobs', jobs.Activities) on
// each of its task queues. The Runner fetches the requests of plain Tasks
// with fetcher (the crawl engine) and the default crawl options.
func activitySet(deps *cluster.Deps, fetcher crawl.Fetcher, maxResultDetail int, leaving *atomic.Bool, closer failover.InstanceCloser) []any {
	a := workflows.NewActivities(deps, fetcher)
	a.Failover.Closer = closer
	a.Runner.Options, a.Runner.MaxResultDetail, a.Runner.Leaving = crawl.DefaultOptions(), maxResultDetail, leaving
	a.Heartbeat.Leaving = leaving
	return a.All()
}

// leave takes the instance out of its group on SIGTERM (see
// scale.Leave): its running batch drains within --leave-timeout,
// its workflows are closed and its workers stopped, then it is removed
// from GroupState. If its Task is still pending it stops as a crash
// would: a backup takes the Task over.
func leave(log *slog.Logger, cfg Config, store metadata.Store, m cluster.Member, leaving *atomic.Bool, closer instanceCloser, stopWorkers func()) {
	if cfg.LeaveTimeout <= 0 {
		log.Info("shutting down without leaving the group (--leave-timeout 0): heartbeats end with Apparent Death")
		return
	}
	log.Info("shutting down: leaving the group (a running batch stops pulling URLs and drains)", "leave_timeout", cfg.LeaveTimeout)
	leaving.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), cfg.LeaveTimeout)
	defer cancel()
	if !scale.AwaitIdle(ctx, store, cfg.ZK.Root, m) {
		log.Warn("a plain Task is pending, or the batch did not drain within --leave-timeout: stopping as a crash would (heartbeats end with Apparent Death); a backup takes the Task over")
		return
	}
	if err := closer.CloseInstance(ctx, cfg.Group, cfg.Name, "left the cluster (SIGTERM)"); err != nil {
		log.Warn("could not close this instance's workflows", "err", err)
	}
	stopWorkers()
	res, err := scale.Leave(ctx, store, cfg.ZK.Root, m)
	switch {
	case err != nil:
		log.Warn("could not leave the group: a backup takes over when it finds the heartbeat stopped", "err", err)
	case !res.Left:
		log.Warn("did not leave the group", "reason", res.Reason)
	default:
		log.Info("left the group")
	}
}

// instanceCloser closes an instance's Lifecycle (its role workflows are
// its children, terminated with it) and its Heartbeat workflow.
type instanceCloser struct{ tc client.Client }

// CloseInstance implements failover.InstanceCloser.
func (c instanceCloser) CloseInstance(ctx context.Context, group, name, reason string) error {
	var errs []error
	for _, id := range workflows.InstanceWorkflowIDs(group, name) {
		err := c.tc.TerminateWorkflow(ctx, id, "", reason)
		var nf *serviceerror.NotFound
		if err != nil && !errors.As(err, &nf) {
			errs = append(errs, fmt.Errorf("terminate %s: %w", id, err))
		}
	}
	return errors.Join(errs...)
}

// EnsureSearchAttributes registers Baton's custom search attributes
// (Keyword) in the namespace, ignoring those already there.
func EnsureSearchAttributes(ctx context.Context, c client.Client, ns string) error {
	attrs := map[string]enumspb.IndexedValueType{}
	for _, n := range workflows.SearchAttributeNames {
		attrs[n] = enumspb.INDEXED_VALUE_TYPE_KEYWORD
	}
	_, err := c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		SearchAttributes: attrs, Namespace: ns,
	})
	var exists *serviceerror.AlreadyExists
	if err != nil && !errors.As(err, &exists) {
		return err
	}
	return nil
}
