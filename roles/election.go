package roles

import (
	"slices"
)

// Election decides which members of a group become Runners. Implementations
// must be deterministic: every member computes the same outcome from the
// same inputs.
type Election interface {
	// Elect returns the result for each member, in the order of members.
	Elect(members []string, runners int) []ElectionResult
}

// IndexElection is the reference's election: members sorted by index, the
// `runners` smallest win. Names without an index sort last, by name.
type IndexElection struct{}

// Elect implements Election.
func (IndexElection) Elect(members []string, runners int) []ElectionResult {
	sorted := slices.Clone(members)
	slices.SortStableFunc(sorted, compareNames)
	winners := map[string]bool{}
	for i := 0; i < runners && i < len(sorted); i++ {
		winners[sorted[i]] = true
	}
	out := make([]ElectionResult, len(members))
	for i, m := range members {
		out[i] = Loser
		if winners[m] {
			out[i] = Winner
		}
	}
	return out
}

// compareNames orders crawler names by index, then by name.
func compareNames(a, b string) int {
	ia, ib := IndexOf(a), IndexOf(b)
	switch {
	case ia < 0 && ib >= 0:
		return 1
	case ib < 0 && ia >= 0:
		return -1
	case ia != ib:
		return ia - ib
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// SortNames sorts crawler names by index in place.
func SortNames(names []string) { slices.SortStableFunc(names, compareNames) }

// ResultOf returns the election result of one member.
func ResultOf(e Election, members []string, runners int, name string) ElectionResult {
	i := slices.Index(members, name)
	if i < 0 {
		return Loser
	}
	return e.Elect(members, runners)[i]
}
