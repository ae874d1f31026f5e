package worker

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"go.temporal.io/sdk/client"

	"github.com/batoncrawl/baton/activities/cluster"
	"github.com/batoncrawl/baton/activities/connect"
	"github.com/batoncrawl/baton/activities/connect/security"
	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/crawler"
	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/activities/jobs/sqlstore"
	"github.com/batoncrawl/baton/activities/metadata"
	"github.com/batoncrawl/baton/activities/telemetry"
	"github.com/batoncrawl/baton/roles"
)

// Config is everything a worker needs; every field has a flag and an
// environment variable.
type Config struct {
	Group, Name    string
	Runner, Backup int
	Capacity       int
	Profile        string
	Timers         roles.Timers
	// ZK and Temporal are where ZooKeeper and Temporal are, and where
	// their secrets are (files, or the environment): never the secrets
	// themselves.
	ZK               connect.ZooKeeper
	ZKSessionTimeout time.Duration
	Temporal         connect.Temporal
	// TemporalCompression is the gRPC compression of the calls to
	// Temporal: auto (none to a frontend on this machine, else gzip),
	// gzip or none.
	TemporalCompression string
	LogFormat           string
	LogLevel            string
	MaxResultDetail     int
	DataDir             string
	// Store is the job store: "" for SQLite under DataDir, or a
	// postgres:// DSN (its password from StoreSecurity).
	Store string
	// StoreMaxConns is the PostgreSQL pool size of the process (0: the
	// store's default).
	StoreMaxConns int
	// Concurrency is how many requests a Runner keeps in flight.
	Concurrency int
	// DenyPrivate is the operator's --deny-private: every request of every
	// job and plain Task this worker runs is refused private, loopback and
	// link-local addresses (crawl.Engine.DenyPrivate), typed seeds
	// included, whatever the job asks.
	DenyPrivate bool
	// AllowNets are address ranges --deny-private does not refuse (an
	// internal site or proxy the operator means jobs to reach); DenyNets
	// are ranges every request refuses, whatever the job asks
	// (crawl.Policy).
	AllowNets, DenyNets []string
	// LeaveTimeout bounds a clean leave on SIGTERM: the running batch
	// drains and the instance leaves its group within it, else it stops
	// as a crash would (a backup takes its Task over).
	LeaveTimeout time.Duration
	MetricsAddr  string // host:port of /metrics; "" turns metrics off
	// MetricsJobGrace is how long a crawl job's series stay exported
	// after its last activity on this worker (telemetry.Options.JobGrace).
	MetricsJobGrace time.Duration
	// PprofAddr is host:port of Go's profiler (/debug/pprof/); "" (the
	// default) turns it off. Never served on MetricsAddr.
	PprofAddr string
	// GCPercent is the Go garbage collector's target (GOGC) in this
	// worker: how far the heap grows, in percent of the live heap, before
	// a collection. 0 leaves the runtime's (the GOGC environment variable,
	// else Go's 100). See DefaultGCPercent.
	GCPercent int
	// ConnectTimeout bounds reaching ZooKeeper, Temporal and the job store
	// at start.
	ConnectTimeout time.Duration
	// StoreSecurity names where the store's password is (a file, or the
	// environment): never the password itself.
	StoreSecurity security.Store
	// SecretsKeyFile is the group's secrets key (jobs.Sealer), shared by
	// its workers and CLIs; "" is DataDir/secrets.key, made at first start.
	SecretsKeyFile string
	// The operator limits on the crawl jobs this worker runs (jobs.Limits;
	// MaxResultDetail is the one of plain Tasks): a job's max_body_bytes,
	// timeout and delay above a cap are refused (0: no cap), and its
	// bodies directory must stay under BodiesRoot.
	MaxJobBodyBytes int64
	MaxJobTimeout   time.Duration
	MaxJobDelay     time.Duration
	// BodiesRoot is the directory the jobs' --bodies-dir must stay under
	// (a relative one is resolved under it); "" is DataDir/bodies, "/"
	// anywhere.
	BodiesRoot string
	// MaxPageItemBytes and MaxAbandonedHandlers bound user crawler code
	// (jobs.Limits).
	MaxPageItemBytes     int64
	MaxAbandonedHandlers int
	MaxCommitBytes       int64
	// MaxSinkBatchBytes caps the bytes of a sink's batch; SinkMaxFailures
	// is how many refusals in a row dead-letter a batch of a sink that
	// does not say (jobs.Deliverer).
	MaxSinkBatchBytes int64
	SinkMaxFailures   int
}

// DefaultBodiesDir is the bodies root under the data directory when
// --bodies-root is not given.
const DefaultBodiesDir = "bodies"

// BodiesRootPath is the bodies root in use, absolute.
func (c Config) BodiesRootPath() (string, error) {
	root := c.BodiesRoot
	if root == "" {
		root = filepath.Join(c.DataDir, DefaultBodiesDir)
	}
	return filepath.Abs(root)
}

// Limits are the worker's operator limits on the crawl jobs it runs.
func (c Config) Limits() (jobs.Limits, error) {
	root, err := c.BodiesRootPath()
	if err != nil {
		return jobs.Limits{}, fmt.Errorf("--bodies-root: %w", err)
	}
	if c.MaxPageItemBytes < 0 || c.MaxAbandonedHandlers < 0 || c.MaxCommitBytes < 0 {
		return jobs.Limits{}, errors.New("--max-page-item-bytes, --max-abandoned-handlers and --max-commit-bytes must be >= 0")
	}
	return jobs.Limits{MaxBodyBytes: c.MaxJobBodyBytes, MaxTimeout: c.MaxJobTimeout, MaxDelay: c.MaxJobDelay, BodiesRoot: root,
		MaxPageItemBytes: c.MaxPageItemBytes, MaxAbandonedHandlers: c.MaxAbandonedHandlers, MaxCommitBytes: c.MaxCommitBytes}, nil
}

// Policy is the operator's rule for the addresses this worker dials on a
// job's behalf (--deny-private, --allow-net, --deny-net).
func (c Config) Policy() (crawl.Policy, error) {
	allow, err := crawl.ParsePrefixes(c.AllowNets)
	if err != nil {
		return crawl.Policy{}, fmt.Errorf("--allow-net: %w", err)
	}
	deny, err := crawl.ParsePrefixes(c.DenyNets)
	if err != nil {
		return crawl.Policy{}, fmt.Errorf("--deny-net: %w", err)
	}
	return crawl.Policy{DenyPrivate: c.DenyPrivate, Allow: allow, Deny: deny}, nil
}

// SecretsKeyPath is the secrets key file in use.
func (c Config) SecretsKeyPath() string {
	if c.SecretsKeyFile != "" {
		return c.SecretsKeyFile
	}
	return filepath.Join(c.DataDir, jobs.DefaultSecretsKeyFile)
}

// DefaultConfig returns the reference's defaults on a local stack.
func DefaultConfig() Config {
	return Config{
		Group: roles.DefaultGroup, Runner: 2, Backup: 1, Capacity: 2, Profile: "default",
		Timers: roles.DefaultTimers(), ZK: connect.DefaultZooKeeper(),
		ZKSessionTimeout: 10 * time.Second, Temporal: connect.DefaultTemporal(),
		LogFormat: "text", LogLevel: "info", MaxResultDetail: 100, DataDir: "baton-data",
		Concurrency: jobs.DefaultConcurrency, MetricsAddr: defaultMetricsAddr, MetricsJobGrace: telemetry.DefaultJobGrace, ConnectTimeout: 30 * time.Second,
		LeaveTimeout: 20 * time.Second, GCPercent: defaultGCPercent(), TemporalCompression: CompressionAuto,
	}
}

// AddFlags registers the config's flags on fs.
func (c *Config) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.Group, "group", c.Group, "cluster group name")
	fs.StringVar(&c.Name, "name", c.Name, "crawler name <base><sep><index>, sep '_' or '-' (e.g. sc-crawler_1); required")
	fs.IntVar(&c.Runner, "runner", c.Runner, "number of Runners in the group")
	fs.IntVar(&c.Backup, "backup", c.Backup, "number of Backup Runners in the group (0: All-are-Runner mode)")
	fs.IntVar(&c.Capacity, "capacity", c.Capacity, "All-are-Runner mode: most Tasks one instance runs at once (own + taken over)")
	fs.StringVar(&c.Profile, "timers", c.Profile, "timer profile: default (the reference's) or fast; the flags below override it")
	fs.DurationVar(&c.Timers.UpdateTime, "update-time", c.Timers.UpdateTime, "heartbeat interval (update_time)")
	fs.DurationVar(&c.Timers.UpdateTimeout, "update-timeout", c.Timers.UpdateTimeout, "heartbeat age counted as late (update_timeout)")
	fs.IntVar(&c.Timers.HeartRhythmTimeout, "heart-rhythm-timeout", c.Timers.HeartRhythmTimeout, "late checks that make an instance dead (heart_rhythm_timeout)")
	fs.IntVar(&c.Timers.ResetTimeout, "reset-timeout", c.Timers.ResetTimeout, "healthy checks in a row that clear the late count (reset_timeout)")
	fs.DurationVar(&c.Timers.CheckTask, "check-task", c.Timers.CheckTask, "safety re-read of the Task while waiting (a ZooKeeper watch wakes it first)")
	fs.DurationVar(&c.Timers.CheckCrawlerState, "check-crawler-state", c.Timers.CheckCrawlerState, "heartbeat check interval of backups (check_crawler_state)")
	fs.DurationVar(&c.Timers.CheckStandbyID, "check-standby-id", c.Timers.CheckStandbyID, "safety re-read of standby_id (a ZooKeeper watch wakes it first)")
	c.ZK.AddFlags(fs)
	fs.DurationVar(&c.ZKSessionTimeout, "zk-session-timeout", c.ZKSessionTimeout, "ZooKeeper session timeout")
	c.Temporal.AddFlags(fs)
	fs.StringVar(&c.TemporalCompression, "temporal-compression", c.TemporalCompression, "gRPC compression of the calls to Temporal: auto (none to a frontend on this machine, else gzip), gzip (a slow or billed link) or none (spares both ends the CPU)")
	fs.StringVar(&c.LogFormat, "log-format", c.LogFormat, "log format: text or json")
	fs.StringVar(&c.LogLevel, "log-level", c.LogLevel, "log level: debug, info, warn or error")
	fs.StringVar(&c.MetricsAddr, "metrics-addr", c.MetricsAddr, "serve Prometheus metrics at http://<host:port>/metrics (empty: off)")
	fs.DurationVar(&c.MetricsJobGrace, "metrics-job-grace", c.MetricsJobGrace, "drop a crawl job's series (crawl_job label) from /metrics once the job has been idle on this worker this long (Prometheus keeps what it scraped)")
	fs.StringVar(&c.PprofAddr, "pprof-addr", c.PprofAddr, "serve Go's profiler at http://<host:port>/debug/pprof/ (default empty: off; keep it on loopback)")
	fs.IntVar(&c.GCPercent, "gc-percent", c.GCPercent, "Go garbage collector target of this worker (GOGC): heap growth in % of the live heap before a collection; higher spends memory to save CPU (0: the runtime's, GOGC or 100; default 400 unless GOGC is set)")
	fs.StringVar(&c.DataDir, "data-dir", c.DataDir, "directory of the embedded SQLite job store (crawl frontiers and results); one host's workers share it")
	fs.StringVar(&c.Store, "store", c.Store, "job store: empty for SQLite under --data-dir, or postgres://user@host:port/database for workers on several machines")
	c.StoreSecurity.AddFlags(fs)
	fs.StringVar(&c.SecretsKeyFile, "secrets-key-file", c.SecretsKeyFile, "the group's private key for crawl jobs' secrets (cookies, authorization, headers, proxy credentials, URL secrets, secret crawler options), the same file on every worker; submitters seal with its public key, published in ZooKeeper (default <data-dir>/secrets.key, made 0600 at first start)")
	fs.IntVar(&c.StoreMaxConns, "store-max-conns", sqlstore.DefaultMaxConns, "PostgreSQL connections this worker keeps at most (keep workers × this below the server's max_connections)")
	fs.IntVar(&c.Concurrency, "concurrency", c.Concurrency, "requests a Runner keeps in flight (per-domain --parallelism and delay of each job still apply)")
	fs.BoolVar(&c.DenyPrivate, "deny-private", c.DenyPrivate, "refuse private, loopback and link-local addresses for every request of every job and Task on this worker (seeds, redirects, sitemaps, robots.txt, links, the job's proxy, crawler start hooks, handlers' own requests and sinks), whatever the job asks")
	fs.StringSliceVar(&c.AllowNets, "allow-net", c.AllowNets, "address range (CIDR or address) --deny-private lets every job reach, e.g. an internal proxy (repeatable or comma-separated)")
	fs.StringSliceVar(&c.DenyNets, "deny-net", c.DenyNets, "address range (CIDR or address) no request of any job, Task, start hook or sink of this worker may reach, dialled or as a job's proxy (repeatable or comma-separated)")
	fs.DurationVar(&c.ConnectTimeout, "connect-timeout", c.ConnectTimeout, "give up reaching ZooKeeper, Temporal or the job store at start after this long (exit code 5)")
	fs.DurationVar(&c.LeaveTimeout, "leave-timeout", c.LeaveTimeout, "on SIGTERM: how long the running batch may take to drain before the instance leaves its group (0: stop at once, as a crash; a backup takes the Task over)")
	fs.IntVar(&c.MaxResultDetail, "max-result-detail", c.MaxResultDetail, "operator limit: most result_detail entries kept in a plain Task's znode (0: all)")
	fs.Int64Var(&c.MaxJobBodyBytes, "max-job-body-bytes", c.MaxJobBodyBytes, "operator limit: refuse crawl jobs whose --max-body is above this many bytes (0: no cap; a job's default is lowered to it)")
	fs.DurationVar(&c.MaxJobTimeout, "max-job-timeout", c.MaxJobTimeout, "operator limit: refuse crawl jobs whose --timeout (per request) is above this (0: no cap; a job's default is lowered to it)")
	fs.DurationVar(&c.MaxJobDelay, "max-job-delay", c.MaxJobDelay, "operator limit: refuse crawl jobs whose --delay is above this (0: no cap)")
	fs.Int64Var(&c.MaxPageItemBytes, "max-page-item-bytes", c.MaxPageItemBytes, "operator limit: the most bytes of items (encoded JSON) one page of a user crawler may push in total; a page past it fails with the reason (0: "+strconv.Itoa(crawler.DefaultMaxPageItemBytes)+", 8 MiB)")
	fs.IntVar(&c.MaxAbandonedHandlers, "max-abandoned-handlers", c.MaxAbandonedHandlers, "operator limit: user crawler handlers past their time budget that may still run on this worker; at the cap its Runner takes no pages of user crawlers until some return (0: "+strconv.Itoa(jobs.DefaultMaxAbandonedHandlers)+")")
	fs.Int64Var(&c.MaxCommitBytes, "max-commit-bytes", c.MaxCommitBytes, "operator limit: the most bytes of items and stored bodies one group commit writes; a larger group is committed in several transactions (0: "+strconv.Itoa(jobs.DefaultMaxCommitBytes)+", 64 MiB)")
	fs.Int64Var(&c.MaxSinkBatchBytes, "max-sink-batch-bytes", c.MaxSinkBatchBytes, "operator limit: the most bytes of items one delivery to a sink of a user crawler carries, whatever the sink asks (0: "+strconv.Itoa(jobs.DefaultMaxSinkBatchBytes)+", 16 MiB); an item larger goes alone")
	fs.IntVar(&c.SinkMaxFailures, "sink-max-failures", c.SinkMaxFailures, "refusals in a row after which a batch of items is set aside as a dead letter (baton status; baton sink skip|retry) and the items after it delivered, for sinks that do not set their own (0: "+strconv.Itoa(crawler.DefaultSinkMaxFailures)+")")
	fs.StringVar(&c.BodiesRoot, "bodies-root", c.BodiesRoot, "operator limit: the directory crawl jobs' --bodies-dir must stay under, a relative one resolved under it (default <data-dir>/bodies; / for anywhere)")
}

// ApplyProfile replaces the timers not set explicitly with the profile's.
func (c *Config) ApplyProfile(fs *pflag.FlagSet) error {
	var p roles.Timers
	switch c.Profile {
	case "default":
		p = roles.DefaultTimers()
	case "fast":
		p = roles.FastTimers()
	default:
		return fmt.Errorf("--timers: unknown profile %q (want default or fast)", c.Profile)
	}
	set := func(name string, dst, src any) {
		if fs.Changed(name) {
			return
		}
		switch d := dst.(type) {
		case *time.Duration:
			*d = *src.(*time.Duration)
		case *int:
			*d = *src.(*int)
		}
	}
	set("update-time", &c.Timers.UpdateTime, &p.UpdateTime)
	set("update-timeout", &c.Timers.UpdateTimeout, &p.UpdateTimeout)
	set("heart-rhythm-timeout", &c.Timers.HeartRhythmTimeout, &p.HeartRhythmTimeout)
	set("reset-timeout", &c.Timers.ResetTimeout, &p.ResetTimeout)
	set("check-task", &c.Timers.CheckTask, &p.CheckTask)
	set("check-crawler-state", &c.Timers.CheckCrawlerState, &p.CheckCrawlerState)
	set("check-standby-id", &c.Timers.CheckStandbyID, &p.CheckStandbyID)
	return nil
}

// Validate names the flag of the first bad setting.
func (c Config) Validate() error {
	if c.Name == "" {
		return errors.New("--name: required (e.g. --name sc-crawler_1, or BATON_NAME)")
	}
	if _, err := roles.ParseName(c.Name); err != nil {
		return fmt.Errorf("--name: %w", err)
	}
	if c.Group == "" || strings.ContainsAny(c.Group, "/ ") {
		return fmt.Errorf("--group: %q must be non-empty without '/' or spaces", c.Group)
	}
	if _, err := c.Policy(); err != nil {
		return err
	}
	if c.Runner < 1 {
		return fmt.Errorf("--runner: is %d, must be >= 1", c.Runner)
	}
	if c.Backup < 0 {
		return fmt.Errorf("--backup: is %d, must be >= 0", c.Backup)
	}
	if c.Capacity < 1 {
		return fmt.Errorf("--capacity: is %d, must be >= 1", c.Capacity)
	}
	if err := c.Timers.Validate(); err != nil {
		var fe *roles.FieldError
		if errors.As(err, &fe) { // Timers.update_time is --update-time
			return fmt.Errorf("--%s: %s", strings.ReplaceAll(fe.Field, "_", "-"), strings.ReplaceAll(fe.Msg, "update_time", "--update-time"))
		}
		return err
	}
	if err := c.ZK.Validate(); err != nil {
		return err
	}
	if err := c.Temporal.Validate(); err != nil {
		return err
	}
	if err := checkCompression(c.TemporalCompression); err != nil {
		return err
	}
	if !strings.HasPrefix(c.ZK.Root, "/") || strings.HasSuffix(c.ZK.Root, "/") {
		return fmt.Errorf("--zk-root: %q must start with '/' and not end with one", c.ZK.Root)
	}
	if c.ZKSessionTimeout <= 0 {
		return fmt.Errorf("--zk-session-timeout: is %v, must be > 0", c.ZKSessionTimeout)
	}
	if c.ConnectTimeout <= 0 {
		return fmt.Errorf("--connect-timeout: is %v, must be > 0", c.ConnectTimeout)
	}
	if c.LeaveTimeout < 0 {
		return fmt.Errorf("--leave-timeout: %v, must be >= 0", c.LeaveTimeout)
	}
	if c.MetricsJobGrace <= 0 {
		return fmt.Errorf("--metrics-job-grace: is %v, must be > 0", c.MetricsJobGrace)
	}
	if c.PprofAddr != "" && c.PprofAddr == c.MetricsAddr {
		return fmt.Errorf("--pprof-addr: %q is --metrics-addr too: the profiler has an address of its own", c.PprofAddr)
	}
	if c.GCPercent < 0 {
		return fmt.Errorf("--gc-percent: is %d, must be >= 0 (0: the runtime's; the collector is never turned off)", c.GCPercent)
	}
	if c.Concurrency < 1 {
		return fmt.Errorf("--concurrency: is %d, must be >= 1", c.Concurrency)
	}
	for _, b := range []struct {
		flag string
		bad  bool
		val  any
	}{
		{"max-job-body-bytes", c.MaxJobBodyBytes < 0, c.MaxJobBodyBytes},
		{"max-job-timeout", c.MaxJobTimeout < 0, c.MaxJobTimeout},
		{"max-job-delay", c.MaxJobDelay < 0, c.MaxJobDelay},
	} {
		if b.bad {
			return fmt.Errorf("--%s: is %v, must be >= 0 (0: no cap)", b.flag, b.val)
		}
	}
	if c.MaxSinkBatchBytes < 0 || c.SinkMaxFailures < 0 {
		return fmt.Errorf("--max-sink-batch-bytes (%d) and --sink-max-failures (%d) must be >= 0 (0: the default)", c.MaxSinkBatchBytes, c.SinkMaxFailures)
	}
	if _, err := c.Limits(); err != nil {
		return err
	}
	if err := c.StoreConfig("").Validate(); err != nil {
		return fmt.Errorf("--%w", err) // sqlstore names data-dir or store
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		return fmt.Errorf("--log-format: %q (want text or json)", c.LogFormat)
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(c.LogLevel)); err != nil {
		return fmt.Errorf("--log-level: %q (want debug, info, warn or error)", c.LogLevel)
	}
	// Secrets' files and variables are read now: a bad one fails before
	// any connection is tried.
	if err := c.ZK.Auth.Check(); err != nil {
		return err
	}
	if err := c.Temporal.Security.Check(); err != nil {
		return err
	}
	if _, err := c.StoreSecurity.Password(); err != nil {
		return err
	}
	return nil
}

// StoreConfig is the job store's setting, with its password.
func (c Config) StoreConfig(password string) sqlstore.Config {
	return sqlstore.Config{Store: c.Store, DataDir: c.DataDir, Password: password, MaxConns: c.StoreMaxConns, Warm: true}
}

// Member is the activities' view of this instance.
func (c Config) Member() cluster.Member {
	return cluster.Member{Group: c.Group, Name: c.Name, Runner: c.Runner, Backup: c.Backup, Timers: c.Timers, Capacity: c.Capacity}
}

// ZooKeeper returns the store config, with the credentials and log for
// connection events.
func (c Config) ZooKeeper(log *slog.Logger) (metadata.ZooKeeperConfig, error) {
	z, err := c.ZK.Config(log)
	if err != nil {
		return z, err
	}
	z.SessionTimeout = c.ZKSessionTimeout
	return z, nil
}

// TemporalOptions returns the Temporal client's options, logging to log and
// reporting to metrics.
func (c Config) TemporalOptions(log *slog.Logger, metrics client.MetricsHandler) (client.Options, error) {
	o, err := c.Temporal.Options(log)
	if err != nil {
		return o, err
	}
	o.MetricsHandler = metrics
	o.ConnectionOptions.GrpcCompression = grpcCompression(c.TemporalCompression, c.Temporal.Address)
	return o, nil
}
