package cluster

import (
	"time"

	"github.com/batoncrawl/baton/roles"
)

// Member is who an activity acts for and the cluster it belongs to.
type Member struct {
	Group  string       `json:"group"`
	Name   string       `json:"name"`
	Runner int          `json:"runner"`
	Backup int          `json:"backup"`
	Timers roles.Timers `json:"timers"`
	// Capacity bounds how many Tasks one instance runs at once in
	// All-are-Runner mode (its own plus those it took over).
	Capacity int `json:"capacity"`
}

// AllAreRunners reports whether the member's cluster has no backups.
func (m Member) AllAreRunners() bool { return m.Backup == 0 }

// Index returns the member's crawler index.
func (m Member) Index() int { return roles.IndexOf(m.Name) }

// RegisterResult says how an instance (re)joined.
type RegisterResult struct {
	Role     roles.Role `json:"role"`
	Rejoined bool       `json:"rejoined"`
	Resumed  bool       `json:"resumed"`
}

// Position is an instance's current place in its group.
type Position struct {
	Role      roles.Role `json:"role"`
	Standby   bool       `json:"standby"`    // its index is standby_id
	AllRunner bool       `json:"all_runner"` // the group has no backups
	// Missing is set when the instance's NodeState does not exist (the
	// metadata was wiped): the life cycle registers it again.
	Missing bool `json:"missing,omitempty"`
}

// WaitTaskResult is why a Runner stopped waiting.
type WaitTaskResult struct {
	Pending bool       `json:"pending"` // its own Task has requests to run
	Fenced  bool       `json:"fenced"`  // it was marked dead or lost its role
	Role    roles.Role `json:"role"`
}

// RunTaskInput names the Task to run: Owner's Task znode, run by Self.
type RunTaskInput struct {
	Member Member `json:"member"`
	Owner  string `json:"owner"`
}

// RunTaskResult summarises one run of a Task.
type RunTaskResult struct {
	Owner    string              `json:"owner"`
	Epoch    int64               `json:"epoch"`
	Ran      int                 `json:"ran"` // requests run by this call
	Result   roles.RunningResult `json:"running_result"`
	Status   roles.TaskState     `json:"running_status"`
	Fenced   bool                `json:"fenced"`
	Duration time.Duration       `json:"duration"`
	Tasks    int                 `json:"tasks"` // Tasks run by this call (a crawl job's batches follow each other)
	Job      bool                `json:"job"`   // the Task belonged to a crawl job
}

// WatchInput configures a heartbeat watch.
type WatchInput struct {
	Member Member `json:"member"`
	// Free is how many more Tasks the watcher can take (All-are-Runner
	// mode); dead runners are returned only while Free > 0, else reported
	// for a survivor with room.
	Free int `json:"free"`
	// As is the role of the workflow that watches: backup-runner for the
	// Primary Backup, which ends the watch (Changed) once its instance is
	// a runner; runner (or empty, from workflows recorded before it was
	// set) for a Runner.
	As roles.Role `json:"as,omitempty"`
}

// WatchResult is what a heartbeat watch found.
type WatchResult struct {
	Dead     string     `json:"dead,omitempty"`
	DeadRole roles.Role `json:"dead_role,omitempty"` // the role it had: runner or backup-runner
	Changed  bool       `json:"changed"`             // the watcher's own position changed
	Position Position   `json:"position"`
	// Promote: the watcher is the standby and the group wants more runners
	// than it has (a scale-up); the Primary Backup runs Promote.
	Promote bool `json:"promote,omitempty"`
	// DetectedAfter is the dead peer's heartbeat age when it was declared dead.
	DetectedAfter time.Duration `json:"detected_after,omitempty"`
	// Beat is the dead peer's heart_rhythm_time when it was declared dead
	// ("" if its heartbeat could not be read), for Discover to check that
	// it has not beaten since.
	Beat string `json:"beat,omitempty"`
}

// PeerInput names a peer acted on by Self.
type PeerInput struct {
	Member   Member     `json:"member"`
	Dead     string     `json:"dead"`
	DeadRole roles.Role `json:"dead_role"`
	// Beat is WatchResult.Beat: Discover claims nothing if the peer's
	// heartbeat was written since (a detection acted on late, e.g. after
	// a Temporal outage). Empty: not checked.
	Beat string `json:"beat,omitempty"`
}

// DiscoverResult says whether Self now owns the dead peer's hand-over.
type DiscoverResult struct {
	Claimed bool       `json:"claimed"`
	By      string     `json:"by,omitempty"` // who holds the claim if not Self
	Task    roles.Task `json:"task"`
}

// HandOverResult says where the handed-over Task now lives.
type HandOverResult struct {
	Owner   string          `json:"owner"` // whose Task znode to run
	Pending bool            `json:"pending"`
	Status  roles.TaskState `json:"status"`
	// Also lists other Task znodes the dead peer held (All-are-Runner: Tasks
	// it had itself taken over), now held by the claimer too.
	Also []string `json:"also,omitempty"`
}
