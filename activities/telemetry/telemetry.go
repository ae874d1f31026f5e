// Package telemetry holds Baton's own Prometheus metrics: pages fetched by
// status class, bytes, fetch latency, fail-overs, dead-peer detection time,
// peers' heartbeat age and Tasks in flight.
//
// A worker creates one Metrics on the registry it serves at /metrics and
// hands it to the activities. Every method is safe on a nil *Metrics and
// then does nothing, so unit tests and in-memory setups need no registry.
package telemetry

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

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
	pages     *prometheus.CounterVec
	handler   *prometheus.CounterVec
	items     *prometheus.CounterVec
	sinks     *prometheus.CounterVec
	bytes     *prometheus.CounterVec
	fetch     *prometheus.HistogramVec
	failovers *prometheus.CounterVec
	detection prometheus.Histogram
	peerAge   *prometheus.GaugeVec
	inFlight  prometheus.Gauge
}

// New creates Baton's collectors and registers them on reg.
func New(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
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
	for _, c := range []prometheus.Collector{m.handler, m.items, m.sinks, m.pages, m.bytes, m.fetch, m.failovers, m.detection, m.peerAge, m.inFlight} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	// Every class and kind is present from the start, so rates and ratios
	// have series to work on before the first page or fail-over.
	for _, c := range []string{Class2xx, Class3xx, Class4xx, Class5xx, ClassError} {
		m.pages.WithLabelValues(c, "")
	}
	m.bytes.WithLabelValues("")
	m.fetch.WithLabelValues("")
	for _, k := range []string{KindRunner, KindBackup} {
		m.failovers.WithLabelValues(k)
	}
	return m, nil
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
	m.pages.WithLabelValues(ClassError, job).Inc()
}

// HandlerError records a page failed by the handler of crawler.
func (m *Metrics) HandlerError(crawler string) {
	if m == nil {
		return
	}
	m.handler.WithLabelValues(crawler).Inc()
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
