package main

import (
	"slices"
	"strings"

	"github.com/batoncrawl/baton/activities/crawl"
)

// linkFlags are what `baton crawl`'s --select, --label and --links say
// about the built-in crawler's fields, labels and links.
type linkFlags struct {
	// fields are the --select name=SELECTOR fields of every page;
	// labelFields the --select LABEL:name=SELECTOR fields of one label's
	// pages.
	fields      map[string]string
	labelFields map[string]map[string]string
	// order are the field names in --select order, each once (the
	// export's column order: crawl.Options.FieldOrder).
	order []string
	// labels are the --label NAME=REGEX rules, in order; seedLabel the
	// bare --label NAME (the seeds' label).
	labels    []crawl.LabelRule
	seedLabel string
	// linksJSON are the --links json:PATH paths, without "json:".
	linksJSON []string
}

// addOrder appends a field name to order, once.
func (lf *linkFlags) addOrder(name string) {
	if !slices.Contains(lf.order, name) {
		lf.order = append(lf.order, name)
	}
}

// builtinOnly reports which of the flags only the built-in crawler takes
// were given ("" if none).
func (lf linkFlags) builtinOnly() string {
	switch {
	case len(lf.fields) > 0 || len(lf.labelFields) > 0:
		return "--select"
	case len(lf.labels) > 0:
		return "--label NAME=REGEX"
	case len(lf.linksJSON) > 0:
		return "--links"
	}
	return ""
}

// parseLinkFlags reads --select, --label and --links. The patterns and
// selectors themselves are checked by the job's validation (Build), which
// names the flag too.
func parseLinkFlags(selects, labels, links []string) (linkFlags, error) {
	lf := linkFlags{fields: map[string]string{}}
	for i, s := range selects {
		key, sel, ok := strings.Cut(s, "=")
		if !ok || key == "" {
			return lf, usage("--select #%d %.80q: want name=SELECTOR, or LABEL:name=SELECTOR for the pages of one label", i+1, s)
		}
		label, name, scoped := strings.Cut(key, ":")
		if !scoped {
			lf.fields[key] = sel
			lf.addOrder(key)
			continue
		}
		if label == "" || name == "" {
			return lf, usage("--select #%d %.80q: want LABEL:name=SELECTOR (a field of the pages of label LABEL)", i+1, s)
		}
		lf.addOrder(name)
		if lf.labelFields == nil {
			lf.labelFields = map[string]map[string]string{}
		}
		if lf.labelFields[label] == nil {
			lf.labelFields[label] = map[string]string{}
		}
		lf.labelFields[label][name] = sel
	}
	for _, l := range labels {
		name, pattern, rule := strings.Cut(l, "=")
		if !rule {
			if lf.seedLabel != "" && lf.seedLabel != l {
				return lf, usage("--label %q and --label %q: the seeds take one label (--label NAME=REGEX defines a label rule)", lf.seedLabel, l)
			}
			lf.seedLabel = l
			continue
		}
		lf.labels = append(lf.labels, crawl.LabelRule{Name: name, Pattern: pattern})
	}
	for _, l := range links {
		path, ok := strings.CutPrefix(l, "json:")
		if !ok || strings.TrimSpace(path) == "" {
			return lf, usage("--links %.80q: want json:PATH, a GJSON path to the links of JSON responses (json:items.#.url)", l)
		}
		lf.linksJSON = append(lf.linksJSON, path)
	}
	return lf, nil
}
