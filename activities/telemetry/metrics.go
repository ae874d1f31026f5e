package telemetry

import "time"

// Recorder keeps what Metrics records; its methods are Metrics's, on a
// recorder that is never nil.
type Recorder interface {
	Page(job string, status int, failed bool, bytes int64, d time.Duration)
	PageError(job string)
	Retries(job string, attempts int)
	RobotsRefusal(job string)
	Queued(job string, n int)
	HandlerError(crawler string)
	HandlerAbandoned(crawler string)
	HandlersRunningAbandoned(n int64)
	Items(crawler string, n int)
	SinkDelivery(sink string, ok bool)
	Failover(kind string)
	Detected(age time.Duration)
	PeerAge(peer string, age time.Duration)
	ForgetPeer(peer string)
	TaskStarted() (done func())
}

// Metrics is what the activities record, kept by a Recorder. A nil
// *Metrics records nothing.
type Metrics struct{ r Recorder }

// NewMetrics is Metrics kept by r.
func NewMetrics(r Recorder) *Metrics { return &Metrics{r: r} }

// Page records one fetched page of a crawl job ("" for a Task's page): its
// HTTP status (0 if none), whether it failed, its body size and how long
// the fetch took.
func (m *Metrics) Page(job string, status int, failed bool, bytes int64, d time.Duration) {
	if m != nil {
		m.r.Page(job, status, failed, bytes, d)
	}
}

// PageError records a request of a crawl job ("" for a Task) that failed
// before anything was fetched (an invalid request, a page robots.txt
// disallows): class error, no bytes, no fetch time.
func (m *Metrics) PageError(job string) {
	if m != nil {
		m.r.PageError(job)
	}
}

// Retries records the retries of one page of a crawl job ("" for a
// Task): its attempts beyond the first (none when attempts <= 1).
func (m *Metrics) Retries(job string, attempts int) {
	if m != nil && attempts > 1 {
		m.r.Retries(job, attempts)
	}
}

// RobotsRefusal records a URL of a crawl job ("" for a Task) that
// robots.txt disallows: it is not fetched.
func (m *Metrics) RobotsRefusal(job string) {
	if m != nil {
		m.r.RobotsRefusal(job)
	}
}

// Queued sets the URLs waiting in a crawl job's frontier, as its
// supervisor read them; the gauge is dropped once not set again within
// QueuedTTL (the supervisor moved to another worker, or the job ended).
func (m *Metrics) Queued(job string, n int) {
	if m != nil {
		m.r.Queued(job, n)
	}
}

// HandlerError records a page failed by the handler of crawler.
func (m *Metrics) HandlerError(crawler string) {
	if m != nil {
		m.r.HandlerError(crawler)
	}
}

// HandlerAbandoned records a handler of crawler abandoned past its
// budget.
func (m *Metrics) HandlerAbandoned(crawler string) {
	if m != nil {
		m.r.HandlerAbandoned(crawler)
	}
}

// HandlersRunningAbandoned records how many abandoned handlers still run
// in this worker.
func (m *Metrics) HandlersRunningAbandoned(n int64) {
	if m != nil {
		m.r.HandlersRunningAbandoned(n)
	}
}

// Items records n items of a page of crawler.
func (m *Metrics) Items(crawler string, n int) {
	if m != nil && n != 0 {
		m.r.Items(crawler, n)
	}
}

// SinkDelivery records a delivery to sink (ok or not).
func (m *Metrics) SinkDelivery(sink string, ok bool) {
	if m != nil {
		m.r.SinkDelivery(sink, ok)
	}
}

// Failover records a dead peer claimed by this instance; kind is
// KindRunner or KindBackup.
func (m *Metrics) Failover(kind string) {
	if m != nil {
		m.r.Failover(kind)
	}
}

// Detected records the heartbeat age of a peer declared dead.
func (m *Metrics) Detected(age time.Duration) {
	if m != nil {
		m.r.Detected(age)
	}
}

// PeerAge sets the heartbeat age of a watched peer.
func (m *Metrics) PeerAge(peer string, age time.Duration) {
	if m != nil {
		m.r.PeerAge(peer, age)
	}
}

// ForgetPeer drops the heartbeat-age series of a peer no longer watched.
func (m *Metrics) ForgetPeer(peer string) {
	if m != nil {
		m.r.ForgetPeer(peer)
	}
}

// TaskStarted counts a Task in flight until the returned done is called.
func (m *Metrics) TaskStarted() (done func()) {
	if m == nil {
		return func() {}
	}
	return m.r.TaskStarted()
}
