package roles

import (
	"slices"
	"strconv"
)

// GroupState is the shared state of one group of crawlers
// (znode <root>/group/<group>/state). Field names are the reference's.
type GroupState struct {
	TotalCrawler   int      `json:"total_crawler"`
	TotalRunner    int      `json:"total_runner"`
	TotalBackup    int      `json:"total_backup"`
	StandbyID      string   `json:"standby_id"`
	CurrentCrawler []string `json:"current_crawler"`
	CurrentRunner  []string `json:"current_runner"`
	CurrentBackup  []string `json:"current_backup"`
	FailCrawler    []string `json:"fail_crawler"`
	FailRunner     []string `json:"fail_runner"`
	FailBackup     []string `json:"fail_backup"`
	// MinBackup is how many backups a scale-up keeps (`baton cluster scale
	// --backups`): promotions to reach total_runner stop there. A Baton
	// field, not the reference's; 0 when absent.
	MinBackup int `json:"min_backup,omitempty"`
	// AllRunner records the group's mode when it formed: true for
	// All-are-Runner (configured without backups). A Baton field; when
	// absent (a group formed by an older Baton) the mode is read from the
	// totals, as the reference does.
	AllRunner *bool `json:"all_runner,omitempty"`
}

// NewGroupState returns an empty group configured for runner Runners and
// backup Backup Runners.
func NewGroupState(runner, backup int) GroupState {
	all := backup == 0 && runner > 0
	return GroupState{
		AllRunner:    &all,
		TotalCrawler: runner + backup, TotalRunner: runner, TotalBackup: backup,
		CurrentCrawler: []string{}, CurrentRunner: []string{}, CurrentBackup: []string{},
		FailCrawler: []string{}, FailRunner: []string{}, FailBackup: []string{},
	}
}

// DecodeGroupState parses and validates a GroupState document.
func DecodeGroupState(data []byte) (GroupState, error) {
	var g GroupState
	if err := decode("GroupState", data, &g); err != nil {
		return g, err
	}
	return g, g.Validate()
}

// Validate checks the counters and lists and names the first bad field.
func (g GroupState) Validate() error {
	const o = "GroupState"
	switch {
	case g.TotalCrawler < 0:
		return fieldErr(o, "total_crawler", "is %d, must be >= 0", g.TotalCrawler)
	case g.TotalRunner < 0:
		return fieldErr(o, "total_runner", "is %d, must be >= 0", g.TotalRunner)
	case g.TotalBackup < 0:
		return fieldErr(o, "total_backup", "is %d, must be >= 0", g.TotalBackup)
	case g.MinBackup < 0:
		return fieldErr(o, "min_backup", "is %d, must be >= 0", g.MinBackup)
	}
	lists := []struct {
		field string
		names []string
	}{
		{"current_crawler", g.CurrentCrawler}, {"current_runner", g.CurrentRunner},
		{"current_backup", g.CurrentBackup}, {"fail_crawler", g.FailCrawler},
		{"fail_runner", g.FailRunner}, {"fail_backup", g.FailBackup},
	}
	for _, l := range lists {
		seen := make(map[string]bool, len(l.names))
		for i, n := range l.names {
			if _, err := ParseName(n); err != nil {
				return fieldErr(o, l.field, "entry %d: %v", i, err)
			}
			if seen[n] {
				return fieldErr(o, l.field, "lists %q twice", n)
			}
			seen[n] = true
		}
	}
	if g.StandbyID != "" {
		// standby_id is compared as a string with the decimal index of a
		// crawler, so only that exact form can ever name a backup.
		if n, err := strconv.Atoi(g.StandbyID); err != nil || n < 0 || strconv.Itoa(n) != g.StandbyID {
			return fieldErr(o, "standby_id", "is %q, want a crawler index", g.StandbyID)
		}
	}
	return nil
}

// AllAreRunners reports whether the group runs in All-are-Runner mode.
func (g GroupState) AllAreRunners() bool {
	if g.AllRunner != nil {
		return *g.AllRunner
	}
	return g.TotalBackup == 0 && g.TotalRunner == g.TotalCrawler
}

// Clone returns a deep copy.
func (g GroupState) Clone() GroupState {
	g.CurrentCrawler = slices.Clone(g.CurrentCrawler)
	g.CurrentRunner = slices.Clone(g.CurrentRunner)
	g.CurrentBackup = slices.Clone(g.CurrentBackup)
	g.FailCrawler = slices.Clone(g.FailCrawler)
	g.FailRunner = slices.Clone(g.FailRunner)
	g.FailBackup = slices.Clone(g.FailBackup)
	if g.AllRunner != nil {
		all := *g.AllRunner
		g.AllRunner = &all
	}
	return g
}

// Add appends name to list unless it is already there.
func Add(list []string, name string) []string {
	if slices.Contains(list, name) {
		return list
	}
	return append(list, name)
}

// Remove returns list without name.
func Remove(list []string, name string) []string {
	return slices.DeleteFunc(slices.Clone(list), func(s string) bool { return s == name })
}

// IsStandby reports whether name's index is standby_id.
func (g GroupState) IsStandby(name string) bool {
	return g.StandbyID != "" && g.StandbyID == itoa(IndexOf(name))
}

// Standby returns the current backup whose index is standby_id, or "" when
// standby_id names no current backup.
func (g GroupState) Standby() string {
	for _, b := range g.CurrentBackup {
		if g.IsStandby(b) {
			return b
		}
	}
	return ""
}

// NextStandby returns the index (as a string) of the smallest backup in
// current_backup, or "" when there is none.
func (g GroupState) NextStandby() string {
	best := -1
	for _, n := range g.CurrentBackup {
		if i := IndexOf(n); i >= 0 && (best < 0 || i < best) {
			best = i
		}
	}
	if best < 0 {
		return ""
	}
	return itoa(best)
}

// Formed reports whether the group has elected: a member that registers
// now joins it at once (as a backup, or as a runner while the group wants
// more runners) instead of waiting for an election.
func (g GroupState) Formed() bool {
	return len(g.CurrentRunner) > 0 || len(g.CurrentBackup) > 0
}

// Registered reports whether every member the group is configured with
// has registered (or failed since): the group may elect.
func (g GroupState) Registered() bool {
	return len(g.CurrentCrawler)+len(g.FailCrawler) >= g.TotalCrawler
}

// Unelected lists the current members that have neither role yet: during
// formation each member's Elect adds it to current_runner or
// current_backup in turn, so the lists are partial until all have.
func (g GroupState) Unelected() []string {
	var out []string
	for _, n := range g.CurrentCrawler {
		if !slices.Contains(g.CurrentRunner, n) && !slices.Contains(g.CurrentBackup, n) {
			out = append(out, n)
		}
	}
	return out
}

// WantsRunner reports whether the group has fewer runners than
// total_runner and may take one more from its backups (or from a member
// joining) without going below min_backup.
func (g GroupState) WantsRunner(fromBackup bool) bool {
	if g.AllAreRunners() || len(g.CurrentRunner) >= g.TotalRunner {
		return false
	}
	if fromBackup {
		return len(g.CurrentBackup)-1 >= g.MinBackup
	}
	return len(g.CurrentBackup) >= g.MinBackup
}

// Surplus lists the runners beyond total_runner, the largest indexes
// first: they step down to backups once their work is done (a scale-down).
// Empty in All-are-Runner mode.
func (g GroupState) Surplus() []string {
	if g.AllAreRunners() || len(g.CurrentRunner) <= g.TotalRunner {
		return nil
	}
	rs := slices.Clone(g.CurrentRunner)
	SortNames(rs)
	slices.Reverse(rs)
	return rs[:len(rs)-g.TotalRunner]
}
