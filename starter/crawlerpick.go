package main

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/batoncrawl/baton/activities/crawler"
	"github.com/batoncrawl/baton/activities/metadata"
	"github.com/batoncrawl/baton/roles"
)

// groupCrawlers reads the crawlers the group's members advertise, by
// crawler name, then version → the members carrying it.
func groupCrawlers(ctx context.Context, c *metadata.Cluster) (map[string]map[string][]string, map[string]roles.CrawlerInfo, error) {
	g, _, err := c.GetGroup(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("read group %s: %w", c.Group, err)
	}
	names, _ := g.Members()
	byName := map[string]map[string][]string{}
	infos := map[string]roles.CrawlerInfo{} // name@version → info
	for _, m := range names {
		cr, err := c.GetCrawlers(ctx, m)
		if err != nil {
			continue // a corrupted znode: that member counts as carrying nothing
		}
		if len(cr.List) == 0 {
			cr.List = []roles.CrawlerInfo{{Name: roles.BuiltinCrawler}}
		}
		for _, ci := range cr.List {
			if byName[ci.Name] == nil {
				byName[ci.Name] = map[string][]string{}
			}
			byName[ci.Name][ci.Version] = append(byName[ci.Name][ci.Version], m)
			infos[ci.Name+"@"+ci.Version] = ci
		}
	}
	return byName, infos, nil
}

// describeCrawlers lists crawlers as "name version (carried by a, b)".
func describeCrawlers(byName map[string]map[string][]string) string {
	var out []string
	for name, versions := range byName {
		for v, members := range versions {
			out = append(out, fmt.Sprintf("%s %s (%s)", name, v, strings.Join(members, ", ")))
		}
	}
	sort.Strings(out)
	if len(out) == 0 {
		return "none (no member of the group has started)"
	}
	return strings.Join(out, "; ")
}

// pickCrawler resolves a job's --crawler against the group: the crawler
// must be carried by a member, and the job is pinned to one version —
// the one most members carry (the newest, by name, on a tie) during a
// rolling upgrade, or want when given as name@version. The --set options
// are checked against that version's advertised options. Errors are
// usage errors naming the crawlers the group has.
func pickCrawler(ctx context.Context, g *globals, name string, sets map[string]string) (version string, secret []string, err error) {
	want := ""
	name, want, _ = strings.Cut(name, "@")
	if err := crawler.ValidName(name); err != nil {
		return "", nil, usage("--crawler: %v", err)
	}
	c, closeFn, err := g.dial(ctx)
	if err != nil {
		return "", nil, err
	}
	defer closeFn()
	byName, infos, err := groupCrawlers(ctx, c)
	if err != nil {
		return "", nil, err
	}
	versions := byName[name]
	if len(versions) == 0 || (want != "" && len(versions[want]) == 0) {
		return "", nil, unknownCrawler(name, want, g.group, byName)
	}
	version = want
	if version == "" {
		for v, members := range versions {
			if version == "" || len(members) > len(versions[version]) || len(members) == len(versions[version]) && v > version {
				version = v
			}
		}
	}
	info := infos[name+"@"+version]
	specs := make([]crawler.OptionSpec, len(info.Options))
	for i, o := range info.Options {
		specs[i] = crawler.OptionSpec{Key: o.Key, Kind: o.Kind, Default: o.Default, Secret: o.Secret}
		if o.Secret {
			secret = append(secret, o.Key)
		}
	}
	if err := crawler.CheckSets(name, specs, sets); err != nil {
		return "", nil, usage("--set: %v", err)
	}
	return version, secret, nil
}

// unknownCrawler is the usage error of a --crawler no worker of the group
// carries: it names the crawlers the group has and, for a name the group
// does not know, the nearest one.
func unknownCrawler(name, want, group string, byName map[string]map[string][]string) error {
	hint := ""
	if len(byName[name]) == 0 {
		names := make([]string, 0, len(byName))
		for n := range byName {
			names = append(names, n)
		}
		sort.Strings(names)
		if near := nearestName(name, names); near != "" {
			hint = fmt.Sprintf(" (did you mean %s?)", near)
		}
	}
	return usage("--crawler %s: no worker of group %s carries it%s; the group has: %s",
		strings.TrimSuffix(name+"@"+want, "@"), group, hint, describeCrawlers(byName))
}

// nearestName returns the name of names nearest to name by edit distance,
// if it is near enough to be a typo of it (at most a third of its
// letters, and at least two, apart); "" when none is.
func nearestName(name string, names []string) string {
	best, bestD := "", max(2, len(name)/3)+1
	for _, n := range names {
		if d := editDistance(name, n); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b, in runes.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
