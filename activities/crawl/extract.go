package crawl

import (
	"bytes"
	"encoding/json"
	"mime"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/PuerkitoBio/goquery"
	"github.com/antchfx/xpath"
	"github.com/batoncrawl/baton/activities/selectors"
	"github.com/tidwall/gjson"
	"golang.org/x/net/html"
)

// Bounds on the JSON-LD a page can add to its record.
const (
	MaxJSONLDBlocks = 32
	MaxJSONLDBytes  = 256 << 10 // all blocks of a page together
)

// parseSelectors parses Options.Selectors (validated already; a selector
// that does not parse is left out).
func parseSelectors(m map[string]string) map[string]Selector {
	out := make(map[string]Selector, len(m))
	for name, s := range m {
		if sel, err := ParseSelector(s); err == nil {
			out[name] = sel
		}
	}
	return out
}

// budget bounds the total text of a page's fields (MaxFieldBytes).
type budget struct{ left int }

func (b *budget) take(s string) (string, bool) {
	if b.left <= 0 {
		return "", false
	}
	if len(s) > b.left {
		s = s[:b.left]
	}
	b.left -= len(s)
	return s, true
}

// URLAttrs are the attributes whose values are URLs: a CSS "@attr" or an
// XPath attribute of these gives the URL made absolute against the page
// (its <base href> honoured), as a browser resolves it. They are HTML's
// URL attributes (href, src, action, formaction, poster, cite, data,
// background, longdesc, manifest, codebase, ping), the image candidate
// lists srcset and imagesrcset (each URL resolved, its descriptor kept),
// and the lazy-loading attributes of common scripts (data-src,
// data-srcset, data-href, data-original, data-lazy-src, data-url). Other
// attributes (data-id, alt, content…) are given as written; a value that
// is no URL reference (empty, or one that does not parse) is given as
// written too, and an absolute one (mailto:, https:…) unchanged.
var URLAttrs = map[string]bool{
	"href": true, "src": true, "action": true, "formaction": true, "poster": true, "cite": true, "data": true,
	"background": true, "longdesc": true, "manifest": true, "codebase": true, "ping": true,
	"srcset": true, "imagesrcset": true,
	"data-src": true, "data-srcset": true, "data-href": true, "data-original": true, "data-lazy-src": true, "data-url": true,
}

// resolveAttr makes the value v of attribute name absolute against base
// when name is one of URLAttrs (nil base: as written).
func resolveAttr(base *url.URL, name, v string) string {
	name = strings.ToLower(name)
	if base == nil || v == "" || !URLAttrs[name] {
		return v
	}
	if strings.HasSuffix(name, "srcset") {
		return resolveSrcset(base, v)
	}
	if name == "ping" { // space-separated URLs
		parts := strings.Fields(v)
		for i, p := range parts {
			parts[i] = resolveRef(base, p)
		}
		return strings.Join(parts, " ")
	}
	return resolveRef(base, v)
}

// resolveRef resolves one URL reference against base (as written when it
// does not parse).
func resolveRef(base *url.URL, ref string) string {
	u, err := base.Parse(strings.TrimSpace(ref))
	if err != nil {
		return ref
	}
	return u.String()
}

// resolveSrcset resolves each candidate of a srcset ("a.jpg 1x, b.jpg
// 2x"), keeping its descriptor.
func resolveSrcset(base *url.URL, v string) string {
	cands := strings.Split(v, ",")
	out := make([]string, 0, len(cands))
	for _, c := range cands {
		f := strings.Fields(c)
		if len(f) == 0 {
			continue
		}
		f[0] = resolveRef(base, f[0])
		out = append(out, strings.Join(f, " "))
	}
	return strings.Join(out, ", ")
}

// extractHTML evaluates the CSS and XPath selectors over the document of
// root: the trimmed text (or attribute value) of every match, bounded to
// MaxFieldBytes in all (Colly's own OnHTML computes the whole text of every
// match, which nested matches make quadratic). JSON selectors match nothing
// in HTML. Names are visited in order, so the budget is spent the same way
// on every run. The values of URLAttrs are made absolute against base (the
// page's URL, or its <base href>; nil: as written).
//
// The selectors share a step and time budget (MaxSelectorSteps,
// MaxSelectorTime): past it, the fields extracted so far are returned with
// an error wrapping ErrSelectorBudget.
func extractHTML(root *html.Node, sels map[string]Selector, base *url.URL) (map[string][]string, error) {
	doc := root
	for doc.Parent != nil {
		doc = doc.Parent
	}
	out := make(map[string][]string, len(sels))
	b := &budget{left: MaxFieldBytes}
	steps := newStepBudget()
	for _, name := range sortedNames(sels) {
		out[name] = []string{}
	}
	err := steps.Run(func() { extractInto(out, doc, sels, base, b, steps) })
	return out, err
}

func extractInto(out map[string][]string, doc *html.Node, sels map[string]Selector, base *url.URL, b *budget, steps *selectors.Budget) {
	for _, name := range sortedNames(sels) {
		sel := sels[name]
		switch sel.Kind {
		case KindCSS:
			goquery.NewDocumentFromNode(doc).FindMatcher(steps.Matcher(sel.css)).Each(func(_ int, s *goquery.Selection) {
				for _, n := range s.Nodes {
					var v string
					if sel.Attr != "" {
						a, ok := attr(n, sel.Attr)
						if !ok {
							continue
						}
						v = resolveAttr(base, sel.Attr, strings.TrimSpace(a))
					} else {
						v = strings.TrimSpace(boundedText(n, max(b.left, 0)))
					}
					if v, ok := b.take(v); ok {
						out[name] = append(out[name], v)
					}
				}
			})
		case KindXPath:
			out[name] = evalXPath(doc, sel, b, base, steps, func(v []string) { out[name] = v })
		}
	}
}

// evalXPath evaluates an XPath selector: the text of each element, the
// value of each attribute (absolute against base for URLAttrs) or text
// node, or the value of an expression giving a string, number or boolean.
// keep is called with the values as they are found, so that a budget
// panic leaves the values found so far in place.
func evalXPath(doc *html.Node, sel Selector, b *budget, base *url.URL, steps *selectors.Budget, keep func([]string)) []string {
	// An xpath.Expr is not safe for concurrent evaluation: compile anew.
	x, err := xpath.Compile(sel.Expr)
	if err != nil {
		return []string{}
	}
	vals := []string{}
	add := func(v string) {
		if v, ok := b.take(strings.TrimSpace(v)); ok {
			vals = append(vals, v)
			keep(vals)
		}
	}
	switch r := x.Evaluate(steps.Navigator(doc)).(type) {
	case *xpath.NodeIterator:
		for r.MoveNext() {
			cn, ok := r.Current().(*selectors.Nav)
			if !ok {
				continue
			}
			nav := cn.NodeNavigator
			switch nav.NodeType() {
			case xpath.AttributeNode:
				add(resolveAttr(base, nav.LocalName(), strings.TrimSpace(nav.Value())))
			case xpath.TextNode:
				add(nav.Value())
			default:
				add(boundedText(nav.Current(), max(b.left, 0)))
			}
			if b.left <= 0 {
				break
			}
		}
	case string:
		add(r)
	case float64:
		add(strconv.FormatFloat(r, 'f', -1, 64))
	case bool:
		add(strconv.FormatBool(r))
	}
	return vals
}

// extractJSON evaluates the JSON selectors over a JSON body (CSS and XPath
// ones match nothing in JSON).
func extractJSON(body []byte, sels map[string]Selector) map[string][]string {
	out := make(map[string][]string, len(sels))
	b := &budget{left: MaxFieldBytes}
	valid := gjson.ValidBytes(body)
	for _, name := range sortedNames(sels) {
		sel := sels[name]
		out[name] = []string{}
		if sel.Kind != KindJSON || !valid {
			continue
		}
		r := gjson.GetBytes(body, sel.Expr)
		if !r.Exists() {
			continue
		}
		items := []gjson.Result{r}
		if r.IsArray() {
			items = r.Array()
		}
		for _, it := range items {
			v := it.String()
			if it.IsObject() || it.IsArray() {
				v = it.Raw
			}
			if v, ok := b.take(v); ok {
				out[name] = append(out[name], v)
			}
		}
	}
	return out
}

// hasJSONSelector reports whether a selector is a JSON path.
func hasJSONSelector(sels map[string]Selector) bool {
	for _, s := range sels {
		if s.Kind == KindJSON {
			return true
		}
	}
	return false
}

func sortedNames(m map[string]Selector) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func attr(n *html.Node, name string) (string, bool) {
	for _, a := range n.Attr {
		if strings.EqualFold(a.Key, name) {
			return a.Val, true
		}
	}
	return "", false
}

// isJSON reports whether a Content-Type is JSON (application/json, or a
// type ending in +json such as application/ld+json).
func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	return mt == "application/json" || strings.HasSuffix(mt, "+json") || mt == "text/json"
}

// isHTML reports whether a Content-Type is one Colly parses as HTML.
func isHTML(contentType string) bool {
	mt, _, _ := strings.Cut(contentType, ";")
	mt = strings.TrimSpace(strings.ToLower(mt))
	return mt == "text/html" || mt == "application/xhtml+xml"
}

// baseOf is the URL the document's relative references resolve against:
// its first <base href> (resolved against page, http or https only),
// else page itself.
func baseOf(doc *html.Node, page *url.URL) *url.URL {
	base := page
	if s := goquery.NewDocumentFromNode(doc).Find("base[href]").First(); s.Length() > 0 {
		href, _ := s.Attr("href")
		if u, err := page.Parse(strings.TrimSpace(href)); err == nil && (u.Scheme == "http" || u.Scheme == "https") {
			base = u
		}
	}
	return base
}

// canonicalOf returns the absolute URL of the document's first
// <link rel="canonical" href>, resolved against base, or "".
func canonicalOf(doc *html.Node, base *url.URL) string {
	var found string
	goquery.NewDocumentFromNode(doc).Find("link[href]").EachWithBreak(func(_ int, s *goquery.Selection) bool {
		rel, _ := s.Attr("rel")
		for _, r := range strings.Fields(rel) {
			if strings.EqualFold(r, "canonical") {
				href, _ := s.Attr("href")
				if u, err := base.Parse(strings.TrimSpace(href)); err == nil && (u.Scheme == "http" || u.Scheme == "https") {
					found = u.String()
				}
				return false
			}
		}
		return true
	})
	return found
}

// jsonLDOf returns the document's <script type="application/ld+json">
// blocks that are valid JSON, compacted, in document order; at most
// MaxJSONLDBlocks of MaxJSONLDBytes in all.
func jsonLDOf(doc *html.Node) []json.RawMessage {
	var out []json.RawMessage
	total := 0
	goquery.NewDocumentFromNode(doc).Find("script[type]").EachWithBreak(func(_ int, s *goquery.Selection) bool {
		t, _ := s.Attr("type")
		mt, _, _ := strings.Cut(t, ";")
		if !strings.EqualFold(strings.TrimSpace(mt), "application/ld+json") {
			return true
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, []byte(strings.TrimSpace(s.Text()))); err != nil {
			return true // not JSON: left out
		}
		if total+buf.Len() > MaxJSONLDBytes {
			return false
		}
		total += buf.Len()
		out = append(out, json.RawMessage(buf.Bytes()))
		return len(out) < MaxJSONLDBlocks
	})
	return out
}
