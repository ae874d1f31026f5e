package jobs

import (
	"errors"
	"fmt"
	"time"
)

// run is the batch's event loop: pull, commit and fetch all run at once,
// none waits for another; it returns once the batch has nothing left to
// fetch or commit, was stopped, or stopped fetching and gave back what it
// did not fetch.
func (b *batchRun) run() {
	for {
		b.startPull()
		if b.renewNow && !b.stopping() && !b.renewing && !b.extending {
			b.renewNow = false
			b.renew()
		}
		b.startCarry()
		b.startFetches()
		b.startCommit()
		b.startNotModified()
		carryIdle := !b.carrying && (len(b.toCarry) == 0 || b.stopping() || b.halted != "")
		nmIdle := b.nmRecording == 0 && (len(b.nmPending) == 0 || b.stopping())
		if b.inflight == 0 && b.recording == 0 && !b.extending && carryIdle && nmIdle && (len(b.pending) == 0 || b.stopping()) {
			switch b.idle() {
			case idleDone:
				return
			case idlePull:
				continue
			}
		}
		b.wait()
	}
}

// startPull pulls more URLs from the job's frontier once the queue runs
// low, unless the worker drains.
func (b *batchRun) startPull() {
	if b.stopping() || b.halted != "" || b.extending || b.exhausted || b.size >= b.limit || len(b.queue)+len(b.toCarry) > b.conc/2 {
		return
	}
	if b.renewing {
		return // (the pull starts once the renewal has answered)
	}
	// Asked once per pull, not per event of the loop: Drain reads the
	// Runner's membership entry.
	if b.in.Drain != nil && b.in.Drain() {
		// Scaled down or leaving: no more pulls, finish what we hold.
		b.exhausted, b.draining = true, true
		b.in.Log.Info("batch draining: no more URLs pulled", "ran", b.ran, "held", len(b.queue)+b.inflight+len(b.pending)+b.committing)
		return
	}
	b.extending = true
	n, gen := min(b.pullSize(b.pullWant()), b.limit-b.size), b.linksGen
	go func() {
		p, err := b.r.Store.Pull(b.ctx, b.in.Job, b.in.Batch, b.in.Epoch, n, b.conc)
		b.extended <- pulled{p: p, at: time.Now(), gen: gen, n: n, err: err}
	}()
	b.renewNow = false
}

// renew renews the batch's host leases (a pull of no URLs).
func (b *batchRun) renew() {
	b.renewing = true
	go func() {
		p, err := b.r.Store.Pull(b.ctx, b.in.Job, b.in.Batch, b.in.Epoch, 0, b.conc)
		b.renewed <- pulled{p: p, at: time.Now(), err: err}
	}()
}

// startFetches fills the free slots from the queue. Fetching runs ahead
// of the commits by a group and a round at most.
func (b *batchRun) startFetches() {
	for !b.stopping() && b.halted == "" && b.inflight < b.conc && len(b.queue) > 0 && len(b.pending)+b.committing < b.aheadMax &&
		len(b.nmPending)+b.nmRecording < 2*maxNotModified {
		e := b.queue[0]
		b.queue = b.queue[1:]
		b.inflight++
		go func() {
			rec, err := b.r.fetch(b.fctx, b.in, b.jr, b.auth, e, b.leases)
			b.fetched <- fetchedPage{rec, err}
		}()
	}
}

// startCommit commits the pages fetched in one group, or holds them for a
// fuller group. While the batch has a round of URLs queued of its own, or
// its last pull got all it asked for (its pulls refill its queue), a group
// commit waits for a fuller group (commitGroup), at most commitLinger:
// fewer, larger transactions leave the database's CPU to the crawl. A
// batch whose URLs run short commits at once.
func (b *batchRun) startCommit() {
	if b.stopping() || b.recording >= maxCommits || len(b.pending) == 0 {
		return
	}
	ahead := len(b.queue) >= b.conc || b.plenty && !b.draining && b.size < b.limit
	hold := b.halted == "" && ahead && len(b.pending) < b.grp && time.Since(b.pendingSince) < b.commitLinger
	if hold {
		if b.lingerC == nil {
			b.lingerC = time.After(b.commitLinger - time.Since(b.pendingSince))
		}
		return
	}
	group, rest := commitSplit(b.pending, b.r.Limits.commitBytes())
	b.pending = rest
	b.recording++
	b.committing += len(group)
	// Slots that nothing queued will fill take the group's own new links
	// with the commit (a crawl's first waves).
	take := 0
	if b.halted == "" && !b.draining && b.size < b.limit {
		take = min(max(0, b.conc-b.inflight-len(b.queue)-len(b.toCarry)), b.limit-b.size)
	}
	go func() {
		got, taken, err := b.r.Store.RecordTake(b.ctx, group, take)
		c := commitDone{n: len(group), taken: taken, err: err}
		for _, g := range got {
			c.added += g.Added
		}
		b.committed <- c
	}()
}

// idleNext is what the loop does when nothing is in flight.
type idleNext int

const (
	idleWait idleNext = iota // wait for the next event
	idlePull                 // go round: a pull starts
	idleDone                 // the run is over
)

// idle decides what a batch with nothing in flight does: give back what
// it did not fetch once stopped fetching, pull again, wait for a start
// batch's first links, or end.
func (b *batchRun) idle() idleNext {
	stopping := b.stopping()
	if !stopping && b.halted != "" {
		// Everything fetched is committed: what is left unfinished in the
		// batch was not fetched.
		n, err := b.r.Store.Release(b.ctx, b.in.Job, b.in.Batch, b.in.Epoch)
		if err != nil {
			b.stop(err)
		} else {
			b.in.Log.Info("batch stopped ("+b.halted+"): URLs not fetched given back to the frontier", "released", n, "ran", b.ran)
		}
		return idleDone
	}
	pullable := !stopping && len(b.queue) == 0 && !b.exhausted && b.size < b.limit
	if pullable && !b.renewing {
		return idlePull // pull again: the frontier may have grown
	}
	// (pullable while a renewal of the leases is under way: the pull
	// starts once it has answered, wait.)
	if !pullable {
		if stopping || !b.starting || b.size > 0 || b.draining || b.heldOut >= startHeldOut || !time.Now().Before(b.startBy) {
			return idleDone
		}
		if b.startTick == nil {
			b.startTick = time.After(startPoll) // a start batch: wait for the first links
		}
	}
	return idleWait
}

// wait handles the next event of the run.
func (b *batchRun) wait() {
	select {
	case <-b.startTick:
		b.startTick = nil
		b.pollStart()
	case state := <-b.halt:
		b.stopFetching("job "+state, "control state")
	case <-b.renewTick.C:
		b.onRenewTick()
	case p := <-b.renewed:
		b.renewing = false
		switch {
		case errors.Is(p.err, ErrStale):
			b.stop(p.err)
		case p.err != nil:
			// Tried again at the next tick; the lease lasts TTL.
			b.in.Log.Warn("host leases not renewed", "err", p.err)
		case !b.stopping():
			b.checkLeases(p)
		}
	case <-b.lingerC:
		b.lingerC = nil
	case <-b.nmLingerC:
		b.nmLingerC = nil
	case d := <-b.nmDone:
		b.onNotModified(d)
	case f := <-b.fetched:
		b.onFetched(f)
	case c := <-b.committed:
		b.onCommitted(c)
	case l := <-b.carryLeft:
		b.onCarryLeft(l)
	case c := <-b.carried:
		b.onCarried(c)
	case p := <-b.extended:
		b.onExtended(p)
	}
}

// pollStart reads the job's counters for a start batch waiting for its
// first links.
func (b *batchRun) pollStart() {
	st, err := b.r.Store.Stats(b.ctx, b.in.Job)
	switch {
	case err != nil:
		b.in.Log.Warn("start batch: job counters not read: it stops waiting for links", "err", err)
		b.starting = false
	case b.in.Drain != nil && b.in.Drain():
		b.starting = false
	case st.Queued > 0:
		b.exhausted, b.sawQueued = false, true // pull them
	default:
		b.heldOut = 0 // the URLs seen went to other batches: not held from us
		n, err := b.r.Store.ActiveBatches(b.ctx, b.in.Job)
		if err != nil {
			b.in.Log.Warn("start batch: active batches not read: it stops waiting for links", "err", err)
		}
		b.starting = err == nil && n > 0 // no batch holds URLs: none will come
	}
}

// onRenewTick renews the host leases when no pull has for a while, and
// stops fetching when none has for a lease's TTL.
func (b *batchRun) onRenewTick() {
	if since := time.Since(b.lastPull); since >= 4*b.leases.renewEvery() {
		// Not renewed for a lease's TTL (the store unreachable): another
		// batch may hold our hosts by now.
		b.stopFetching("host leases not renewed", fmt.Sprintf("no renewal for %v", since.Round(time.Millisecond)))
	}
	if !b.stopping() && !b.renewing && !b.extending && time.Since(b.lastPull) >= b.leases.renewEvery() {
		b.renew()
	}
}

// onFetched takes a finished fetch into the next group commit.
func (b *batchRun) onFetched(f fetchedPage) {
	b.inflight--
	switch {
	case f.err != nil:
		if b.ctx.Err() == nil && b.fctx.Err() == nil {
			b.stop(f.err)
		}
		// Abandoned (paused or cancelled): its URL is released.
	case !b.stopping() && b.onFetchedNotModified(f.rec):
		// (recorded in bulk: notmodified.go)
	case !b.stopping():
		if len(b.pending) == 0 {
			b.pendingSince = time.Now()
		}
		b.pending = append(b.pending, f.rec)
	}
}

// onCommitted counts a group commit's pages and queues the links it took.
func (b *batchRun) onCommitted(c commitDone) {
	b.recording--
	b.committing -= c.n
	if c.err != nil {
		if b.ctx.Err() == nil || errors.Is(c.err, ErrStale) {
			b.stop(c.err)
		}
		return
	}
	b.ran += c.n
	if len(c.taken) > 0 {
		b.size += len(c.taken)
		b.enqueue(c.taken)
	}
	if c.added > 0 && !b.draining {
		b.exhausted = false
		b.linksGen++
	}
}

// onExtended queues what a pull from the frontier answered.
func (b *batchRun) onExtended(p pulled) {
	b.extending = false
	switch {
	case errors.Is(p.err, ErrHalted):
		state := ControlPaused
		if s, err := b.r.Store.Control(b.ctx, b.in.Job); err == nil && s != ControlRunning {
			state = s
		}
		b.stopFetching("job "+state, p.err.Error())
	case p.err != nil:
		if b.ctx.Err() == nil || errors.Is(p.err, ErrStale) {
			b.stop(p.err)
		}
	case len(p.p.Entries) == 0:
		b.plenty = false
		b.checkLeases(p)
		b.exhausted = p.gen == b.linksGen
		if b.sawQueued {
			b.heldOut++
		}
		b.sawQueued = false
	default:
		b.size += len(p.p.Entries)
		b.enqueue(p.p.Entries)
		b.plenty = len(p.p.Entries) >= p.n
		b.checkLeases(p)
	}
}
