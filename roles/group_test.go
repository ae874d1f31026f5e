package roles

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNewGroupState(t *testing.T) {
	g := NewGroupState(2, 1)
	assert.Equal(t, 3, g.TotalCrawler)
	assert.Equal(t, 2, g.TotalRunner)
	assert.Equal(t, 1, g.TotalBackup)
	assert.Equal(t, "", g.StandbyID)
	for _, l := range [][]string{g.CurrentCrawler, g.CurrentRunner, g.CurrentBackup, g.FailCrawler, g.FailRunner, g.FailBackup} {
		assert.NotNil(t, l, "lists are empty, not null, so the JSON has []")
		assert.Empty(t, l)
	}
	require.NoError(t, g.Validate())
	assert.False(t, g.AllAreRunners())
	assert.True(t, NewGroupState(3, 0).AllAreRunners())
}

func TestGroupStateValidate(t *testing.T) {
	ok := func() GroupState {
		g := NewGroupState(2, 1)
		g.CurrentCrawler = []string{"sc-crawler_1", "sc-crawler_2", "sc-crawler-3"}
		g.CurrentRunner = []string{"sc-crawler_1", "sc-crawler_2"}
		g.CurrentBackup = []string{"sc-crawler-3"}
		g.StandbyID = "3"
		return g
	}
	require.NoError(t, ok().Validate())

	tests := []struct {
		name  string
		mod   func(*GroupState)
		field string
	}{
		{"negative total_crawler", func(g *GroupState) { g.TotalCrawler = -1 }, "total_crawler"},
		{"negative total_runner", func(g *GroupState) { g.TotalRunner = -1 }, "total_runner"},
		{"negative total_backup", func(g *GroupState) { g.TotalBackup = -1 }, "total_backup"},
		{"duplicate current_crawler", func(g *GroupState) { g.CurrentCrawler = append(g.CurrentCrawler, "sc-crawler_2") }, "current_crawler"},
		{"duplicate current_runner", func(g *GroupState) { g.CurrentRunner = []string{"sc-crawler_1", "sc-crawler_1"} }, "current_runner"},
		{"duplicate current_backup", func(g *GroupState) { g.CurrentBackup = []string{"sc-crawler-3", "sc-crawler-3"} }, "current_backup"},
		{"duplicate fail_crawler", func(g *GroupState) { g.FailCrawler = []string{"sc-crawler_4", "sc-crawler_4"} }, "fail_crawler"},
		{"duplicate fail_runner", func(g *GroupState) { g.FailRunner = []string{"sc-crawler_4", "sc-crawler_4"} }, "fail_runner"},
		{"duplicate fail_backup", func(g *GroupState) { g.FailBackup = []string{"sc-crawler_4", "sc-crawler_4"} }, "fail_backup"},
		{"bad name current_crawler", func(g *GroupState) { g.CurrentCrawler[1] = "crawler" }, "current_crawler"},
		{"bad name current_runner", func(g *GroupState) { g.CurrentRunner[0] = "" }, "current_runner"},
		{"bad name current_backup", func(g *GroupState) { g.CurrentBackup[0] = "sc-crawler_" }, "current_backup"},
		{"bad name fail_crawler", func(g *GroupState) { g.FailCrawler = []string{"x"} }, "fail_crawler"},
		{"bad name fail_runner", func(g *GroupState) { g.FailRunner = []string{"x_y"} }, "fail_runner"},
		{"bad name fail_backup", func(g *GroupState) { g.FailBackup = []string{"_1"} }, "fail_backup"},
		{"standby_id word", func(g *GroupState) { g.StandbyID = "three" }, "standby_id"},
		{"standby_id name", func(g *GroupState) { g.StandbyID = "sc-crawler_3" }, "standby_id"},
		{"standby_id with separator", func(g *GroupState) { g.StandbyID = "1_3" }, "standby_id"},
		{"standby_id negative", func(g *GroupState) { g.StandbyID = "-3" }, "standby_id"},
		{"standby_id signed", func(g *GroupState) { g.StandbyID = "+3" }, "standby_id"},
		{"standby_id padded", func(g *GroupState) { g.StandbyID = " 3" }, "standby_id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := ok()
			tt.mod(&g)
			requireFieldError(t, g.Validate(), "GroupState", tt.field)
		})
	}
	t.Run("error names the bad entry", func(t *testing.T) {
		g := ok()
		g.CurrentRunner = []string{"sc-crawler_1", "sc-crawler_1"}
		err := g.Validate()
		assert.Contains(t, err.Error(), `"sc-crawler_1"`)
		g = ok()
		g.CurrentCrawler[2] = "nobody"
		assert.Contains(t, g.Validate().Error(), "entry 2")
	})
	t.Run("the same name in different lists is fine", func(t *testing.T) {
		g := ok()
		g.FailCrawler = []string{"sc-crawler_4"}
		g.FailRunner = []string{"sc-crawler_4"}
		require.NoError(t, g.Validate())
	})
}

func TestGroupStateCloneIsDeep(t *testing.T) {
	g := NewGroupState(1, 1)
	g.CurrentCrawler = []string{"a_1", "a_2"}
	g.CurrentRunner = []string{"a_1"}
	g.CurrentBackup = []string{"a_2"}
	g.FailCrawler, g.FailRunner, g.FailBackup = []string{"a_3"}, []string{"a_3"}, []string{"a_4"}
	c := g.Clone()
	require.Equal(t, g, c)
	c.CurrentCrawler[0], c.CurrentRunner[0], c.CurrentBackup[0] = "x_9", "x_9", "x_9"
	c.FailCrawler[0], c.FailRunner[0], c.FailBackup[0] = "x_9", "x_9", "x_9"
	assert.Equal(t, []string{"a_1", "a_2"}, g.CurrentCrawler)
	assert.Equal(t, []string{"a_1"}, g.CurrentRunner)
	assert.Equal(t, []string{"a_2"}, g.CurrentBackup)
	assert.Equal(t, []string{"a_3"}, g.FailCrawler)
	assert.Equal(t, []string{"a_3"}, g.FailRunner)
	assert.Equal(t, []string{"a_4"}, g.FailBackup)
}

func TestAddRemove(t *testing.T) {
	l := []string{"a_1"}
	l = Add(l, "a_2")
	l = Add(l, "a_1")
	assert.Equal(t, []string{"a_1", "a_2"}, l, "Add never duplicates")
	orig := []string{"a_1", "a_2", "a_3"}
	r := Remove(orig, "a_2")
	assert.Equal(t, []string{"a_1", "a_3"}, r)
	assert.Equal(t, []string{"a_1", "a_2", "a_3"}, orig, "Remove does not modify its input")
	assert.Equal(t, []string{"a_1", "a_3"}, Remove(r, "a_9"))
	assert.Empty(t, Remove(nil, "a_1"))
}

func TestNextStandby(t *testing.T) {
	tests := []struct {
		backups []string
		want    string
	}{
		{nil, ""},
		{[]string{"sc-crawler_3"}, "3"},
		{[]string{"sc-crawler_10", "sc-crawler_9", "sc-crawler_4"}, "4"},
		{[]string{"sc-crawler_10", "sc-crawler_9"}, "9"}, // by index, not by string
		{[]string{"sc-crawler-5", "sc-crawler_6"}, "5"},
		{[]string{"nobody", "sc-crawler_7"}, "7"},
	}
	for _, tt := range tests {
		g := NewGroupState(1, len(tt.backups))
		g.CurrentBackup = tt.backups
		assert.Equal(t, tt.want, g.NextStandby(), "backups %v", tt.backups)
	}
}
