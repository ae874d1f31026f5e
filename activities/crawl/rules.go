package crawl

import (
	"errors"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"regexp/syntax"
	"slices"
	"sort"
	"strings"

	"github.com/tidwall/gjson"
)

// Bounds on a job's link rules, labels and JSON link paths (Validate).
// Go's regexps run in time linear in the URL, whatever the pattern; these
// bound what compiling and matching them costs per job and per link.
const (
	MaxFollowRules   = 100  // follow_allow and follow_deny, each
	MaxLabelRules    = 100  // labels
	MaxRuleBytes     = 1024 // one pattern
	MaxLinksJSON     = 16   // links_json paths
	MaxLinksJSONPath = 1024 // one path
)

// LabelRule gives the label Name to the pages whose normalised URL
// matches the regexp Pattern (Options.Labels).
type LabelRule struct {
	Name    string `json:"name"`
	Pattern string `json:"pattern"`
}

// validLabelName is what a label rule's name may be: it is typed in
// --label NAME=REGEX and --select NAME:field=SELECTOR.
var validLabelName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// labelRule is a compiled LabelRule.
type labelRule struct {
	name string
	re   *regexp.Regexp
}

// rules is the compiled form of an Options' link rules and labels.
type rules struct {
	allow, deny []*regexp.Regexp
	labels      []labelRule
	linksJSON   []string
}

// compileRules compiles the validated rules of o (a pattern that does not
// compile is left out: Validate refuses it first).
func compileRules(o Options) rules {
	var r rules
	for _, p := range o.FollowAllow {
		if re, err := regexp.Compile(p); err == nil {
			r.allow = append(r.allow, re)
		}
	}
	for _, p := range o.FollowDeny {
		if re, err := regexp.Compile(p); err == nil {
			r.deny = append(r.deny, re)
		}
	}
	for _, l := range o.Labels {
		if re, err := regexp.Compile(l.Pattern); err == nil {
			r.labels = append(r.labels, labelRule{name: l.Name, re: re})
		}
	}
	r.linksJSON = o.LinksJSON
	return r
}

// follows reports whether a normalised URL passes the follow rules: it
// matches no deny rule and, when there are allow rules, at least one;
// else why not.
func (r *rules) follows(n string) (bool, string) {
	for i, re := range r.deny {
		if re.MatchString(n) {
			return false, fmt.Sprintf("matches follow_deny[%d] %q", i, re.String())
		}
	}
	if len(r.allow) == 0 {
		return true, ""
	}
	for _, re := range r.allow {
		if re.MatchString(n) {
			return true, ""
		}
	}
	return false, "matches no follow_allow rule"
}

// labelOf is the name of the first label rule a normalised URL matches,
// or "".
func (r *rules) labelOf(n string) string {
	for _, l := range r.labels {
		if l.re.MatchString(n) {
			return l.name
		}
	}
	return ""
}

// linkRules returns o's compiled rules: Compile's, or (uncompiled
// options) compiled now.
func (o Options) linkRules() *rules {
	if o.compiled != nil {
		return &o.compiled.rules
	}
	r := compileRules(o)
	return &r
}

// LabelOf is the label the job's label rules (Labels) give a URL: the
// name of the first rule whose pattern matches its normalised form, or ""
// (no rule matches, or the URL does not normalise). Compiled options
// (Compile) match without compiling anything.
func (o Options) LabelOf(raw string) string {
	if len(o.Labels) == 0 {
		return ""
	}
	n, err := o.NormalizeURL(raw)
	if err != nil {
		return ""
	}
	return o.linkRules().labelOf(n)
}

// selectorsFor are the parsed selectors of a page of label: the
// Selectors, with the LabelSelectors of label added (a label's field
// replaces a field of the same name).
func (c *compiled) selectorsFor(label string) map[string]Selector {
	if s, ok := c.byLabel[label]; ok {
		return s
	}
	return c.sels
}

// compileLabelSelectors parses the LabelSelectors of o, each label's
// merged with the base selectors sels.
func compileLabelSelectors(o Options, sels map[string]Selector) map[string]map[string]Selector {
	if len(o.LabelSelectors) == 0 {
		return nil
	}
	out := make(map[string]map[string]Selector, len(o.LabelSelectors))
	for label, fields := range o.LabelSelectors {
		m := make(map[string]Selector, len(sels)+len(fields))
		for k, v := range sels {
			m[k] = v
		}
		for k, v := range parseSelectors(fields) {
			m[k] = v
		}
		out[label] = m
	}
	return out
}

// FieldNames are the names of every field a job's pages may have: those
// of Selectors and of every label's LabelSelectors, once each, in
// FieldOrder, then those FieldOrder does not name, sorted.
func (o Options) FieldNames() []string {
	fields := o.fieldSet()
	var names, rest []string
	seen := map[string]bool{}
	for _, n := range o.FieldOrder {
		if fields[n] && !seen[n] {
			seen[n] = true
			names = append(names, n)
		}
	}
	for n := range fields {
		if !seen[n] {
			rest = append(rest, n)
		}
	}
	sort.Strings(rest)
	return append(names, rest...)
}

// fieldSet is the set of the names of Selectors and LabelSelectors.
func (o Options) fieldSet() map[string]bool {
	fields := map[string]bool{}
	for n := range o.Selectors {
		fields[n] = true
	}
	for _, fs := range o.LabelSelectors {
		for n := range fs {
			fields[n] = true
		}
	}
	return fields
}

// validateFieldOrder checks that FieldOrder names fields, each once.
func (o Options) validateFieldOrder() error {
	if len(o.FieldOrder) == 0 {
		return nil
	}
	fields := o.fieldSet()
	seen := map[string]bool{}
	for i, n := range o.FieldOrder {
		field := fmt.Sprintf("field_order[%d]", i)
		switch {
		case !fields[n]:
			return fieldErr(field, "%.80q is no field of selectors or label_selectors", n)
		case seen[n]:
			return fieldErr(field, "%.80q twice", n)
		}
		seen[n] = true
	}
	return nil
}

// validateRules checks the follow rules, labels, label selectors and
// JSON link paths, naming the first bad field.
func (o Options) validateRules() error {
	for _, list := range []struct {
		field string
		pats  []string
	}{{"follow_allow", o.FollowAllow}, {"follow_deny", o.FollowDeny}} {
		if len(list.pats) > MaxFollowRules {
			return fieldErr(list.field, "%d rules, at most %d", len(list.pats), MaxFollowRules)
		}
		for i, p := range list.pats {
			if err := checkPattern(p); err != nil {
				return fieldErr(fmt.Sprintf("%s[%d]", list.field, i), "%v", err)
			}
		}
	}
	if len(o.Labels) > MaxLabelRules {
		return fieldErr("labels", "%d rules, at most %d", len(o.Labels), MaxLabelRules)
	}
	names := map[string]bool{}
	for i, l := range o.Labels {
		field := fmt.Sprintf("labels[%d]", i)
		if !validLabelName.MatchString(l.Name) {
			return fieldErr(field, "label name %.80q: use 1-64 letters, digits, '_', '.' or '-', starting with a letter or digit", l.Name)
		}
		if err := checkPattern(l.Pattern); err != nil {
			return fieldErr(field, "label %s: %v", l.Name, err)
		}
		names[l.Name] = true
	}
	labels := slices.Sorted(maps.Keys(o.LabelSelectors))
	for _, label := range labels {
		fields := o.LabelSelectors[label]
		fnames := slices.Sorted(maps.Keys(fields))
		if len(fnames) == 0 {
			return fieldErr(fmt.Sprintf("label_selectors[%q]", label+":"), "no fields")
		}
		for _, name := range fnames {
			// Named label:field, as --select types it.
			field := fmt.Sprintf("label_selectors[%q]", label+":"+name)
			sel := fields[name]
			if !names[label] {
				return fieldErr(field, "no label rule is named %.80q (labels)", label)
			}
			if err := validateSelector(field, name, sel); err != nil {
				return err
			}
		}
	}
	if err := o.validateFieldOrder(); err != nil {
		return err
	}
	if len(o.LinksJSON) > MaxLinksJSON {
		return fieldErr("links_json", "%d paths, at most %d", len(o.LinksJSON), MaxLinksJSON)
	}
	for i, p := range o.LinksJSON {
		switch {
		case strings.TrimSpace(p) == "":
			return fieldErr(fmt.Sprintf("links_json[%d]", i), "empty path")
		case len(p) > MaxLinksJSONPath:
			return fieldErr(fmt.Sprintf("links_json[%d]", i), "path of %d bytes, at most %d", len(p), MaxLinksJSONPath)
		}
	}
	return nil
}

// checkPattern accepts a regexp of at most MaxRuleBytes.
func checkPattern(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("empty pattern (it would match every URL)")
	case len(p) > MaxRuleBytes:
		return fmt.Errorf("pattern of %d bytes, at most %d", len(p), MaxRuleBytes)
	}
	if _, err := regexp.Compile(p); err != nil {
		var se *syntax.Error
		if errors.As(err, &se) {
			return fmt.Errorf("invalid regexp %.200q: %s", p, se.Code)
		}
		return fmt.Errorf("invalid regexp %.200q: %v", p, err)
	}
	return nil
}

// jsonLinksOf returns the strings the GJSON paths find in a JSON body (an
// array's strings, nested arrays flattened), resolved against base, at
// most limit; values that are not strings, and strings that are not
// URLs, are left out.
func jsonLinksOf(body []byte, paths []string, base *url.URL, limit int) []string {
	var out []string
	var add func(r gjson.Result) bool
	add = func(r gjson.Result) bool {
		switch {
		case r.IsArray():
			ok := true
			r.ForEach(func(_, v gjson.Result) bool {
				ok = add(v)
				return ok
			})
			return ok
		case r.Type == gjson.String:
			s := strings.TrimSpace(r.Str)
			if s == "" {
				return true
			}
			u, err := base.Parse(s)
			if err != nil {
				return true
			}
			out = append(out, u.String())
			return len(out) < limit
		}
		return true
	}
	for _, p := range paths {
		if !add(gjson.GetBytes(body, p)) {
			break
		}
	}
	return out
}
