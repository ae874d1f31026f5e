package roles

// Role is the part an instance plays in its group (NodeState.role).
type Role string

// Roles, with the reference's exact strings.
const (
	RoleInitial          Role = "initial"
	RoleRunner           Role = "runner"
	RoleBackup           Role = "backup-runner"
	RoleDeadRunner       Role = "dead-runner"
	RoleDeadBackupRunner Role = "dead-backup-runner"
)

// Valid reports whether r is one of the known roles.
func (r Role) Valid() bool {
	switch r {
	case RoleInitial, RoleRunner, RoleBackup, RoleDeadRunner, RoleDeadBackupRunner:
		return true
	}
	return false
}

// Dead reports whether r is a dead role.
func (r Role) Dead() bool { return r == RoleDeadRunner || r == RoleDeadBackupRunner }

// TaskState is Task.running_status and Heartbeat.task_state.
type TaskState string

// Task states, with the reference's exact strings.
const (
	TaskNothing    TaskState = "nothing"
	TaskProcessing TaskState = "processing"
	TaskDone       TaskState = "done"
	TaskTerminate  TaskState = "terminate"
	TaskError      TaskState = "error"
)

// Valid reports whether s is one of the known task states.
func (s TaskState) Valid() bool {
	switch s {
	case TaskNothing, TaskProcessing, TaskDone, TaskTerminate, TaskError:
		return true
	}
	return false
}

// HeartState is Heartbeat.healthy_state.
type HeartState string

// Heart states, with the reference's exact strings.
const (
	HeartNewborn       HeartState = "Newborn"
	HeartHealthy       HeartState = "Healthy"
	HeartArrhythmia    HeartState = "Arrhythmia"
	HeartAsystole      HeartState = "Asystole"
	HeartApparentDeath HeartState = "Apparent Death"
)

// Valid reports whether s is one of the known heart states.
func (s HeartState) Valid() bool {
	switch s {
	case HeartNewborn, HeartHealthy, HeartArrhythmia, HeartAsystole, HeartApparentDeath:
		return true
	}
	return false
}

// ElectionResult is the outcome of an election for one member.
type ElectionResult string

// Election results, with the reference's exact strings.
const (
	Winner ElectionResult = "Winner"
	Loser  ElectionResult = "Loser"
)
