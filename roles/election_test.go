package roles

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestElect(t *testing.T) {
	W, L := Winner, Loser
	tests := []struct {
		name    string
		members []string
		runners int
		want    []ElectionResult
	}{
		{"reference 2 of 3", []string{"sc-crawler_1", "sc-crawler_2", "sc-crawler_3"}, 2, []ElectionResult{W, W, L}},
		{"by index not by string", []string{"sc-crawler_10", "sc-crawler_9", "sc-crawler_1"}, 2, []ElectionResult{L, W, W}},
		{"10 after 9 with 9 runners", []string{"a_1", "a_2", "a_3", "a_4", "a_5", "a_6", "a_7", "a_8", "a_9", "a_10"}, 9,
			[]ElectionResult{W, W, W, W, W, W, W, W, W, L}},
		{"unsorted input", []string{"a_3", "a_1", "a_4", "a_2"}, 2, []ElectionResult{L, W, L, W}},
		{"no runners", []string{"a_1", "a_2", "a_3"}, 0, []ElectionResult{L, L, L}},
		{"negative runners", []string{"a_1", "a_2"}, -1, []ElectionResult{L, L}},
		{"all runners", []string{"a_3", "a_1", "a_2"}, 3, []ElectionResult{W, W, W}},
		{"more runners than members", []string{"a_2", "a_1"}, 5, []ElectionResult{W, W}},
		{"mixed separators", []string{"sc-crawler-3", "sc-crawler_1", "sc-crawler-2", "sc-crawler_4"}, 2, []ElectionResult{L, W, W, L}},
		{"names without index sort last", []string{"zzz", "a_5", "a_7"}, 2, []ElectionResult{L, W, W}},
		{"same index: by name", []string{"b_1", "a_1", "c_2"}, 1, []ElectionResult{L, W, L}},
		{"empty", nil, 2, []ElectionResult{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := append([]string(nil), tt.members...)
			got := Elect(tt.members, tt.runners)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, in, tt.members, "Elect must not reorder its input")
			// Every member computes the same result from a shuffled view.
			if len(tt.members) > 1 {
				rev := make([]string, len(tt.members))
				for i, m := range tt.members {
					rev[len(rev)-1-i] = m
				}
				for i, m := range tt.members {
					assert.Equal(t, got[i], ResultOf(rev, tt.runners, m), "member %s", m)
				}
			}
		})
	}
}

func TestResultOf(t *testing.T) {
	members := []string{"sc-crawler_2", "sc-crawler_1", "sc-crawler_3"}
	assert.Equal(t, Winner, ResultOf(members, 1, "sc-crawler_1"))
	assert.Equal(t, Loser, ResultOf(members, 1, "sc-crawler_2"))
	assert.Equal(t, Loser, ResultOf(members, 3, "sc-crawler_9"), "a non-member loses")
}

func TestSortNames(t *testing.T) {
	names := []string{"sc-crawler_10", "x", "sc-crawler-2", "sc-crawler_9", "sc-crawler_1", "b_1"}
	SortNames(names)
	assert.Equal(t, []string{"b_1", "sc-crawler_1", "sc-crawler-2", "sc-crawler_9", "sc-crawler_10", "x"}, names)
}
