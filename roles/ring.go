package roles

import "slices"

// RingWatchers is how many members watch each member: every member
// (runner or backup) watches its RingWatchers successors on the ring of
// the group's elected members sorted by index, so each instance's cost
// stays flat as the group grows (nobody reads every peer's heartbeat) and
// every member, a lone backup included, is watched by that many
// predecessors.
const RingWatchers = 2

// RingSuccessors returns the k members after self on the ring of members
// sorted by index (fewer when the group is smaller): the peers self
// watches. A name not in members gets the k that would follow it.
func RingSuccessors(members []string, self string, k int) []string {
	ring := slices.Clone(members)
	SortNames(ring)
	ring = slices.Compact(slices.DeleteFunc(ring, func(n string) bool { return n == self }))
	if len(ring) <= k {
		return ring
	}
	// Where self would be in the sorted ring: its successors follow.
	i, _ := slices.BinarySearchFunc(ring, self, func(a, b string) int {
		return IndexOf(a) - IndexOf(b)
	})
	out := make([]string, 0, k)
	for j := 0; j < k; j++ {
		out = append(out, ring[(i+j)%len(ring)])
	}
	return out
}

// RingWatchersOf returns the members that watch name (those whose k ring
// successors include it), sorted by index.
func RingWatchersOf(members []string, name string, k int) []string {
	var out []string
	for _, m := range members {
		if m != name && slices.Contains(RingSuccessors(members, m, k), name) {
			out = append(out, m)
		}
	}
	SortNames(out)
	return slices.Compact(out)
}
