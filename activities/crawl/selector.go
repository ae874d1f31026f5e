package crawl

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/andybalholm/cascadia"
	"github.com/antchfx/xpath"
)

// Selector kinds, the prefix of a selector expression.
const (
	KindCSS   = "css"   // default: "h1.title", "a.next@href"
	KindXPath = "xpath" // "xpath://h1", "xpath://a/@href", "xpath:count(//a)"
	KindJSON  = "json"  // "json:items.#.name" on a JSON response (gjson path syntax)
)

// Selector is a parsed field expression of Options.Selectors:
//
//	h1.title              CSS: the trimmed text of every match
//	a.next@href           CSS: the value of attribute href of every match
//	css:h1                CSS, with its prefix spelt out
//	xpath://h1            XPath: the text of every element matched, the
//	xpath://a/@href       value of every attribute matched, or the value
//	xpath:count(//a)      of an expression that gives a string, a number
//	                      or a boolean
//	json:items.#.name     a path into a JSON response (GJSON syntax,
//	                      https://github.com/tidwall/gjson#path-syntax):
//	                      each element of an array result, else the value;
//	                      objects and arrays as JSON text
//
// CSS and XPath selectors apply to HTML responses, JSON paths to JSON ones
// (a media type application/json or ending in +json); a selector of the
// other kind matches nothing there.
type Selector struct {
	Kind string
	Expr string // the CSS selector, XPath expression or JSON path
	Attr string // CSS: the attribute whose value is taken ("" for text)

	css   cascadia.Selector
	xpath *xpath.Expr
}

// attrSuffix is a CSS selector's "@attribute" ending.
var attrSuffix = regexp.MustCompile(`@([A-Za-z_:][-A-Za-z0-9_:.]*)\s*$`)

// ParseSelector parses a field expression (see Selector).
func ParseSelector(s string) (Selector, error) {
	s = strings.TrimSpace(s)
	kind, expr := KindCSS, s
	if k, rest, ok := strings.Cut(s, ":"); ok {
		switch strings.ToLower(k) {
		case KindCSS, KindXPath, KindJSON:
			kind, expr = strings.ToLower(k), strings.TrimSpace(rest)
		}
	}
	if expr == "" {
		return Selector{}, fmt.Errorf("empty %s selector", kind)
	}
	sel := Selector{Kind: kind, Expr: expr}
	switch kind {
	case KindCSS:
		if m := attrSuffix.FindStringSubmatchIndex(expr); m != nil && outsideBrackets(expr, m[0]) {
			sel.Attr = expr[m[2]:m[3]]
			sel.Expr = strings.TrimSpace(expr[:m[0]])
			if sel.Expr == "" {
				return Selector{}, fmt.Errorf("%q: no CSS selector before @%s", s, sel.Attr)
			}
		}
		c, err := cascadia.Compile(sel.Expr)
		if err != nil {
			return Selector{}, fmt.Errorf("invalid CSS selector %q: %v", sel.Expr, err)
		}
		sel.css = c
	case KindXPath:
		x, err := xpath.Compile(expr)
		if err != nil {
			return Selector{}, fmt.Errorf("invalid XPath %q: %v", expr, err)
		}
		sel.xpath = x
	case KindJSON:
		// GJSON has no path validation: a path that names nothing
		// matches nothing.
	}
	return sel, nil
}

// outsideBrackets reports whether position i of a CSS selector is outside
// any [...] attribute test and quoted string (so "a[href^='mailto:x@y']" has
// no attribute suffix).
func outsideBrackets(s string, i int) bool {
	depth := 0
	var quote byte
	for j := 0; j < i; j++ {
		c := s[j]
		switch {
		case quote != 0:
			if c == '\\' {
				j++
			} else if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '[':
			depth++
		case c == ']':
			depth--
		}
	}
	return depth == 0 && quote == 0
}

// String is the selector as written in canonical form.
func (s Selector) String() string {
	switch {
	case s.Kind == KindCSS && s.Attr != "":
		return s.Expr + "@" + s.Attr
	case s.Kind == KindCSS:
		return s.Expr
	default:
		return s.Kind + ":" + s.Expr
	}
}
