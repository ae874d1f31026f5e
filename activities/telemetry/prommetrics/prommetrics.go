// Package prommetrics keeps Baton's telemetry as Prometheus collectors:
// the recorder a worker hands its activities (telemetry.Metrics), on the
// registry it serves at /metrics.
//
// The series labelled with a crawl job (telemetry.telemetry.LabelJob) are bounded:
// a job's series are exported while the job is active on this worker, and
// dropped once it has been idle here for the grace period (NewWith's
// Options.JobGrace, the worker's --metrics-job-grace); a gauge of the
// frontier, which another worker may be updating meanwhile, is dropped
// once it has not been refreshed for telemetry.QueuedTTL. Prometheus
// keeps what it scraped: dropping a finished job's series ends the
// series, it does not erase its history. Without this every job ever run
// stayed a series of every Runner that fetched a page of it, for the life
// of the process.
package prommetrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/batoncrawl/baton/activities/telemetry"
)

// collectors is the set of Baton's collectors.
type collectors struct {
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
// default Options: the Metrics a worker hands its activities.
func New(reg prometheus.Registerer) (*telemetry.Metrics, error) {
	return NewWith(reg, telemetry.Options{})
}

// NewWith is New with opts.
func NewWith(reg prometheus.Registerer, opts telemetry.Options) (*telemetry.Metrics, error) {
	m, err := newCollectors(reg, opts)
	if err != nil {
		return nil, err
	}
	return telemetry.NewMetrics(m), nil
}

// newCollectors creates the collectors and registers them on reg.
func newCollectors(reg prometheus.Registerer, opts telemetry.Options) (*collectors, error) {
	if opts.JobGrace <= 0 {
		opts.JobGrace = telemetry.DefaultJobGrace
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	m := &collectors{grace: opts.JobGrace, now: opts.Now, active: map[string]time.Time{}, refreshed: map[string]time.Time{},
		pages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "baton_pages_total",
			Help: "Pages fetched by Runners, by class (2xx, 3xx, 4xx, 5xx, or error: no usable HTTP status) and crawl job (empty for a Task's pages).",
		}, []string{"class", telemetry.LabelJob}),
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
		}, []string{telemetry.LabelJob}),
		fetch: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "baton_fetch_duration_seconds",
			Help:    "Time to fetch one page (for crawl jobs: politeness waits and retries included), by crawl job.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{telemetry.LabelJob}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "baton_retries_total",
			Help: "Retries of transient failures (timeouts, connection errors, 429, 5xx): attempts beyond the first of the pages fetched by Runners, by crawl job.",
		}, []string{telemetry.LabelJob}),
		robots: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "baton_robots_refusals_total",
			Help: "URLs not fetched because robots.txt disallows them for the job's User-Agent, by crawl job.",
		}, []string{telemetry.LabelJob}),
		queued: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "baton_frontier_queued_urls",
			Help: "URLs waiting in a crawl job's frontier, as the job's supervisor on this worker last read them (dropped 30 s after its last read here: take max by crawl_job across workers).",
		}, []string{telemetry.LabelJob}),
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
	for _, k := range []string{telemetry.KindRunner, telemetry.KindBackup} {
		m.failovers.WithLabelValues(k)
	}
	return m, nil
}

// jobVecs are the vectors labelled with a crawl job, whose series are
// dropped by sweep.
func (m *collectors) jobVecs() []interface {
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
type jobCollector struct{ m *collectors }

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
func (m *collectors) touch(job string) {
	m.mu.Lock()
	m.active[job] = m.now()
	m.mu.Unlock()
}

// sweep drops the series of the jobs idle for longer than the grace
// period, and the queued gauges not refreshed within QueuedTTL.
func (m *collectors) sweep() {
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	for job, at := range m.refreshed {
		if now.Sub(at) > telemetry.QueuedTTL {
			m.queued.DeleteLabelValues(job)
			delete(m.refreshed, job)
		}
	}
	for job, at := range m.active {
		if now.Sub(at) <= m.grace {
			continue
		}
		for _, v := range m.jobVecs() {
			v.DeletePartialMatch(prometheus.Labels{telemetry.LabelJob: job})
		}
		delete(m.active, job)
		delete(m.refreshed, job)
	}
}

// Page records one fetched page of a crawl job ("" for a Task's page): its
// HTTP status (0 if none), whether it failed, its body size and how long
// the fetch took.
func (m *collectors) Page(job string, status int, failed bool, bytes int64, d time.Duration) {
	m.touch(job)
	m.pages.WithLabelValues(telemetry.Class(status, failed), job).Inc()
	if bytes > 0 {
		m.bytes.WithLabelValues(job).Add(float64(bytes))
	}
	m.fetch.WithLabelValues(job).Observe(d.Seconds())
}

// PageError records a request of a crawl job ("" for a Task) that failed before anything was fetched (an
// invalid request, a page robots.txt disallows): class error, no bytes, no
// fetch time.
func (m *collectors) PageError(job string) {
	m.touch(job)
	m.pages.WithLabelValues(telemetry.ClassError, job).Inc()
}

// Retries records the retries of one page of a crawl job ("" for a
// Task): its attempts beyond the first (none when attempts <= 1).
func (m *collectors) Retries(job string, attempts int) {
	m.touch(job)
	m.retries.WithLabelValues(job).Add(float64(attempts - 1))
}

// RobotsRefusal records a URL of a crawl job ("" for a Task) that
// robots.txt disallows: it is not fetched.
func (m *collectors) RobotsRefusal(job string) {
	m.touch(job)
	m.robots.WithLabelValues(job).Inc()
}

// Queued sets the URLs waiting in a crawl job's frontier, as its
// supervisor read them; the gauge is dropped once not set again within
// QueuedTTL (the supervisor moved to another worker, or the job ended).
func (m *collectors) Queued(job string, n int) {
	m.mu.Lock()
	now := m.now()
	m.active[job], m.refreshed[job] = now, now
	m.mu.Unlock()
	m.queued.WithLabelValues(job).Set(float64(n))
}

// HandlerError records a page failed by the handler of crawler.
func (m *collectors) HandlerError(crawler string) {
	m.handler.WithLabelValues(crawler).Inc()
}

// HandlerAbandoned records a handler of crawler abandoned past its
// budget.
func (m *collectors) HandlerAbandoned(crawler string) {
	m.abandoned.WithLabelValues(crawler).Inc()
}

// HandlersRunningAbandoned records how many abandoned handlers still run
// in this worker.
func (m *collectors) HandlersRunningAbandoned(n int64) {
	m.abandonedNow.Set(float64(n))
}

// Items records n items of a page of crawler.
func (m *collectors) Items(crawler string, n int) {
	m.items.WithLabelValues(crawler).Add(float64(n))
}

// SinkDelivery records a delivery to sink (ok or not).
func (m *collectors) SinkDelivery(sink string, ok bool) {
	result := "ok"
	if !ok {
		result = "error"
	}
	m.sinks.WithLabelValues(sink, result).Inc()
}

// Failover records a dead peer claimed by this instance; kind is
// telemetry.KindRunner or telemetry.KindBackup.
func (m *collectors) Failover(kind string) {
	m.failovers.WithLabelValues(kind).Inc()
}

// Detected records the heartbeat age of a peer declared dead.
func (m *collectors) Detected(age time.Duration) {
	m.detection.Observe(age.Seconds())
}

// PeerAge sets the heartbeat age of a watched peer.
func (m *collectors) PeerAge(peer string, age time.Duration) {
	m.peerAge.WithLabelValues(peer).Set(age.Seconds())
}

// ForgetPeer drops the heartbeat-age series of a peer no longer watched.
func (m *collectors) ForgetPeer(peer string) {
	m.peerAge.DeleteLabelValues(peer)
}

// TaskStarted counts a Task in flight until the returned done is called.
func (m *collectors) TaskStarted() (done func()) {
	m.inFlight.Inc()
	return m.inFlight.Dec
}
