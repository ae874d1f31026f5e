package roles

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

func ringNames(idx ...int) []string {
	out := make([]string, len(idx))
	for i, n := range idx {
		out[i] = fmt.Sprintf("sc-crawler_%d", n)
	}
	return out
}

func TestRingSuccessors(t *testing.T) {
	n := func(i int) string { return ringNames(i)[0] }
	ring := ringNames(5, 1, 3, 2, 4) // any order: the ring is by index
	assert.Equal(t, ringNames(2, 3), RingSuccessors(ring, n(1), 2))
	assert.Equal(t, ringNames(5, 1), RingSuccessors(ring, n(4), 2))
	assert.Equal(t, ringNames(1, 2), RingSuccessors(ring, n(5), 2), "the ring wraps")
	assert.Equal(t, ringNames(4, 5), RingSuccessors(ring, n(3), 2))
	assert.Equal(t, ringNames(1, 2), RingSuccessors(ringNames(1, 2), n(3), 2), "small group: everyone")
	assert.Equal(t, ringNames(5, 1), RingSuccessors(ringNames(1, 2, 5), n(3), 2), "not a member: its place in the ring")
	// Every member is watched by exactly k others.
	for _, m := range ring {
		assert.Len(t, RingWatchersOf(ring, m, 2), 2, "%s watched by", m)
	}
	assert.Equal(t, ringNames(4, 5), RingWatchersOf(ring, n(1), 2))
	assert.Equal(t, ringNames(1), RingWatchersOf(ringNames(1, 2), n(2), 2), "a pair watch each other")
	assert.Empty(t, RingWatchersOf(ringNames(1), n(1), 2), "alone: nobody")
}
