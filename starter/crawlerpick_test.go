package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// An unknown --crawler names the group's crawlers and suggests the
// nearest name when it looks like a typo of one.
func TestUnknownCrawlerSuggestsTheNearestName(t *testing.T) {
	byName := map[string]map[string][]string{
		"builtin": {"v1.2.0": {"sc-crawler_1"}},
		"shop":    {"1.4": {"sc-crawler_1"}},
		"jsonapi": {"2": {"sc-crawler_2"}},
	}
	for _, c := range []struct{ name, want, says string }{
		{"shpo", "", "--crawler shpo: no worker of group g carries it (did you mean shop?); the group has: "},
		{"jsonap", "", "(did you mean jsonapi?)"},
		{"inventory", "", "--crawler inventory: no worker of group g carries it; the group has: builtin v1.2.0 (sc-crawler_1); jsonapi 2 (sc-crawler_2); shop 1.4 (sc-crawler_1)"},
		{"shop", "9", "--crawler shop@9: no worker of group g carries it; the group has: "},
	} {
		err := unknownCrawler(c.name, c.want, "g", byName)
		assert.Contains(t, err.Error(), c.says, c.name)
	}
	assert.Equal(t, 0, editDistance("shop", "shop"))
	assert.Equal(t, 2, editDistance("shpo", "shop"))
	assert.Equal(t, 3, editDistance("kitten", "sitting"))
	assert.Equal(t, "", nearestName("x", []string{"shop"}))
}
