package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/jobstore"
	"github.com/batoncrawl/baton/activities/metadata"
	"github.com/batoncrawl/baton/roles"
)

// PageFetcher fetches one page of a crawl job; *crawl.Engine implements it.
type PageFetcher interface {
	Fetch(ctx context.Context, req roles.Request, auth crawl.Auth, depth int, opts crawl.Options) crawl.Page
}

// JobSpec is a crawl job as submitted by the starter.
type JobSpec struct {
	ID            string            `json:"id"`
	Group         string            `json:"group"`
	Seeds         []string          `json:"seeds"`
	Options       crawl.Options     `json:"options"`
	MaxPages      int               `json:"max_pages"`  // 0: no limit
	BatchSize     int               `json:"batch_size"` // URLs per Task
	Cookie        map[string]string `json:"cookie,omitempty"`
	Authorization map[string]string `json:"authorization,omitempty"`
	Timers        roles.Timers      `json:"timers"`
}

// ErrTypeBadJob marks a job spec that cannot run.
const ErrTypeBadJob = "BatonBadJob"

// Validate names the first bad field; seeds are checked as URLs.
func (s JobSpec) Validate() error {
	if err := jobstore.ValidID(s.ID); err != nil {
		return fmt.Errorf("id: %w", err)
	}
	if s.Group == "" {
		return errors.New("group: empty")
	}
	if len(s.Seeds) == 0 {
		return errors.New("seeds: at least one URL is required")
	}
	for i, u := range s.Seeds {
		if err := (roles.Request{URL: u}).Validate(); err != nil {
			return fmt.Errorf("seeds[%d]: %w", i, err)
		}
	}
	if s.MaxPages < 0 {
		return fmt.Errorf("max_pages: %d is negative", s.MaxPages)
	}
	if s.BatchSize < 1 {
		return fmt.Errorf("batch_size: %d, must be >= 1", s.BatchSize)
	}
	if err := s.Options.Validate(); err != nil {
		return fmt.Errorf("options: %w", err)
	}
	return nil
}

// BatchRef is one batch in flight: which Runner it was given to.
type BatchRef struct {
	Batch  string `json:"batch"`
	Runner string `json:"runner"`
	Size   int    `json:"size"`
}

// JobAssignInput asks for batches for idle Runners.
type JobAssignInput struct {
	Spec     JobSpec    `json:"spec"`
	InFlight []BatchRef `json:"in_flight"`
	Seq      int        `json:"seq"` // number of the next batch
}

// JobAssignResult lists the batches handed out.
type JobAssignResult struct {
	Assigned []BatchRef     `json:"assigned"`
	Stats    jobstore.Stats `json:"stats"`
}

// JobAwaitResult is what changed for a job's batches.
type JobAwaitResult struct {
	Done     []BatchRef     `json:"done"`
	Requeued []BatchRef     `json:"requeued"` // re-queued: their Runner died and nobody took over
	Idle     bool           `json:"idle"`     // an idle Runner could take more work
	Stats    jobstore.Stats `json:"stats"`
}

// PageRecord is one line of a job's results.
type PageRecord struct {
	crawl.Page
	Job    string `json:"job"`
	Batch  string `json:"batch"`
	Runner string `json:"runner"`
	Epoch  int64  `json:"epoch"`
}

func (a *Activities) jobs() (*jobstore.Store, error) {
	if a.Jobs == nil {
		return nil, errors.New("no job store configured (worker --data-dir)")
	}
	return a.Jobs, nil
}

// JobStart creates the job's frontier with its normalised seeds. Idempotent.
func (a *Activities) JobStart(ctx context.Context, spec JobSpec) (jobstore.Stats, error) {
	if err := spec.Validate(); err != nil {
		return jobstore.Stats{}, temporal.NewNonRetryableApplicationError("invalid job: "+err.Error(), ErrTypeBadJob, err)
	}
	js, err := a.jobs()
	if err != nil {
		return jobstore.Stats{}, err
	}
	var seeds []jobstore.Entry
	for _, s := range spec.Seeds {
		n, err := crawl.NormalizeURL(s)
		if err != nil {
			return jobstore.Stats{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("seed %q: %v", s, err), ErrTypeBadJob, err)
		}
		seeds = append(seeds, jobstore.Entry{URL: n})
	}
	return js.Create(spec.ID, spec, seeds, spec.MaxPages)
}

// idleRunners lists the group's runners that are alive (fresh heartbeat)
// and have no pending Task, in order of availability: those without a Task
// in flight for a while come first (rotated by seq to spread the load).
//
// g is the GroupState the caller read; tasks holds the Tasks it read
// already (nil or partial: the others are read here).
func (a *Activities) idleRunners(ctx context.Context, c *metadata.Cluster, g roles.GroupState, tasks map[string]roles.Task, busy []BatchRef, seq int) []string {
	task := func(name string) (roles.Task, error) {
		if t, ok := tasks[name]; ok {
			return t, nil
		}
		t, _, err := c.GetTask(ctx, name)
		return t, err
	}
	runners := slices.Clone(g.CurrentRunner)
	roles.SortNames(runners)
	// A runner in the middle of a fail-over (it claimed a dead peer whose
	// Task it has not taken yet) is not idle: its Task is about to be the
	// dead peer's.
	takingOver := map[string]bool{}
	for _, d := range g.FailCrawler {
		dn, _, err := c.GetNode(ctx, d)
		if err != nil || dn.TakenOverBy == "" {
			continue
		}
		if dt, err := task(d); err == nil && dt.Pending() && dt.Holder != dn.TakenOverBy {
			takingOver[dn.TakenOverBy] = true
		}
	}
	var idle []string
	for _, r := range runners {
		if takingOver[r] || slices.ContainsFunc(busy, func(b BatchRef) bool { return b.Runner == r }) {
			continue
		}
		n, _, err := c.GetNode(ctx, r)
		if err != nil || n.Role != roles.RoleRunner {
			continue
		}
		hb, _, err := c.GetHeartbeat(ctx, r)
		if err != nil {
			continue
		}
		timeout, _ := hb.Timeout()
		if age, err := hb.Age(a.now()); err != nil || age >= timeout || hb.HealthyState == roles.HeartApparentDeath {
			continue
		}
		t, err := task(r)
		if err != nil && !errors.Is(err, metadata.ErrNotFound) {
			continue
		}
		if t.Pending() {
			continue
		}
		idle = append(idle, r)
	}
	if len(idle) > 1 {
		k := seq % len(idle)
		idle = append(idle[k:], idle[:k]...)
	}
	return idle
}

// JobAssign hands a batch of the frontier to each idle Runner by writing it
// as the Runner's Task (compare-and-set, epoch raised), the way the ZeroMQ
// design of seed 003 gives work to the workers that said they are free.
// Batch IDs come from Seq, so a retried call re-assigns the same batches.
func (a *Activities) JobAssign(ctx context.Context, in JobAssignInput) (JobAssignResult, error) {
	ctx = logWith(ctx, "", "job", in.Spec.ID)
	js, err := a.jobs()
	if err != nil {
		return JobAssignResult{}, err
	}
	c := a.cluster(in.Spec.Group)
	g, _, err := c.GetGroup(ctx)
	if err != nil {
		return JobAssignResult{}, a.corrupt(ctx, err)
	}
	idle := a.idleRunners(ctx, c, g, nil, in.InFlight, in.Seq)
	opts, _ := json.Marshal(in.Spec.Options)
	var res JobAssignResult
	seq := in.Seq
	// While the frontier is short (the start and the end of a crawl), share
	// it among all the Runners instead of giving it to the first idle ones,
	// so that no Runner is left with a long batch while the others idle.
	size := in.Spec.BatchSize
	if st, err := js.Stats(in.Spec.ID); err == nil {
		if n := max(len(idle), len(g.CurrentRunner)); n > 0 {
			size = min(size, max(1, (st.Queued+n-1)/n))
		}
	}
	for _, r := range idle {
		batch := fmt.Sprintf("%s-b%06d", in.Spec.ID, seq)
		entries, err := js.TakeBatch(in.Spec.ID, batch, size)
		if err != nil {
			return res, err
		}
		if len(entries) == 0 {
			break
		}
		cur, v, err := c.GetTask(ctx, r)
		if err != nil && !isCorrupt(err) {
			return res, err
		}
		if cur.Job == nil || cur.Job.Batch != batch {
			if cur.Pending() {
				continue // became busy meanwhile; the batch goes to the next idle Runner
			}
			t := roles.EmptyTask()
			t.Cookie, t.Authorization = cloneMap(in.Spec.Cookie), cloneMap(in.Spec.Authorization)
			for i, e := range entries {
				t.RunningContent = append(t.RunningContent, roles.Request{TaskID: i, URL: e.URL, Method: "GET", Depth: e.Depth})
			}
			t.Epoch = cur.Epoch + 1
			t.Job = &roles.JobRef{ID: in.Spec.ID, Batch: batch, Options: opts}
			// Given to r and marked processing at once: the Runner starts
			// fetching without a write of its own.
			t.Holder, t.RunningStatus, t.InProgressingID = r, roles.TaskProcessing, "0"
			if _, err := c.Store.Set(ctx, c.TaskPath(r), metadata.Encode(t), v); err != nil {
				if errors.Is(err, metadata.ErrBadVersion) {
					continue
				}
				return res, err
			}
		}
		res.Assigned = append(res.Assigned, BatchRef{Batch: batch, Runner: r, Size: len(entries)})
		seq++
	}
	res.Stats, err = js.Stats(in.Spec.ID)
	return res, err
}

func cloneMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// JobAwait waits until a batch in flight finishes, a batch must be
// re-queued, or an idle Runner could take more work (while the frontier has
// some), and returns at least every few seconds with fresh counters. A
// batch is found wherever its Task lives now: after a fail-over it is in the
// backup's znode. A batch whose holder is dead and that nobody claimed
// within twice the detection bound is fenced (its Task marked terminate at
// a higher epoch) and its unfinished URLs re-queued.
func (a *Activities) JobAwait(ctx context.Context, spec JobSpec, inflight []BatchRef) (JobAwaitResult, error) {
	ctx = logWith(ctx, "", "job", spec.ID)
	js, err := a.jobs()
	if err != nil {
		return JobAwaitResult{}, err
	}
	c := a.cluster(spec.Group)
	orphanAfter := 2*spec.Timers.DetectionBound() + 2*time.Second
	deadline := a.now().Add(5 * time.Second)
	for {
		var res JobAwaitResult
		gd, _, gch, err := a.Store.GetW(ctx, c.GroupPath())
		if err != nil {
			return res, err
		}
		g, err := roles.DecodeGroupState(gd)
		if err != nil {
			return res, a.corrupt(ctx, &metadata.CorruptError{Path: c.GroupPath(), Err: err})
		}
		members := append(slices.Clone(g.CurrentCrawler), g.FailCrawler...)
		var chans []<-chan struct{}
		chans = append(chans, gch)
		tasks := map[string]roles.Task{}
		versions := map[string]int32{}
		for _, n := range members {
			td, v, ch, err := a.Store.GetW(ctx, c.TaskPath(n))
			if err != nil {
				continue
			}
			chans = append(chans, ch)
			if t, err := roles.DecodeTask(td); err == nil {
				tasks[n], versions[n] = t, v
			}
		}
		for _, b := range inflight {
			state, holder := a.batchState(b, members, tasks)
			switch state {
			case batchDone:
				res.Done = append(res.Done, b)
			case batchRunning:
				if !a.holderGone(ctx, c, holder, orphanAfter) {
					continue
				}
				t := tasks[holder]
				fencedT := t.Clone()
				fencedT.RunningStatus, fencedT.Epoch = roles.TaskTerminate, t.Epoch+1
				if _, err := c.Store.Set(ctx, c.TaskPath(holder), metadata.Encode(fencedT), versions[holder]); err != nil {
					continue // it moved or finished meanwhile; look again next round
				}
				var rest []jobstore.Entry
				for _, r := range t.RunningContent[t.NextIndex:] {
					rest = append(rest, jobstore.Entry{URL: r.URL, Depth: r.Depth})
				}
				if _, err := js.Requeue(spec.ID, rest); err != nil {
					return res, err
				}
				a.log(ctx).Warn("batch re-queued: its runner died with nobody to take over", "batch", b.Batch, "runner", holder, "urls", len(rest))
				res.Requeued = append(res.Requeued, b)
			}
		}
		res.Stats, err = js.Stats(spec.ID)
		if err != nil {
			return res, err
		}
		if res.Stats.Queued > 0 {
			idle := a.idleRunners(ctx, c, g, tasks, inflight, 0)
			res.Idle = len(idle) > 0
		}
		if len(res.Done) > 0 || len(res.Requeued) > 0 || res.Idle || a.now().After(deadline) || len(inflight) == 0 && res.Stats.Queued == 0 {
			return res, nil
		}
		heartbeat(ctx, res.Stats)
		merged := make(chan struct{})
		stop := make(chan struct{})
		for _, ch := range chans {
			go func(ch <-chan struct{}) {
				select {
				case <-ch:
					select {
					case merged <- struct{}{}:
					case <-stop:
					}
				case <-stop:
				}
			}(ch)
		}
		err = wait(ctx, merged, spec.Timers.CheckCrawlerState*2)
		close(stop)
		if err != nil {
			return res, err
		}
	}
}

type batchStateKind int

const (
	batchMissing batchStateKind = iota
	batchRunning
	batchDone
)

// batchState finds the live copy of a batch: the Task carrying it whose
// holder is the znode's owner (a moved-away copy names its new holder).
func (a *Activities) batchState(b BatchRef, members []string, tasks map[string]roles.Task) (batchStateKind, string) {
	best, holder := int64(-1), ""
	state := batchMissing
	for _, n := range members {
		t, ok := tasks[n]
		if !ok || t.Job == nil || t.Job.Batch != b.Batch {
			continue
		}
		if t.Holder != "" && t.Holder != n {
			continue // a copy that was handed over to t.Holder
		}
		if t.Epoch > best {
			best, holder = t.Epoch, n
			switch t.RunningStatus {
			case roles.TaskDone, roles.TaskTerminate, roles.TaskError:
				state = batchDone
			default:
				state = batchRunning
			}
		}
	}
	if state == batchMissing {
		// Overwritten by a later assignment: it finished (a Runner only
		// gets a new Task when its Task is not pending).
		return batchDone, ""
	}
	return state, holder
}

// holderGone reports whether holder is dead or silent for longer than d and
// nobody claimed it.
func (a *Activities) holderGone(ctx context.Context, c *metadata.Cluster, holder string, d time.Duration) bool {
	n, _, err := c.GetNode(ctx, holder)
	if err == nil && n.TakenOverBy != "" && !a.claimerDead(ctx, c, n.TakenOverBy) {
		return false // a backup is handing it over
	}
	hb, _, err := c.GetHeartbeat(ctx, holder)
	if err != nil {
		return false
	}
	age, err := hb.Age(a.now())
	return err == nil && age > d
}
