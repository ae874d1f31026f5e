package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/batoncrawl/baton/workflows"
)

// rateWindow is how far back crawl --wait's rate looks: pages are
// recorded in group commits, so the rate between two polls (300 ms apart)
// swings between 0 and several times the real one; over rateWindow it
// does not.
const rateWindow = 10 * time.Second

// rateMinSpan is the least time the rate's samples must span before a
// rate is shown.
const rateMinSpan = 2 * time.Second

// progressModel is what crawl --wait shows of a job's progress: the
// pages done, their share of the job when its size is known, and a
// steady rate. Not safe for concurrent use.
//
// A job that follows links (or reads sitemaps, or runs a user crawler's
// handlers) grows as it goes: its URLs seen are no total, and a share of
// them would fall each time the Runners find links (18 % → 5 % → 94 %).
// Such a job shows no share until its size is fixed: when it has seen
// max_pages URLs. A job of seeds only has its size from the start. Once
// shown, the share never goes back, and a completed job shows 100 %
// (pages refused by robots.txt are done without being recorded).
type progressModel struct {
	// growing: the job may find more URLs than it has seen (--follow,
	// --sitemap, a user crawler).
	growing bool
	// maxPages is the job's max_pages (0: no limit).
	maxPages int

	total   int // the job's size once known; 0: not known
	done    int // pages done, as shown (never goes back)
	samples []rateSample
}

type rateSample struct {
	at       time.Time
	recorded int
}

// observe takes a progress read at now.
func (m *progressModel) observe(now time.Time, p workflows.JobProgress) {
	st := p.Stats
	switch {
	case !m.growing && st.Seen > 0:
		m.total = max(m.total, st.Seen)
	case m.maxPages > 0 && st.Seen >= m.maxPages:
		m.total = m.maxPages
	}
	if p.State == workflows.JobCompleted && m.total == 0 && st.Seen > 0 {
		m.total = st.Seen
	}
	m.done = max(m.done, st.Recorded)
	if m.total > 0 {
		m.done = min(m.done, m.total)
	}
	if p.State == workflows.JobCompleted {
		m.done = max(m.done, m.total)
	}
	// The rate: recorded pages over the last rateWindow, timed by when the
	// job read its counters (StatsAt) where it says: a count the job has
	// not read again since the last answer (its JobAwait is between
	// workers after a fail-over) is no new sample, and would halve the
	// rate if it were taken as read now. A count that went back (a re-run
	// took its failed pages out) starts it over.
	at := now
	if !p.StatsAt.IsZero() {
		at = p.StatsAt
	}
	n := len(m.samples)
	if n > 0 && st.Recorded < m.samples[n-1].recorded {
		m.samples, n = m.samples[:0], 0
	}
	if n > 0 && !at.After(m.samples[n-1].at) {
		return
	}
	m.samples = append(m.samples, rateSample{at, st.Recorded})
	i := 0
	for i < len(m.samples)-2 && at.Sub(m.samples[i+1].at) >= rateWindow {
		i++
	}
	m.samples = m.samples[i:]
}

// percent is the share of the job done, and whether it is known.
func (m *progressModel) percent() (int, bool) {
	if m.total <= 0 {
		return 0, false
	}
	return m.done * 100 / m.total, true
}

// rate is the pages recorded per second over the last rateWindow, and
// whether enough time has passed to tell.
func (m *progressModel) rate() (float64, bool) {
	if len(m.samples) < 2 {
		return 0, false
	}
	first, last := m.samples[0], m.samples[len(m.samples)-1]
	span := last.at.Sub(first.at)
	if span < rateMinSpan {
		return 0, false
	}
	return float64(last.recorded-first.recorded) / span.Seconds(), true
}

// describe is the progress as one line: state, pages done (with the share
// when known), failed, queued, batches in flight and the rate.
func (m *progressModel) describe(p workflows.JobProgress) string {
	done := fmt.Sprintf("done %d", m.done)
	if pc, ok := m.percent(); ok {
		done = fmt.Sprintf("done %d of %d (%d%%)", m.done, m.total, pc)
	}
	s := fmt.Sprintf("%s: %s, failed %d, queued %d, in flight %d batches", p.State, done, p.Stats.Failed, p.Stats.Queued, len(p.InFlight))
	if r, ok := m.rate(); ok {
		s += fmt.Sprintf(", %.1f pages/s", r)
	}
	return s
}

// progressView is the --wait progress: a bar redrawn in place on a
// terminal; to a log or a pipe, a plain line when the progress changed,
// every few seconds at most.
type progressView struct {
	pb    *progressbar.ProgressBar
	bar   io.Writer // where the bar is drawn (io.Discard when lines are written)
	lines progressLines
	model *progressModel
	sized bool
}

func (co *crawlOutput) newProgressView(bar io.Writer) *progressView {
	lines := progressLines{w: bar, every: progressLineEvery}
	if f, ok := bar.(*os.File); !ok || isTerminal(f) {
		lines.w = nil
	} else {
		bar = io.Discard
	}
	// Its own count and rate are in the description (the library's rate
	// is the rate between two redraws, which swings with group commits).
	pb := progressbar.NewOptions(-1, progressbar.OptionSetWriter(bar), progressbar.OptionSetDescription("crawling"),
		progressbar.OptionThrottle(200*time.Millisecond), progressbar.OptionClearOnFinish(),
		// No spinner goroutine: the library's reads its state unlocked (a
		// data race under -race); the bar is redrawn at every poll anyway.
		progressbar.OptionSetSpinnerChangeInterval(0))
	return &progressView{pb: pb, bar: bar, lines: lines, model: &progressModel{growing: co.growing, maxPages: co.maxPages}}
}

// show draws the job's progress p as read at now.
func (v *progressView) show(p workflows.JobProgress, now time.Time) {
	v.model.observe(now, p)
	if v.model.total > 0 && !v.sized {
		v.sized = true
		v.pb.ChangeMax(v.model.total)
	}
	_ = v.pb.Set(v.model.done)
	desc := v.model.describe(p)
	v.pb.Describe(desc)
	v.lines.show(now, desc)
}
