package crawl

import (
	"errors"
	"fmt"
	"time"

	"github.com/antchfx/htmlquery"
	"github.com/antchfx/xpath"
	"golang.org/x/net/html"
)

// The selectors of one page share a budget, so that a hostile page (huge,
// deeply nested) and an expensive selector (an XPath with ancestor:: over
// every node, a CSS :has) cannot hold a Runner's CPU: every XPath
// navigation step and every CSS match of a node counts, and the clock is
// read every few thousand steps. Past MaxSelectorSteps or
// MaxSelectorTime the page fails (not retried: the next fetch would cost
// the same) with the fields extracted so far.
const (
	MaxSelectorSteps = 20_000_000
	MaxSelectorTime  = 5 * time.Second
)

// ErrSelectorBudget is the error of a page whose selectors ran past their
// budget.
var ErrSelectorBudget = errors.New("selectors ran past their budget")

// stepBudget counts a page's selector steps; not safe for concurrent use
// (one page's extraction runs in one goroutine).
type stepBudget struct {
	steps, max int
	deadline   time.Time
}

// selectorSteps and selectorTime are the budget in force (tests lower
// them).
var selectorSteps, selectorTime = MaxSelectorSteps, MaxSelectorTime

func newStepBudget() *stepBudget {
	return &stepBudget{max: selectorSteps, deadline: time.Now().Add(selectorTime)}
}

// budgetExceeded is the panic value that unwinds an evaluation past the
// budget (XPath and CSS evaluators have no cancellation of their own).
type budgetExceeded struct{ err error }

// tick counts one step and unwinds the evaluation past the budget.
func (b *stepBudget) tick() {
	b.steps++
	if b.steps > b.max {
		panic(budgetExceeded{fmt.Errorf("%w: more than %d steps", ErrSelectorBudget, b.max)})
	}
	if b.steps&4095 == 0 && time.Now().After(b.deadline) {
		panic(budgetExceeded{fmt.Errorf("%w: more than %v", ErrSelectorBudget, selectorTime)})
	}
}

// guard runs fn and turns a budget panic into an error (other panics go
// on).
func (b *stepBudget) guard(fn func()) (err error) {
	defer func() {
		if v := recover(); v != nil {
			be, ok := v.(budgetExceeded)
			if !ok {
				panic(v)
			}
			err = be.err
		}
	}()
	fn()
	return nil
}

// countingNav is an XPath navigator that counts its moves.
type countingNav struct {
	*htmlquery.NodeNavigator
	b *stepBudget
}

func newCountingNav(doc *html.Node, b *stepBudget) *countingNav {
	return &countingNav{NodeNavigator: htmlquery.CreateXPathNavigator(doc), b: b}
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

// countingMatcher counts the nodes a CSS selector is matched against.
type countingMatcher struct {
	m interface{ Match(*html.Node) bool }
	b *stepBudget
}

func (c countingMatcher) Match(n *html.Node) bool { c.b.tick(); return c.m.Match(n) }

// MatchAll returns n and its descendants that match, in document order,
// as cascadia's does, counting each node.
func (c countingMatcher) MatchAll(n *html.Node) []*html.Node {
	var out []*html.Node
	var walk func(*html.Node)
	walk = func(x *html.Node) {
		if c.Match(x) {
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
