package roles

import (
	"slices"
)

// Elect is the election of the reference: members sorted by index, the
// `runners` smallest win; names without an index sort last, by name. It
// returns the result of each member, in the order of members (which it
// does not reorder). It is deterministic: every member computes the same
// outcome from the same members, in any order.
func Elect(members []string, runners int) []ElectionResult {
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
func ResultOf(members []string, runners int, name string) ElectionResult {
	i := slices.Index(members, name)
	if i < 0 {
		return Loser
	}
	return Elect(members, runners)[i]
}
