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
}

// NewGroupState returns an empty group configured for runner Runners and
// backup Backup Runners.
func NewGroupState(runner, backup int) GroupState {
	return GroupState{
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
