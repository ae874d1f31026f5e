package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/crawler"
)

// Sentinel errors of a Store.
var (
	// ErrNoJob: the job is not in this store.
	ErrNoJob = errors.New("no such job")
	// ErrJobExists: another job with this ID (another spec, or another
	// group sharing the store) is in the store.
	ErrJobExists = errors.New("job ID taken")
	// ErrNoBatch: the batch is not in this store.
	ErrNoBatch = errors.New("no such batch")
	// ErrNoBody: no body is stored for the page.
	ErrNoBody = errors.New("no stored body")
	// ErrStale: the writer's epoch is not the batch's (a hand-over or a
	// re-queue raised it): the writer is fenced and must stop.
	ErrStale = errors.New("stale batch epoch")
	// ErrHalted: the job is paused or cancelled (SetControl): the store
	// hands none of its URLs to a Runner (Extend).
	ErrHalted = errors.New("job paused or cancelled")
)

// Control states of a job in the store (SetControl, Control). The job's
// workflow writes them when it is paused, resumed or cancelled; a Runner
// reads them while it crawls a batch of the job, and stops fetching when
// the job is not running.
const (
	ControlRunning   = "running"
	ControlPaused    = "paused"
	ControlCancelled = "cancelled"
)

// ValidControl reports whether state is a control state.
func ValidControl(state string) error {
	switch state {
	case ControlRunning, ControlPaused, ControlCancelled:
		return nil
	}
	return fmt.Errorf("job control state %q: want %s, %s or %s", state, ControlRunning, ControlPaused, ControlCancelled)
}

// Batch states.
const (
	BatchRunning  = "running"
	BatchDone     = "done"
	BatchRequeued = "requeued" // its unfinished URLs went back to the frontier
	BatchFailed   = "failed"   // it could not run; Error says why
)

// Identity names a store: a random ID made when its schema was created,
// the engine and where it is (no credentials). A group records the
// identity of its store in ZooKeeper; a worker or CLI on another store
// refuses to start.
type Identity struct {
	ID       string `json:"id"`
	Engine   string `json:"engine"`   // "sqlite" or "postgres"
	Location string `json:"location"` // file path, or host:port/database
}

func (i Identity) String() string {
	return fmt.Sprintf("%s %s (store id %s)", i.Engine, i.Location, i.ID)
}

// BatchInfo is a batch's row.
type BatchInfo struct {
	Job     string `json:"job"`
	ID      string `json:"id"`
	Holder  string `json:"holder"`
	Epoch   int64  `json:"epoch"`
	Size    int    `json:"size"`
	State   string `json:"state"`
	Error   string `json:"error,omitempty"`
	Success int    `json:"success"` // pages recorded without error (filled by FinishBatch)
	Failed  int    `json:"failed"`  // pages recorded with an error (filled by FinishBatch)
}

// JobInfo is a job's row with its counters.
type JobInfo struct {
	ID      string    `json:"id"`
	Group   string    `json:"group"`
	Created time.Time `json:"created"`
	Stats   Stats     `json:"stats"`
}

// Record is one finished URL of a batch, written by its holder at Epoch.
// Page nil finishes the URL without a result (refused by robots.txt).
type Record struct {
	Job, Batch, Runner string
	Epoch              int64
	URL                string
	Page               *PageRecord
	Links              []Entry // found on the page, already normalised and filtered
	// Items are what a user crawler's handler pushed for the page: recorded
	// with the page, in the same transaction, only if the page is new to
	// the results (so once per job and URL).
	Items []crawler.Pushed
	// Body is the page's body, compressed (CompressBody), to keep in the
	// store with the page (Spec.Bodies "store"); nil: none.
	Body []byte
	// Revisit is what the next run keeps of the page (its validators,
	// content hash, change): written with the page, once per job and URL.
	Revisit *RevisitRecord
	// CarryItemsFrom names the baseline job whose items of this URL are
	// carried over to the page, with their IDs, instead of Items (a user
	// crawler's page answered 304): recorded once per job and URL.
	CarryItemsFrom string
}

// Recorded says what a Record wrote.
type Recorded struct {
	Wrote bool // the page was new to the results
	Added int  // links new to the frontier
}

// Store is the data plane of crawl jobs, as an engine implements it. It
// is the union of narrow interfaces cut by who uses the store, as raft
// cuts its storage into LogStore, StableStore and SnapshotStore; each
// holder takes only its own:
//
//   - ReaderStore: the CLI's read commands (status, results, jobs).
//   - SubmitterStore: the CLI's writes when it submits a job (a seed file,
//     secrets).
//   - SupervisorStore: the job's workflow, which hands batches out and
//     watches them (Activities).
//   - RunnerStore: a Runner crawling a batch it holds (BatchRunner).
//   - SinkDelivery: a worker delivering a job's items to its sinks
//     (Deliverer); SinkOperator: the CLI's sink commands.
//   - ItemStore: the items of user crawlers and their sinks' cursors;
//     ReaderStore and RunnerStore take the part each needs.
//
// Their contracts hold for Store. It adds what no product code holds a
// narrow interface for (Record, Entries, Recorded, Leases: the tests and
// the conformance suite use them) and Close.
//
// Every method is safe for concurrent use by goroutines and by processes
// (on other machines too, for a networked engine). Every write is one
// transaction, except Requeue, which commits twice (see
// SupervisorStore.Requeue); CreateJob and FinishBatch read their counters
// after their commit. RecordAll is the group commit: the pages of several
// URLs of a batch in one transaction, one commit. Every write but Extend
// is idempotent: retried after a lost answer, it finds its rows written
// and changes nothing more (a retried Extend hands out another lot of
// URLs; the first stays in the batch, unfinished, and FinishBatch refuses
// the batch until it is run).
type Store interface {
	ReaderStore
	SubmitterStore
	SupervisorStore
	RunnerStore
	ItemStore
	// Record is RecordAll of one Record.
	Record(ctx context.Context, r Record) (Recorded, error)
	// Entries lists a batch's URLs with their progress.
	Entries(ctx context.Context, job, id string) ([]BatchEntry, error)
	// Recorded reports whether a page for url is in the results.
	Recorded(ctx context.Context, job, url string) (bool, error)
	// Leases returns the host leases a batch holds and that have not
	// expired (Wait as a Pull would answer it), by host.
	Leases(ctx context.Context, job, batch string) ([]HostLease, error)
	// DeleteJob deletes every row of a job in every table — its spec,
	// frontier, results, items, counters, sealed secrets — in one
	// transaction, and returns how many rows there were; ErrNoJob when it
	// has none. Whoever calls it makes sure no Runner still crawls it.
	DeleteJob(ctx context.Context, job string) (int64, error)
	// ReplaceSecrets swaps a job's sealed secrets of the key from for
	// sealed ones of the key to (a key rotation: Sealer.Rewrap); when they
	// are not of the key from (any more), ErrNoSecrets.
	ReplaceSecrets(ctx context.Context, job, from, to string, sealed []byte) error
	// Close releases the store.
	Close() error
}

// ReaderStore is the store as the CLI's read commands hold it: it only
// reads. Two calls do not read one snapshot (nor does Jobs, which reads
// each job's counters apart): while a job is crawled, its counters and
// its results move between two reads.
type ReaderStore interface {
	// Identity names the store.
	Identity() Identity
	// Spec returns a job's spec, or ErrNoJob.
	Spec(ctx context.Context, job string) (Spec, error)
	// Stats returns a job's counters.
	Stats(ctx context.Context, job string) (Stats, error)
	// Jobs lists the jobs, newest first.
	Jobs(ctx context.Context) ([]JobInfo, error)
	// Results calls fn for each page of a job, in the order recorded; a
	// stored page that cannot be read is skipped and named in the error
	// returned after the others.
	Results(ctx context.Context, job string, fn func(PageRecord) error) error
	// ResultsByURL calls fn for each page of a job in byte order of the
	// URLs (Go's string order), streamed: a merge of two jobs' results
	// (Diff) holds one page of each. Unreadable pages: as in Results.
	ResultsByURL(ctx context.Context, job string, fn func(PageRecord) error) error
	// Body returns the stored body of a job's page as recorded
	// (compressed: DecompressBody reads it), or ErrNoBody.
	Body(ctx context.Context, job, url string) ([]byte, error)
	// Refused counts a job's URLs finished without a page: refused by
	// robots.txt (sitemaps apart).
	Refused(ctx context.Context, job string) (int, error)
	// Items: as in ItemStore (the CLI exports a job's items).
	Items(ctx context.Context, job string, after int64, limit int) ([]ItemRecord, error)
	// Sinks: as in ItemStore (the CLI shows the sinks' delivery).
	Sinks(ctx context.Context, job string) ([]SinkState, error)
	// Changes counts a job's pages by change against its baseline (the
	// pages of baseline the job has not recorded are Gone; "" counts
	// none gone).
	Changes(ctx context.Context, job, baseline string) (ChangeStats, error)
	// BaselinePage: as in RevisitReader.
	BaselinePage(ctx context.Context, job, url string) (BaselinePage, bool, error)
}

// SubmitterStore is what the CLI writes when it submits a job whose seeds
// or secrets go to the store before its workflow starts (--seeds-file;
// cookies, authorization, headers, proxy credentials). Each write is
// idempotent (PutSecrets for the same sealed bytes); the workers may run
// meanwhile.
type SubmitterStore interface {
	// Identity names the store.
	Identity() Identity
	// CreateJob: as in SupervisorStore.
	CreateJob(ctx context.Context, spec Spec, seeds []Entry) (Stats, error)
	// AddSeeds queues more seeds (normalised) of a stored job, as CreateJob
	// does, in one transaction: a caller sends a large seed list in chunks,
	// one call each. Idempotent: seeds queued before are not counted
	// again. It returns how many were new.
	AddSeeds(ctx context.Context, job string, seeds []Entry) (int, error)
	// PutSecrets keeps a job's secrets sealed with the key keyID
	// (Sealer.Seal); idempotent for the same bytes, ErrJobExists for
	// other ones. The store never sees them in clear.
	PutSecrets(ctx context.Context, job, keyID string, sealed []byte) error
}

// SupervisorStore is the store as a job's workflow holds it (its
// activities: JobStart, JobAssign, JobAwait, JobDrain, JobControl,
// JobReopen): it creates the job, hands batches out, watches them, fences
// and re-queues the batch of a dead holder, and sets the job's control
// state. An activity may be retried: TakeBatch is idempotent per batch ID,
// CreateJob per spec, SetControl per state. Its writes to a batch race
// those of the batch's holder (a RunnerStore): the batch's epoch orders
// them, and a write at an epoch lower than the batch's is refused with
// ErrStale.
type SupervisorStore interface {
	// Identity names the store.
	Identity() Identity
	// Spec: as in ReaderStore.
	Spec(ctx context.Context, job string) (Spec, error)
	// Stats: as in ReaderStore.
	Stats(ctx context.Context, job string) (Stats, error)
	// CreateJob stores spec and queues its seeds (normalised) in one
	// transaction; calling it again with the same spec changes nothing
	// and returns its counters; with another spec under the same ID it
	// fails with ErrJobExists.
	CreateJob(ctx context.Context, spec Spec, seeds []Entry) (Stats, error)
	// TakeBatch moves up to n queued URLs (fewer once max_pages URLs were
	// handed out) into a new batch id, or returns the batch as it is if id
	// exists (a retried call); an empty frontier gives a batch of size 0
	// that is not stored. The batch takes only URLs of hosts it can hold
	// (see RunnerStore.Pull: host leases), as a batch that wants n requests
	// at once; none free gives a batch of size 0, not stored.
	TakeBatch(ctx context.Context, job, id string, n int) (BatchInfo, error)
	// OpenBatch stores batch id running with no URL, or returns the batch
	// as it is if id exists (a retried call): a start batch, handed to an
	// idle Runner at a job's start, that pulls the first links from the
	// frontier itself as soon as they are recorded (BatchRunner).
	OpenBatch(ctx context.Context, job, id string) (BatchInfo, error)
	// Claim makes holder the batch's holder at epoch, raising the epoch;
	// it refuses with ErrStale when the batch's epoch is higher already.
	// Records of the old holder are refused from then on. A batch that is
	// no longer running is returned as it is. The batch's host leases go
	// with it, renewed; taken from another holder (a hand-over), each
	// holds its host's next request back by the host's delay from now.
	Claim(ctx context.Context, job, id, holder string, epoch int64) (BatchInfo, error)
	// Batches returns the rows of the batches named (missing ones are left
	// out).
	Batches(ctx context.Context, job string, ids []string) ([]BatchInfo, error)
	// Available reports whether a new batch of the job could take a
	// queued URL now: one whose host no batch holds, or holds with a
	// share of its parallelism left (see RunnerStore.Pull). The job hands
	// a batch to an idle Runner only then, not while every queued URL is
	// of a host held in full by another batch. A read; it may look at
	// only the first few thousand queued URLs and hosts (then it may say
	// false while one further on could be taken).
	Available(ctx context.Context, job string) (bool, error)
	// Requeue fences a running batch at epoch (raising it) and puts its
	// unfinished URLs back in the frontier; it returns how many. It
	// commits twice: the fence first (from then on the old holder's
	// writes are refused), then the hand-back, which a Claim between the
	// two makes fail with ErrStale (the URLs stay with the new holder).
	Requeue(ctx context.Context, job, id string, epoch int64) (int, error)
	// FailBatch marks a running batch failed with reason, at epoch or by
	// anyone when epoch is 0 (the job's supervisor).
	FailBatch(ctx context.Context, job, id string, epoch int64, reason string) error
	// SetControl records a job's control state (ControlRunning,
	// ControlPaused, ControlCancelled); idempotent. The job need not be
	// stored yet.
	SetControl(ctx context.Context, job, state string) error
	// RequeueFailed queues the job's URLs whose page was recorded with an
	// error again (a re-run of its failed URLs): their pages (and bodies)
	// leave the results, so the re-run records each once more, and the
	// counters follow (recorded and failed down, queued up). It returns how
	// many; ErrNoJob for an unknown job. Call it while no batch of the job
	// runs.
	RequeueFailed(ctx context.Context, job string) (int, error)
}

// RunnerStore is the store as a Runner holds it while it crawls a batch
// (the frontier it pulls from, the results it records into). A Runner
// may call it from several goroutines at once for one batch: pulls
// (Extend), group commits (RecordAll) and control reads side by side.
// Every write names the epoch the Runner holds the batch at and is
// refused with ErrStale once a Claim or Requeue (SupervisorStore) raised
// it: the store, not the Runner, fences a holder that lost its batch.
type RunnerStore interface {
	// Identity names the store.
	Identity() Identity
	// Spec: as in ReaderStore.
	Spec(ctx context.Context, job string) (Spec, error)
	// Stats: as in ReaderStore (a start batch waits for Queued).
	Stats(ctx context.Context, job string) (Stats, error)
	// ActiveBatches counts the job's running batches that hold or held
	// URLs (size above 0): while there is none, nothing will queue links,
	// and a start batch stops waiting for them.
	ActiveBatches(ctx context.Context, job string) (int, error)
	// Secrets returns what PutSecrets kept, or ErrNoSecrets.
	Secrets(ctx context.Context, job string) (keyID string, sealed []byte, err error)
	// Claim: as in SupervisorStore (a Runner claims a batch it takes over).
	Claim(ctx context.Context, job, id, holder string, epoch int64) (BatchInfo, error)
	// Batches: as in SupervisorStore (a Runner reads its batch's row, to
	// claim it only when its assignment or hand-over has not).
	Batches(ctx context.Context, job string, ids []string) ([]BatchInfo, error)
	// Unfinished lists a batch's URLs handed out and not finished yet, in
	// hand-out order: what a new holder runs (at most what the old one had
	// pulled ahead, however large the batch has grown).
	Unfinished(ctx context.Context, job, id string) ([]Entry, error)
	// Extend moves up to n more queued URLs (within max_pages) into a
	// running batch held at epoch, and returns them; ErrStale when epoch
	// is not the batch's, ErrHalted (nothing handed out) when the job is
	// paused or cancelled. A Runner pulls work this way as it frees slots,
	// so it never waits for the next batch while the frontier has URLs.
	// It is Pull with want n, without the leases.
	Extend(ctx context.Context, job, id string, epoch int64, n int) ([]Entry, error)
	// Pull is Extend for a Runner that keeps the job's politeness: the
	// batch takes only URLs of hosts it holds a lease on, or can lease
	// (HostLease: a host is held by one batch at a time when a delay
	// applies to it, its parallelism is shared among batches when none
	// does), as a batch that wants want requests in flight at once. It
	// renews the batch's leases, sizes the shares it holds to at most want
	// (and grows them up to it from what the other batches leave), drops
	// the leases of hosts the batch has no unfinished URL of, and returns
	// the URLs handed out with every lease the batch holds after it. With
	// n 0 it hands nothing out (and is not refused while the job is
	// paused): a Runner renews its leases so. Leases expire Pulled.TTL
	// after their last renewal; FinishBatch, FailBatch, Release and
	// Requeue drop a batch's leases.
	Pull(ctx context.Context, job, id string, epoch int64, n, want int) (Pulled, error)
	// Leases: as in Store (a batch's run starts with the leases its
	// hand-out took, read, and renews them at once).
	Leases(ctx context.Context, job, batch string) ([]HostLease, error)
	// Robots returns the robots.txt of origin kept for the job (PutRobots)
	// and still fresh (crawl.RobotsFile.TTL is what is left), or a claim
	// on its fetch still running (Fetching, TTL what is left of it), or ok
	// false.
	Robots(ctx context.Context, job, origin string) (f crawl.RobotsFile, ok bool, err error)
	// PutRobots keeps the robots.txt of origin as a Runner fetched it for
	// the job (replacing the one kept, or a claim): every Runner of the
	// job reads it from there, and its Crawl-delay decides whether the
	// host's parallelism may be shared among batches. A file with
	// Fetching set is a claim on its fetch for f.TTL, kept only where the
	// job has no file or claim for origin; a claim does not make the
	// host's robots.txt known to the hand-outs.
	PutRobots(ctx context.Context, job, origin string, f crawl.RobotsFile) error
	// RecordAll records finished URLs of one batch at one epoch in one
	// transaction, checked against the batch's epoch (a group commit: one
	// commit, one fsync, for them all). For each URL it inserts the page
	// into the results (once per job and URL), queues its links (once per
	// job and URL, within max_pages, with the label and data of the first
	// page of the call that found it), marks the URL finished in its batch
	// and counts it. A page new to the results (Recorded.Wrote) brings its
	// Items into the job's items (ItemStore.Items), counted in
	// Stats.Items; a page recorded before brings none.
	//
	// It also flags duplicates: a page fetched without error whose
	// Page.BodyHash is the hash of a page of the job recorded before (or
	// earlier in the same call) gets DuplicateOf set to that page's URL in
	// the stored record; exactly one page per hash is not a duplicate,
	// whatever the concurrency.
	RecordAll(ctx context.Context, rs []Record) ([]Recorded, error)
	// RecordTake is RecordAll that also hands up to take of the links it
	// queues to the batch, in the same transaction, and returns them (in
	// URL order, counted as taken): new links of the hosts of the pages
	// recorded whose leases the batch holds, live; none while the job is
	// paused or cancelled, or when it has max_pages (whose hand-outs are
	// counted under the job's lock). A Runner with free slots so crawls
	// its own pages' links without a Pull: a crawl's first waves are not
	// a commit and a hand-out apart.
	RecordTake(ctx context.Context, rs []Record, take int) ([]Recorded, []Entry, error)
	// FinishBatch marks a running batch whose URLs are all finished done,
	// at epoch, and returns it with its counters.
	FinishBatch(ctx context.Context, job, id string, epoch int64) (BatchInfo, error)
	// FailBatch: as in SupervisorStore (a Runner fails a batch it cannot
	// run, at its epoch).
	FailBatch(ctx context.Context, job, id string, epoch int64, reason string) error
	// Release puts the unfinished URLs of a running batch held at epoch
	// back in the frontier (queued again, ahead of the URLs queued after
	// them), drops the batch's host leases, and returns how many;
	// ErrStale when epoch is not the batch's.
	// The batch stays running with its holder, who ends it with
	// FinishBatch: a Runner that stops because the job was paused or
	// cancelled gives back what it did not fetch.
	Release(ctx context.Context, job, id string, epoch int64) (int, error)
	// Control returns a job's control state: ControlRunning when none was
	// set. It is one indexed read: Runners call it a few times a second.
	Control(ctx context.Context, job string) (string, error)
	// BaselinePage: as in RevisitReader (a run with a baseline reads the
	// baseline's record of each URL it fetches, by key).
	BaselinePage(ctx context.Context, job, url string) (BaselinePage, bool, error)
}
