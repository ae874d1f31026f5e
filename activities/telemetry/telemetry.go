// Package telemetry is what Baton's activities record of their work:
// pages fetched by status class, bytes, fetch latency, retries and
// robots.txt refusals, the URLs queued in the frontier, fail-overs,
// dead-peer detection time, peers' heartbeat age and Tasks in flight.
//
// A worker creates one Metrics over the recorder it exports (package
// prommetrics: Prometheus collectors on the registry it serves at
// /metrics) and hands it to the activities. Every method is safe on a nil
// *Metrics and then does nothing, so unit tests and in-memory setups need
// no registry. This package links no metrics library: the baton CLI,
// which imports the activities' types, starts without one.
package telemetry

import "time"

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

// Options tune a recorder's series (prommetrics.NewWith).
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
