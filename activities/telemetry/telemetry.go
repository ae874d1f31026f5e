// Package telemetry holds Baton's own Prometheus metrics: pages fetched by
// status class, bytes, fetch latency, retries and robots.txt refusals,
// the URLs queued in the frontier, fail-overs, dead-peer detection time,
// peers' heartbeat age and Tasks in flight.
//
// A worker creates one Metrics on the registry it serves at /metrics and
// hands it to the activities. Every method is safe on a nil *Metrics and
// then does nothing, so unit tests and in-memory setups need no registry.
//
// The series labelled with a crawl job (LabelJob) are bounded: a job's
// series are exported while the job is active on this worker, and
// dropped once it has been idle here for the grace period (New's
// Options.JobGrace, the worker's --metrics-job-grace); a gauge of the
// frontier, which another worker may be updating meanwhile, is dropped
// once it has not been refreshed for QueuedTTL. Prometheus keeps what it
// scraped: dropping a finished job's series ends the series, it does not
// erase its history. Without this every job ever run stayed a series of
// every Runner that fetched a page of it, for the life of the process.
package telemetry

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// DefaultJobGrace is how long a job's series stay exported after its last
// activity on this worker, by default: longer than the rate windows of
// the dashboard and the README's queries (5 m), so that a job's rates end
// at zero before its series end.
const DefaultJobGrace = 10 * time.Minute

// QueuedTTL is how long a job's queued-URLs gauge stays exported without
// being refreshed: its job's supervisor refreshes it at least every 5 s,
// on whichever worker it runs; a worker that no longer supervises the job
// drops its stale value.
const QueuedTTL = 30 * time.Second

// Options tune New.
type Options struct {
	// JobGrace is how long a job's series stay after its last activity
	// here; 0 means DefaultJobGrace.
	JobGrace time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Page classes of baton_pages_total.
const (
	Class2xx   = "2xx"
	Class3xx   = "3xx"
	Class4xx   = "4xx"
	Class5xx   = "5xx"
	ClassError = "error" // no usable HTTP status: transport error, timeout, robots.txt, invalid request, body too large
)

// Fail-over kinds of baton_failovers_total: the role the dead peer had.
const (
	KindRunner = "runner"
	KindBackup = "backup"
)

// LabelJob is the label of the page metrics naming the crawl job ("" for
// the pages of a Task). It is not "job": Prometheus gives every scraped
// series a "job" label of its own (the scrape job), and would rename ours
// to "exported_job".
const LabelJob = "crawl_job"

// Metrics is the set of Baton's collectors. The zero value is not usable:
// use New, or a nil *Metrics for none.
type Metrics struct {
	pages   *prometheus.CounterVec
	handler *prometheus.CounterVec
	items   *prometheus.CounterVec
	// abandoned counts handlers abandoned past their budget;
	// abandonedNow is how many still run.
	abandoned    *prometheus.CounterVec
	abandonedNow prometheus.Gauge
	sinks        *prometheus.CounterVec
	bytes        *prometheus.CounterVec
	fetch        *prometheus.HistogramVec
	retries      *prometheus.CounterVec
	robots       *prometheus.CounterVec
	queued       *prometheus.GaugeVec
	failovers    *prometheus.CounterVec
	detection    prometheus.Histogram
	peerAge      *prometheus.GaugeVec
	inFlight     prometheus.Gauge

	grace time.Duration
	now   func() time.Time
	mu    sync.Mutex
	// active is when each job's series were last touched; refreshed when
	// each job's queued gauge was last set.
	active    map[string]time.Time
	refreshed map[string]time.Time
}

// New creates Baton's collectors and registers them on reg, with the
// default Options.
func New(reg prometheus.Registerer) (*Metrics, error) {
	return NewWith(reg, Options{})
}

// NewWith is New with opts.
func NewWith(reg prometheus.Registerer, opts Options) (*Metrics, error) {
	if opts.JobGrace <= 0 {
		opts.JobGrace = DefaultJobGrace
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	m := &Metrics{grace: opts.JobGrace, now: opts.Now, active: map[string]time.Time{}, refreshed: map[string]time.Time{},
		pages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "baton_pages_total",
			Help: "Pages fetched by Runners, by class (2xx, 3xx, 4xx, 5xx, or error: no usable HTTP status) and crawl job (empty for a Task's pages).",
		}, []string{"class", LabelJob}),
		handler: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "baton_handler_errors_total",
			Help: "Pages failed by a user crawler's handler (an error, a panic or its time budget), by crawler.",
		}, []string{"crawler"}),
		items: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "baton_items_total",
			Help: "Items pushed by a user crawler's pages and handed to the store with them, by crawler.",
		}, []string{"crawler"}),
		sinks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "baton_sink_deliveries_total",
			Help: "Deliveries of items to a sink, by sink and result (ok, error).",
		}, []string{"sink", "result"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "baton_page_bytes_total",
			Help: "Bytes of the page bodies fetched by Runners, by crawl job.",
		}, []string{LabelJob}),
		fetch: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "baton_fetch_duration_seconds",
			Help:    "Time to fetch one page (for crawl jobs: politeness waits and retries included), by crawl job.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{LabelJob}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "baton_retries_total",
			Help: "Retries of transient failures (timeouts, connection errors, 429, 5xx): attempts beyond the first of the pages fetched by Runners, by crawl job.",
		}, []string{LabelJob}),
		robots: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "baton_robots_refusals_total",
			Help: "URLs not fetched because robots.txt disallows them for the job's User-Agent, by crawl job.",
		}, []string{LabelJob}),
		queued: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "baton_frontier_queued_urls",
			Help: "URLs waiting in a crawl job's frontier, as the job's supervisor on this worker last read them (dropped 30 s after its last read here: take max by crawl_job across workers).",
		}, []string{LabelJob}),
		failovers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "baton_failovers_total",
			Help: "Dead peers claimed by this instance for a fail-over, by the role the dead peer had: runner or backup.",
		}, []string{"kind"}),
		detection: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "baton_detection_seconds",
			Help:    "Heartbeat age of a peer when this instance declared it dead.",
			Buckets: []float64{.1, .25, .5, 1, 2, 3, 4, 5, 7.5, 10, 15, 30, 60},
		}),
		peerAge: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "baton_peer_heartbeat_age_seconds",
			Help: "Age of each watched peer's heartbeat at this instance's last check.",
		}, []string{"peer"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "baton_tasks_in_flight",
			Help: "Tasks this instance is running now.",
		}),
	}
	// The job-labelled vectors are collected through jobCollector, which
	// drops the series of idle jobs first.
	m.abandoned = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "baton_handlers_abandoned_total",
		Help: "User crawler handlers abandoned past their time budget (their goroutines run on until they return), by crawler.",
	}, []string{"crawler"})
	m.abandonedNow = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "baton_handlers_abandoned",
		Help: "User crawler handlers past their time budget still running in this worker, as its last page of a user crawler saw them (at --max-abandoned-handlers its Runner takes no pages of user crawlers).",
	})
	for _, c := range []prometheus.Collector{m.handler, m.items, m.sinks, jobCollector{m}, m.failovers, m.detection, m.peerAge, m.inFlight, m.abandoned, m.abandonedNow} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	// Every fail-over kind is present from the start, so increases have
	// series to work on before the first fail-over. The job-labelled
	// series exist once a job (or a Task, crawl_job="") has pages here:
	// none is made up for no job.
	for _, k := range []string{KindRunner, KindBackup} {
		m.failovers.WithLabelValues(k)
	}
	return m, nil
}

// jobVecs are the vectors labelled with a crawl job, whose series are
// dropped by sweep.
func (m *Metrics) jobVecs() []interface {
	prometheus.Collector
	DeletePartialMatch(prometheus.Labels) int
} {
	return []interface {
		prometheus.Collector
		DeletePartialMatch(prometheus.Labels) int
	}{m.pages, m.bytes, m.fetch, m.retries, m.robots, m.queued}
}

// jobCollector collects the job-labelled vectors, after dropping the
// series of the jobs idle for longer than the grace period (and the
// queued gauges not refreshed within QueuedTTL).
type jobCollector struct{ m *Metrics }

func (c jobCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, v := range c.m.jobVecs() {
		v.Describe(ch)
	}
}

func (c jobCollector) Collect(ch chan<- prometheus.Metric) {
	c.m.sweep()
	for _, v := range c.m.jobVecs() {
		v.Collect(ch)
	}
}

// touch records activity of job now.
func (m *Metrics) touch(job string) {
	m.mu.Lock()
	m.active[job] = m.now()
	m.mu.Unlock()
}

// sweep drops the series of the jobs idle for longer than the grace
// period, and the queued gauges not refreshed within QueuedTTL.
func (m *Metrics) sweep() {
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	for job, at := range m.refreshed {
		if now.Sub(at) > QueuedTTL {
			m.queued.DeleteLabelValues(job)
			delete(m.refreshed, job)
		}
	}
	for job, at := range m.active {
		if now.Sub(at) <= m.grace {
			continue
		}
		for _, v := range m.jobVecs() {
			v.DeletePartialMatch(prometheus.Labels{LabelJob: job})
		}
		delete(m.active, job)
		delete(m.refreshed, job)
	}
}

// Class is the class of a page: its HTTP status class, or "error" when it
// failed without a 4xx or 5xx status (the failure is not the server's
// answer) or has no status at all.
func Class(status int, failed bool) string {
	switch {
	case status >= 500 && status < 600:
		return Class5xx
	case status >= 400 && status < 500:
		return Class4xx
	case failed:
		return ClassError
	case status >= 300 && status < 400:
		return Class3xx
	case status >= 200 && status < 300:
		return Class2xx
	default:
		return ClassError
	}
}

// Page records one fetched page of a crawl job ("" for a Task's page): its
// HTTP status (0 if none), whether it failed, its body size and how long
// the fetch took.
func (m *Metrics) Page(job string, status int, failed bool, bytes int64, d time.Duration) {
	if m == nil {
		return
	}
	m.touch(job)
	m.pages.WithLabelValues(Class(status, failed), job).Inc()
	if bytes > 0 {
		m.bytes.WithLabelValues(job).Add(float64(bytes))
	}
	m.fetch.WithLabelValues(job).Observe(d.Seconds())
}

// PageError records a request of a crawl job ("" for a Task) that failed before anything was fetched (an
// invalid request, a page robots.txt disallows): class error, no bytes, no
// fetch time.
func (m *Metrics) PageError(job string) {
	if m == nil {
		return
	}
	m.touch(job)
	m.pages.WithLabelValues(ClassError, job).Inc()
}

// Retries records the retries of one page of a crawl job ("" for a
// Task): its attempts beyond the first (none when attempts <= 1).
func (m *Metrics) Retries(job string, attempts int) {
	if m == nil || attempts <= 1 {
		return
	}
	m.touch(job)
	m.retries.WithLabelValues(job).Add(float64(attempts - 1))
}

// RobotsRefusal records a URL of a crawl job ("" for a Task) that
// robots.txt disallows: it is not fetched.
func (m *Metrics) RobotsRefusal(job string) {
	if m == nil {
		return
	}
	m.touch(job)
	m.robots.WithLabelValues(job).Inc()
}

// Queued sets the URLs waiting in a crawl job's frontier, as its
// supervisor read them; the gauge is dropped once not set again within
// QueuedTTL (the supervisor moved to another worker, or the job ended).
func (m *Metrics) Queued(job string, n int) {
	if m == nil {
		return
	}
	m.mu.Lock()
	now := m.now()
	m.active[job], m.refreshed[job] = now, now
	m.mu.Unlock()
	m.queued.WithLabelValues(job).Set(float64(n))
}

// HandlerError records a page failed by the handler of crawler.
func (m *Metrics) HandlerError(crawler string) {
	if m == nil {
		return
	}
	m.handler.WithLabelValues(crawler).Inc()
}

// HandlerAbandoned records a handler of crawler abandoned past its
// budget.
func (m *Metrics) HandlerAbandoned(crawler string) {
	if m == nil {
		return
	}
	m.abandoned.WithLabelValues(crawler).Inc()
}

// HandlersRunningAbandoned records how many abandoned handlers still run
// in this worker.
func (m *Metrics) HandlersRunningAbandoned(n int64) {
	if m == nil {
		return
	}
	m.abandonedNow.Set(float64(n))
}

// Items records n items of a page of crawler.
func (m *Metrics) Items(crawler string, n int) {
	if m == nil || n == 0 {
		return
	}
	m.items.WithLabelValues(crawler).Add(float64(n))
}

// SinkDelivery records a delivery to sink (ok or not).
func (m *Metrics) SinkDelivery(sink string, ok bool) {
	if m == nil {
		return
	}
	result := "ok"
	if !ok {
		result = "error"
	}
	m.sinks.WithLabelValues(sink, result).Inc()
}

// Failover records a dead peer claimed by this instance; kind is KindRunner
// or KindBackup.
func (m *Metrics) Failover(kind string) {
	if m == nil {
		return
	}
	m.failovers.WithLabelValues(kind).Inc()
}

// Detected records the heartbeat age of a peer declared dead.
func (m *Metrics) Detected(age time.Duration) {
	if m == nil {
		return
	}
	m.detection.Observe(age.Seconds())
}

// PeerAge sets the heartbeat age of a watched peer.
func (m *Metrics) PeerAge(peer string, age time.Duration) {
	if m == nil {
		return
	}
	m.peerAge.WithLabelValues(peer).Set(age.Seconds())
}

// ForgetPeer drops the heartbeat-age series of a peer no longer watched.
func (m *Metrics) ForgetPeer(peer string) {
	if m == nil {
		return
	}
	m.peerAge.DeleteLabelValues(peer)
}

// TaskStarted counts a Task in flight until the returned done is called.
func (m *Metrics) TaskStarted() (done func()) {
	if m == nil {
		return func() {}
	}
	m.inFlight.Inc()
	return m.inFlight.Dec
}
