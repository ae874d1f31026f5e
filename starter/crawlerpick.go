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
func pickCrawler(ctx context.Context, g *globals, name string, sets map[string]string) (version string, err error) {
	want := ""
	name, want, _ = strings.Cut(name, "@")
	if err := crawler.ValidName(name); err != nil {
		return "", usage("--crawler: %v", err)
	}
	c, closeFn, err := g.dial(ctx)
	if err != nil {
		return "", err
	}
	defer closeFn()
	byName, infos, err := groupCrawlers(ctx, c)
	if err != nil {
		return "", err
	}
	versions := byName[name]
	if len(versions) == 0 || (want != "" && len(versions[want]) == 0) {
		return "", usage("--crawler %s: no worker of group %s carries it; the group has: %s", strings.TrimSuffix(name+"@"+want, "@"), g.group, describeCrawlers(byName))
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
		specs[i] = crawler.OptionSpec{Key: o.Key, Kind: o.Kind, Default: o.Default}
	}
	if err := crawler.CheckSets(name, specs, sets); err != nil {
		return "", usage("--set: %v", err)
	}
	return version, nil
}
