package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/batoncrawl/baton/activities/cmdline/exitcode"
	"github.com/batoncrawl/baton/activities/metadata"
	"github.com/batoncrawl/baton/roles"
	"github.com/batoncrawl/baton/workflows"
)

// defaultWaitForRunners is --wait-for-runners' default: long enough for a
// group that is starting to elect its Runners, short enough that a crawl
// on a group without workers says so at once.
const defaultWaitForRunners = 5 * time.Second

// runnerCheckInterval is how often crawl --wait looks for live Runners.
const runnerCheckInterval = time.Second

// crawlOutput is what `baton crawl` prints and how long --wait waits.
type crawlOutput struct {
	o              *output
	quiet          bool
	waitForRunners time.Duration
	// stats, when set, prints the job's stats block after the summary of
	// a waited-for crawl (table output).
	stats func(io.Writer)
	// growing and maxPages say how the job's size is known (see
	// progressModel): growing when it may find more URLs than it has
	// seen (--follow, --sitemap, a user crawler).
	growing  bool
	maxPages int
	// interrupt, when set, replaces Ctrl-C and SIGTERM (tests): the
	// returned context ends when the user interrupts.
	interrupt func(context.Context) (context.Context, context.CancelFunc)
}

func addCrawlOutputFlags(cmd *cobra.Command) *crawlOutput {
	co := &crawlOutput{o: addOutputFlag(cmd)}
	f := cmd.Flags()
	f.BoolVarP(&co.quiet, "quiet", "q", false, "print only the job ID (with --wait: no progress bar or summary; the exit code tells how it ended)")
	f.DurationVar(&co.waitForRunners, "wait-for-runners", defaultWaitForRunners,
		"with --wait: how long to keep waiting while the group has no live Runner before giving up with exit code 6 (the job stays queued); 0 waits as long as it takes")
	return co
}

// check refuses flags that contradict each other.
func (co *crawlOutput) check(cmd *cobra.Command, wait bool) error {
	if co.quiet && co.o.JSON() {
		return usage("-q/--quiet and --output json exclude each other: -q prints only the job ID")
	}
	if co.waitForRunners < 0 {
		return usage("--wait-for-runners: is %v, must be >= 0 (0 waits as long as it takes)", co.waitForRunners)
	}
	if cmd.Flags().Changed("wait-for-runners") && !wait {
		return usage("--wait-for-runners applies to --wait only")
	}
	return nil
}

// submitted is a submitted job, as `baton crawl --output json` prints it;
// with --wait, Progress is its outcome (or the last progress seen).
type submitted struct {
	ID         string                 `json:"id"`
	WorkflowID string                 `json:"workflow_id"`
	RunID      string                 `json:"run_id"`
	WebUI      string                 `json:"web_ui"`
	Progress   *workflows.JobProgress `json:"progress,omitempty"`
	// what the table output says of it ("submitted" when empty).
	what string
}

// report prints the submitted job and, with wait, waits for it.
func (co *crawlOutput) report(cmd *cobra.Command, c client.Client, s submitted, wait bool, live *runnerCheck) error {
	out, errw := cmd.OutOrStdout(), cmd.ErrOrStderr()
	switch {
	case co.quiet:
		fmt.Fprintln(out, s.ID)
	case !co.o.JSON():
		what := s.what
		if what == "" {
			what = "submitted"
		}
		fmt.Fprintf(out, "job %s %s\n  workflow %s (run %s)\n", s.ID, what, s.WorkflowID, s.RunID)
		fmt.Fprintf(errw, "Web UI: %s\n", s.WebUI)
	}
	if !wait {
		if co.o.JSON() {
			return writeJSON(out, s)
		}
		return nil
	}
	var bar io.Writer = errw
	if co.quiet {
		bar = io.Discard
	}
	// Ctrl-C (or SIGTERM) stops the waiting, never the job: say so, and
	// exit 130 as a shell does for an interrupted command.
	interrupt := co.interrupt
	if interrupt == nil {
		interrupt = func(ctx context.Context) (context.Context, context.CancelFunc) {
			return signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
		}
	}
	ictx, stop := interrupt(cmd.Context())
	defer stop()
	p, err := co.wait(ictx, c, s.WorkflowID, live, bar, errw)
	live.release() // the Runners are watched no more
	if ictx.Err() != nil && cmd.Context().Err() == nil {
		err = exitcode.With(exitcode.Interrupted, fmt.Errorf("interrupted: stopped waiting; job %s goes on in the cluster "+
			"(follow it: baton status %s; stop it: baton cancel %s)", s.ID, s.ID, s.ID))
	}
	if co.o.JSON() {
		if p.ID != "" {
			s.Progress = &p
		}
		if werr := writeJSON(out, s); werr != nil && err == nil {
			err = werr
		}
	}
	if err != nil {
		return err
	}
	if !co.quiet && !co.o.JSON() {
		printSummary(out, p)
		if co.stats != nil {
			co.stats(out)
		}
		fmt.Fprintf(errw, "results: baton results %s [--format csv|parquet -o FILE]\n", p.ID)
	}
	if p.State != workflows.JobCompleted {
		return exitcode.With(exitcode.JobFailed, fmt.Errorf("job %s ended %s", s.ID, p.State))
	}
	return nil
}

// wait shows a progress bar on bar until the job ends, and watches the
// group's Runners: with none live, it says so on errw at once, and gives
// up after --wait-for-runners (exit code 6); a fail-over (a Runner
// declared dead, a Backup Runner taking its work over, a batch re-queued)
// is said on errw too. It returns the outcome, or the last progress seen.
//
// The progress is asked for in the background, so that a query that
// takes long (no worker answers it while the group has no Runner) never
// delays the Runner check: --wait-for-runners is kept to about a tenth of
// a second.
func (co *crawlOutput) wait(ctx context.Context, c client.Client, wid string, live *runnerCheck, bar, errw io.Writer) (workflows.JobProgress, error) {
	v := co.newProgressView(bar)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	var final workflows.JobProgress
	getResult := func() {
		// A cancelled job ends with a canceled error carrying its progress.
		done <- jobOutcome(c.GetWorkflow(ctx, wid, "").Get(ctx, &final), &final)
	}
	go getResult()
	type queried struct {
		p   workflows.JobProgress
		err error
		at  time.Time
	}
	answers := make(chan queried, 1)
	querying := false
	tick := time.NewTicker(300 * time.Millisecond)
	defer tick.Stop()
	check := time.NewTicker(runnerCheckInterval)
	defer check.Stop()
	var giveUp *time.Timer // fires when --wait-for-runners runs out
	var giveUpC <-chan time.Time
	var armed time.Time // the deadline giveUp is set for
	disarm := func() {
		if giveUp != nil {
			giveUp.Stop()
		}
		giveUp, giveUpC, armed = nil, nil, time.Time{}
	}
	defer disarm()
	var last workflows.JobProgress
	watch := runnerWatch{limit: co.waitForRunners, group: live.c.Group, w: errw}
	tw := temporalWatch{w: errw, job: jobOf(wid)}
	fo := failoverNotes{w: errw, job: jobOf(wid)}
	observe := func(now time.Time) error {
		err := watch.observe(ctx, live, now)
		// The countdown runs to the moment it ends, not to the next check.
		deadline, ok := watch.deadline()
		switch {
		case !ok:
			disarm()
		case !deadline.Equal(armed):
			disarm()
			giveUp, armed = time.NewTimer(max(time.Until(deadline), 0)), deadline
			giveUpC = giveUp.C
		}
		return err
	}
	if err := observe(time.Now()); err != nil {
		return last, err
	}
	// recheck looks at the Runners again, unless Temporal is away: without
	// it no heartbeat is written (they are Temporal activities), so a
	// Runner's stale heartbeat says nothing until the workers serve again.
	recheck := func(now time.Time) (checked bool, err error) {
		if tw.holding(now) {
			watch.since = time.Time{}
			return false, nil
		}
		if err := observe(now); err != nil {
			_ = v.pb.Exit()
			fmt.Fprintln(v.bar)
			return true, err
		}
		return true, nil
	}
	for {
		select {
		case err := <-done:
			if err != nil && ctx.Err() == nil && transient(err) {
				// Temporal went away under the long poll for the result:
				// the job goes on; ask again.
				tw.observe(ctx, c, err, time.Now())
				time.AfterFunc(time.Second, getResult)
				continue
			}
			if err == nil {
				v.show(final, time.Now())
			}
			_ = v.pb.Finish()
			fmt.Fprintln(v.bar)
			if err != nil {
				return last, fmt.Errorf("job workflow failed: %w", err)
			}
			return final, nil
		case <-tick.C:
			if querying {
				continue
			}
			querying = true
			go func() {
				qctx, qcancel := context.WithTimeout(ctx, 2*time.Second)
				p, err := queryProgress(qctx, c, wid)
				qcancel()
				answers <- queried{p, err, time.Now()}
			}()
		case a := <-answers:
			querying = false
			if ctx.Err() != nil {
				return last, ctx.Err()
			}
			tw.observe(ctx, c, a.err, a.at)
			if a.err == nil {
				fo.progress(last, a.p)
				last = a.p
				v.show(a.p, a.at)
			}
		case now := <-check.C:
			checked, err := recheck(now)
			if err != nil {
				return last, err
			}
			if checked {
				fo.group(watch.state)
			}
		case now := <-giveUpC:
			giveUp, giveUpC, armed = nil, nil, time.Time{}
			if _, err := recheck(now); err != nil {
				return last, err
			}
		case <-ctx.Done():
			return last, ctx.Err()
		}
	}
}

// failoverNotes says on w when the job's cluster fails over while crawl
// --wait waits: a Runner declared dead and the Backup Runner that takes
// its work over (GroupState), a batch re-queued because its Runner died
// with no backup to take over (the job's progress). The job goes on
// either way; the notes say so.
type failoverNotes struct {
	w    io.Writer
	job  string
	prev *roles.GroupState
}

// group takes the group's state as last read (nil: not read).
func (f *failoverNotes) group(gs *roles.GroupState) {
	if gs == nil {
		return
	}
	if f.prev != nil {
		for _, dead := range gs.FailRunner {
			if slices.Contains(f.prev.FailRunner, dead) {
				continue
			}
			var took []string
			for _, r := range gs.CurrentRunner {
				if !slices.Contains(f.prev.CurrentRunner, r) && slices.Contains(f.prev.CurrentBackup, r) {
					took = append(took, r)
				}
			}
			by := "its Backup Runner takes its work over"
			if len(took) > 0 {
				by = strings.Join(took, ", ") + " took its work over"
			}
			fmt.Fprintf(f.w, "\nfail-over: Runner %s was declared dead; %s: job %s goes on\n", dead, by, f.job)
		}
	}
	g := *gs
	f.prev = &g
}

// progress compares two progress reads of the job.
func (f *failoverNotes) progress(prev, p workflows.JobProgress) {
	if prev.ID != "" && p.Requeued > prev.Requeued {
		n := p.Requeued - prev.Requeued
		fmt.Fprintf(f.w, "\nfail-over: %s re-queued: %s Runner died with no Backup Runner to take over; job %s goes on with the other Runners\n",
			plural(n, "batch"), map[bool]string{true: "its", false: "their"}[n == 1], f.job)
	}
}

// temporalRecovery bounds how long, once Temporal answers again after an
// outage, crawl --wait keeps its no-Runner countdown stopped while the
// workers come back: their pollers back off while the server is away and
// their heartbeats (Temporal activities) are retried.
const temporalRecovery = 30 * time.Second

// temporalWatch follows Temporal's reachability while crawl --wait waits,
// and says on w when it is lost and when it is back. The job does not
// depend on the waiting CLI: it goes on when Temporal is back.
type temporalWatch struct {
	w      io.Writer
	job    string
	down   bool      // Temporal did not answer at the last look
	outage bool      // an outage whose recovery is not over
	backAt time.Time // when Temporal answered again after the outage
}

// observe records the outcome err of a request to Temporal at now; after
// a failure it asks Temporal's health to tell an unreachable server from
// workers that do not answer yet.
func (tw *temporalWatch) observe(ctx context.Context, c client.Client, err error, now time.Time) {
	if err == nil {
		if tw.outage {
			fmt.Fprintf(tw.w, "\nTemporal and the workers answer again: job %s goes on\n", tw.job)
		}
		tw.down, tw.outage = false, false
		return
	}
	hctx, cancel := context.WithTimeout(ctx, time.Second)
	_, herr := c.CheckHealth(hctx, &client.CheckHealthRequest{})
	cancel()
	switch {
	case herr != nil && ctx.Err() == nil:
		if !tw.down {
			fmt.Fprintf(tw.w, "\nnote: Temporal does not answer (%v); still waiting for job %s, which goes on when Temporal is back "+
				"(Ctrl-C stops waiting, not the job; 'baton status %s' follows it)\n", herr, tw.job, tw.job)
		}
		tw.down, tw.outage = true, true
	case tw.down:
		tw.down, tw.backAt = false, now
		fmt.Fprintf(tw.w, "\nTemporal answers again; waiting for the workers to resume job %s\n", tw.job)
	}
}

// holding reports whether the no-Runner countdown stays stopped at now:
// while Temporal is away, and for temporalRecovery after it is back until
// the workers answer.
func (tw *temporalWatch) holding(now time.Time) bool {
	return tw.down || (tw.outage && now.Sub(tw.backAt) < temporalRecovery)
}

// transient reports whether err is a failure to reach Temporal (not an
// outcome of the workflow), worth asking again.
func transient(err error) bool {
	var unavailable *serviceerror.Unavailable
	var deadline *serviceerror.DeadlineExceeded
	return errors.As(err, &unavailable) || errors.As(err, &deadline) || errors.Is(err, context.DeadlineExceeded)
}

// jobOf returns the job ID of a job workflow ID (its last path element).
func jobOf(wid string) string {
	if i := strings.LastIndex(wid, "/"); i >= 0 {
		return wid[i+1:]
	}
	return wid
}

// runnerCheck reads the group's Runners and their heartbeats in ZooKeeper.
type runnerCheck struct {
	c     *metadata.Cluster
	close func()
	job   string
	// closed is closed once the session is; nil until release.
	closed chan struct{}
}

// runners opens the ZooKeeper session crawl --wait watches the Runners
// with.
func (co *crawlOutput) runners(ctx context.Context, g *globals, job string) (*runnerCheck, error) {
	c, closeFn, err := g.dial(ctx)
	if err != nil {
		return nil, err
	}
	return &runnerCheck{c: c, close: closeFn, job: job}, nil
}

// release starts ending the session in the background: closing a
// ZooKeeper session is a write the ensemble commits, which the stats
// block and the summary need not wait for. Close waits for it.
func (r *runnerCheck) release() {
	if r == nil || r.closed != nil {
		return
	}
	r.closed = make(chan struct{})
	go func() {
		defer close(r.closed)
		if r.close != nil {
			r.close()
		}
	}()
}

// Close ends the session and returns when it is ended.
func (r *runnerCheck) Close() {
	r.release()
	<-r.closed
}

// live counts the group's live instances: Runners, and Backup Runners
// (one takes over a dead Runner's work). An instance is live while its
// heartbeat is not a death (Asystole, Apparent Death) and younger than
// the backups would need to declare it dead (update_timeout plus
// heart_rhythm_timeout late checks, counted at update_time): a Runner
// being replaced, or a ZooKeeper election, is not "no Runner".
func (r *runnerCheck) live(ctx context.Context, now time.Time) (int, *roles.GroupState, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	gs, _, err := r.c.GetGroup(ctx)
	if errors.Is(err, metadata.ErrNotFound) {
		return 0, nil, nil // no worker of the group has started yet
	}
	if err != nil {
		return 0, nil, err
	}
	n := 0
	for _, name := range gs.CurrentCrawler {
		hb, _, err := r.c.GetHeartbeat(ctx, name)
		if err != nil {
			continue
		}
		if hb.HealthyState == roles.HeartAsystole || hb.HealthyState == roles.HeartApparentDeath {
			continue
		}
		if age, ok := liveFor(hb, now); ok && age >= 0 {
			n++
		}
	}
	return n, &gs, nil
}

// liveFor returns a heartbeat's age and whether it is young enough to be
// live (see runnerCheck.live).
func liveFor(hb roles.Heartbeat, now time.Time) (time.Duration, bool) {
	age, err := hb.Age(now)
	if err != nil {
		return 0, false
	}
	timeout, err := hb.Timeout()
	if err != nil {
		return 0, false
	}
	every, err := time.ParseDuration(hb.UpdateTime)
	if err != nil {
		return 0, false
	}
	checks, err := strconv.Atoi(hb.HeartRhythmTimeout)
	if err != nil {
		return 0, false
	}
	return age, age <= timeout+time.Duration(checks)*every
}

// runnerWatch says when the group has no live Runner and when it has one
// again, and gives up after limit without one (0: never).
type runnerWatch struct {
	limit time.Duration
	group string
	w     io.Writer
	since time.Time // when the group was first seen without a live Runner; zero: it has one
	zkErr bool      // a failed read was reported
	// state is the group's state at the last read (nil: none read).
	state *roles.GroupState
}

// deadline is when the watch gives up, while the group has no live
// Runner and --wait-for-runners is not 0.
func (rw *runnerWatch) deadline() (time.Time, bool) {
	if rw.since.IsZero() || rw.limit == 0 {
		return time.Time{}, false
	}
	return rw.since.Add(rw.limit), true
}

func (rw *runnerWatch) observe(ctx context.Context, r *runnerCheck, now time.Time) error {
	n, gs, err := r.live(ctx, now)
	if gs != nil {
		rw.state = gs
	}
	if err != nil {
		if ctx.Err() == nil && !rw.zkErr {
			fmt.Fprintf(rw.w, "\nnote: cannot read the group's Runners in ZooKeeper (%v); still waiting for the job\n", err)
			rw.zkErr = true
		}
		return nil
	}
	rw.zkErr = false
	if n > 0 {
		if !rw.since.IsZero() {
			fmt.Fprintf(rw.w, "\n%d live Runner(s) in group %s: the job goes on\n", n, rw.group)
			rw.since = time.Time{}
		}
		return nil
	}
	if rw.since.IsZero() {
		rw.since = now
		giveUp := fmt.Sprintf("giving up in %v (--wait-for-runners; 0 waits as long as it takes)", rw.limit)
		if rw.limit == 0 {
			giveUp = "waiting for one as long as it takes (--wait-for-runners 0)"
		}
		fmt.Fprintf(rw.w, "\nno live Runner in group %s (no Runner with a fresh heartbeat in ZooKeeper): the job waits for one; %s\n", rw.group, giveUp)
	}
	if deadline, ok := rw.deadline(); ok && !now.Before(deadline) {
		return exitcode.With(exitcode.NoRunner, fmt.Errorf(
			"no live Runner in group %s for %v: stopped waiting; job %s stays queued and runs when a Runner joins "+
				"(start baton-worker for group %s, follow the job with 'baton status %s', or 'baton cancel %s')",
			rw.group, rw.limit, r.job, rw.group, r.job, r.job))
	}
	return nil
}

// progressLineEvery is how often, at most, crawl --wait writes a progress
// line when its stderr is not a terminal.
const progressLineEvery = 5 * time.Second

// progressLines writes the progress as plain lines (w nil: nothing), one
// when it changed and every seconds have passed since the last. Not safe
// for concurrent use.
type progressLines struct {
	w     io.Writer
	every time.Duration
	last  string
	at    time.Time
}

func (l *progressLines) show(now time.Time, desc string) {
	if l.w == nil || desc == l.last || now.Sub(l.at) < l.every && !l.at.IsZero() {
		return
	}
	l.last, l.at = desc, now
	fmt.Fprintf(l.w, "%s %s\n", now.Format("15:04:05"), desc)
}
