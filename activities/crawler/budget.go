package crawler

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/andybalholm/cascadia"
	"github.com/antchfx/htmlquery"
	"github.com/antchfx/xpath"
	"golang.org/x/net/html"
)

// A page's Find and XPath calls share a budget, as the built-in
// selectors do, so that a hostile page (huge, deeply nested) and an
// expensive selector cannot hold a Runner's CPU: every CSS match of a
// node and every XPath navigation step counts, and the clock is read
// every 64 steps. Past MaxSelectorSteps or MaxSelectorTime the
// call selects nothing and the page fails with ErrSelectorBudget, whatever
// its handler returns.
const (
	MaxSelectorSteps = 20_000_000
	MaxSelectorTime  = 5 * time.Second
)

// ErrSelectorBudget is the error of a page whose Find and XPath calls ran
// past their budget.
var ErrSelectorBudget = errors.New("selectors ran past their budget")

// selectorBudget counts a page's selector steps; safe for concurrent use
// (a handler may query from several goroutines: one at a time).
type selectorBudget struct {
	mu       sync.Mutex
	steps    int
	deadline time.Time
	spent    error
}

// budgetExceeded unwinds an evaluation past the budget (the CSS and XPath
// evaluators have no cancellation of their own).
type budgetExceeded struct{ err error }

func (b *selectorBudget) tick() {
	b.steps++
	if b.steps > MaxSelectorSteps {
		panic(budgetExceeded{fmt.Errorf("%w: more than %d steps", ErrSelectorBudget, MaxSelectorSteps)})
	}
	if b.steps&63 == 0 && time.Now().After(b.deadline) {
		panic(budgetExceeded{fmt.Errorf("%w: more than %v", ErrSelectorBudget, MaxSelectorTime)})
	}
}

// run runs fn under the budget; past it, it returns the budget's error
// (and every later call does at once).
func (b *selectorBudget) run(fn func()) (err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.spent != nil {
		return b.spent
	}
	if b.deadline.IsZero() {
		b.deadline = time.Now().Add(MaxSelectorTime)
	}
	defer func() {
		if v := recover(); v != nil {
			be, ok := v.(budgetExceeded)
			if !ok {
				panic(v)
			}
			b.spent = be.err
			err = be.err
		}
	}()
	fn()
	return nil
}

// countingMatcher counts the nodes a CSS selector is matched against.
type countingMatcher struct {
	m cascadia.Matcher
	b *selectorBudget
}

func (c countingMatcher) Match(n *html.Node) bool { c.b.tick(); return c.m.Match(n) }

// MatchAll returns n and its descendants that match, in document order,
// as cascadia's does, counting each element.
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

func (c countingMatcher) Filter(nodes []*html.Node) []*html.Node {
	var out []*html.Node
	for _, n := range nodes {
		if c.Match(n) {
			out = append(out, n)
		}
	}
	return out
}

// find is doc.Find(css) under the budget.
func (b *selectorBudget) find(doc *goquery.Document, css string) (*goquery.Selection, error) {
	m, err := cascadia.Compile(css)
	if err != nil {
		return nil, err
	}
	var sel *goquery.Selection
	err = b.run(func() { sel = doc.FindMatcher(countingMatcher{m: m, b: b}) })
	return sel, err
}

// countingNav is an XPath navigator that counts its moves.
type countingNav struct {
	*htmlquery.NodeNavigator
	b *selectorBudget
}

func (c *countingNav) Copy() xpath.NodeNavigator {
	return &countingNav{NodeNavigator: c.NodeNavigator.Copy().(*htmlquery.NodeNavigator), b: c.b}
}
func (c *countingNav) MoveToRoot()        { c.b.tick(); c.NodeNavigator.MoveToRoot() }
func (c *countingNav) MoveToParent() bool { c.b.tick(); return c.NodeNavigator.MoveToParent() }
func (c *countingNav) MoveToNextAttribute() bool {
	c.b.tick()
	return c.NodeNavigator.MoveToNextAttribute()
}
func (c *countingNav) MoveToChild() bool    { c.b.tick(); return c.NodeNavigator.MoveToChild() }
func (c *countingNav) MoveToFirst() bool    { c.b.tick(); return c.NodeNavigator.MoveToFirst() }
func (c *countingNav) MoveToNext() bool     { c.b.tick(); return c.NodeNavigator.MoveToNext() }
func (c *countingNav) MoveToPrevious() bool { c.b.tick(); return c.NodeNavigator.MoveToPrevious() }
func (c *countingNav) MoveTo(o xpath.NodeNavigator) bool {
	c.b.tick()
	if w, ok := o.(*countingNav); ok {
		o = w.NodeNavigator
	}
	return c.NodeNavigator.MoveTo(o)
}

// xpath is htmlquery.QueryAll(top, expr) under the budget.
func (b *selectorBudget) xpath(top *html.Node, expr string) ([]*html.Node, error) {
	e, err := xpath.Compile(expr)
	if err != nil {
		return nil, err
	}
	var out []*html.Node
	err = b.run(func() {
		it := e.Select(&countingNav{NodeNavigator: htmlquery.CreateXPathNavigator(top), b: b})
		for it.MoveNext() {
			if n, ok := it.Current().(*countingNav); ok {
				out = append(out, currentNode(n.NodeNavigator))
			}
		}
	})
	return out, err
}

// currentNode is the node a navigator is on, an attribute as an element
// holding its value (as htmlquery.QueryAll gives it).
func currentNode(n *htmlquery.NodeNavigator) *html.Node {
	if n.NodeType() == xpath.AttributeNode {
		child := &html.Node{Type: html.TextNode, Data: n.Value()}
		return &html.Node{Type: html.ElementNode, Data: n.LocalName(), FirstChild: child, LastChild: child}
	}
	return n.Current()
}
