package selectors

import (
	"github.com/PuerkitoBio/goquery"
	"github.com/andybalholm/cascadia"
	"golang.org/x/net/html"
)

// Matcher is m counting every element it is matched against; use it
// inside Run.
func (b *Budget) Matcher(m cascadia.Matcher) goquery.Matcher {
	return countingMatcher{m: m, b: b}
}

// Find is doc.Find(css) under the budget.
func (b *Budget) Find(doc *goquery.Document, css string) (*goquery.Selection, error) {
	m, err := cascadia.Compile(css)
	if err != nil {
		return nil, err
	}
	var sel *goquery.Selection
	err = b.Run(func() { sel = doc.FindMatcher(b.Matcher(m)) })
	return sel, err
}

// countingMatcher counts the elements a CSS selector is matched against.
type countingMatcher struct {
	m cascadia.Matcher
	b *Budget
}

func (c countingMatcher) Match(n *html.Node) bool { c.b.tick(); return c.m.Match(n) }

// MatchAll returns n and its descendants that match, in document order,
// as cascadia's does, counting each element (only elements match).
func (c countingMatcher) MatchAll(n *html.Node) []*html.Node {
	var out []*html.Node
	var walk func(*html.Node)
	walk = func(x *html.Node) {
		if x.Type == html.ElementNode && c.Match(x) {
			out = append(out, x)
		}
		for ch := x.FirstChild; ch != nil; ch = ch.NextSibling {
			walk(ch)
		}
	}
	walk(n)
	return out
}

// Filter returns the nodes that match.
func (c countingMatcher) Filter(nodes []*html.Node) []*html.Node {
	var out []*html.Node
	for _, n := range nodes {
		if c.Match(n) {
			out = append(out, n)
		}
	}
	return out
}
