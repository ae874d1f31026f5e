package roles

import (
	"slices"
)

// MemberState is one member's entry in its group's membership directory
// (znode <root>/group/<group>/members/<name>, a Baton addition): a child
// per elected member, written in the same transaction as every GroupState
// change that concerns it. Instances watch the directory's children (who
// is in the group, for their ring of watched peers) and their own entry
// (their role, standby and surplus flags), so a change wakes only the
// instances it concerns; GroupState stays the reference's document and the
// one that is written under the group lock.
type MemberState struct {
	Role Role `json:"role"` // runner or backup-runner
	// Standby is set on the backup whose index is standby_id.
	Standby bool `json:"standby,omitempty"`
	// Surplus is set on a runner beyond total_runner (a scale-down): it
	// steps down when idle.
	Surplus bool `json:"surplus,omitempty"`
}

// DecodeMemberState parses and validates a MemberState document.
func DecodeMemberState(data []byte) (MemberState, error) {
	var m MemberState
	if err := decode("MemberState", data, &m); err != nil {
		return m, err
	}
	return m, m.Validate()
}

// Validate names the first bad field.
func (m MemberState) Validate() error {
	const o = "MemberState"
	switch {
	case m.Role != RoleRunner && m.Role != RoleBackup:
		return fieldErr(o, "role", "is %q, want runner or backup-runner", string(m.Role))
	case m.Standby && m.Role != RoleBackup:
		return fieldErr(o, "standby", "is set on a %s, only a backup-runner can be the standby", m.Role)
	case m.Surplus && m.Role != RoleRunner:
		return fieldErr(o, "surplus", "is set on a %s, only a runner can be surplus", m.Role)
	}
	return nil
}

// MaxFailHistory bounds fail_crawler, fail_runner and fail_backup: each
// keeps the most recent names, so that a long-lived group whose instances
// come and go does not grow its GroupState, nor the work of whoever reads
// the lists, without end. (The reference's lists grow for ever.)
const MaxFailHistory = 64

// TrimFailHistory drops the oldest names of the fail lists beyond
// MaxFailHistory.
func (g *GroupState) TrimFailHistory() {
	trim := func(l []string) []string {
		if len(l) <= MaxFailHistory {
			return l
		}
		return slices.Clone(l[len(l)-MaxFailHistory:])
	}
	g.FailCrawler, g.FailRunner, g.FailBackup = trim(g.FailCrawler), trim(g.FailRunner), trim(g.FailBackup)
}

// Members returns the entries of the group's membership directory that g
// implies: its current runners and backups, sorted by index.
func (g GroupState) Members() ([]string, map[string]MemberState) {
	surplus := g.Surplus()
	states := make(map[string]MemberState, len(g.CurrentRunner)+len(g.CurrentBackup))
	for _, r := range g.CurrentRunner {
		states[r] = MemberState{Role: RoleRunner, Surplus: slices.Contains(surplus, r)}
	}
	for _, b := range g.CurrentBackup {
		if _, ok := states[b]; !ok { // listed as both: the runner entry wins
			states[b] = MemberState{Role: RoleBackup, Standby: g.IsStandby(b)}
		}
	}
	names := make([]string, 0, len(states))
	for n := range states {
		names = append(names, n)
	}
	SortNames(names)
	return names, states
}
