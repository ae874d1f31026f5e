package selectors

import (
	"github.com/antchfx/htmlquery"
	"github.com/antchfx/xpath"
	"golang.org/x/net/html"
)

// Nav is an XPath navigator over a document that counts its moves; the
// nodes an expression selects come back as *Nav.
type Nav struct {
	*htmlquery.NodeNavigator
	b *Budget
}

// Navigator is a counting navigator over top's document; use it inside
// Run.
func (b *Budget) Navigator(top *html.Node) *Nav {
	return &Nav{NodeNavigator: htmlquery.CreateXPathNavigator(top), b: b}
}

// XPath is htmlquery.QueryAll(top, expr) under the budget.
func (b *Budget) XPath(top *html.Node, expr string) ([]*html.Node, error) {
	e, err := xpath.Compile(expr)
	if err != nil {
		return nil, err
	}
	var out []*html.Node
	err = b.Run(func() {
		it := e.Select(b.Navigator(top))
		for it.MoveNext() {
			if n, ok := it.Current().(*Nav); ok {
				out = append(out, Node(n.NodeNavigator))
			}
		}
	})
	return out, err
}

// Node is the node a navigator is on, an attribute as an element holding
// its value (as htmlquery.QueryAll gives it).
func Node(n *htmlquery.NodeNavigator) *html.Node {
	if n.NodeType() == xpath.AttributeNode {
		child := &html.Node{Type: html.TextNode, Data: n.Value()}
		return &html.Node{Type: html.ElementNode, Data: n.LocalName(), FirstChild: child, LastChild: child}
	}
	return n.Current()
}

func (c *Nav) Copy() xpath.NodeNavigator {
	return &Nav{NodeNavigator: c.NodeNavigator.Copy().(*htmlquery.NodeNavigator), b: c.b}
}
func (c *Nav) MoveToRoot()        { c.b.tick(); c.NodeNavigator.MoveToRoot() }
func (c *Nav) MoveToParent() bool { c.b.tick(); return c.NodeNavigator.MoveToParent() }
func (c *Nav) MoveToNextAttribute() bool {
	c.b.tick()
	return c.NodeNavigator.MoveToNextAttribute()
}
func (c *Nav) MoveToChild() bool    { c.b.tick(); return c.NodeNavigator.MoveToChild() }
func (c *Nav) MoveToFirst() bool    { c.b.tick(); return c.NodeNavigator.MoveToFirst() }
func (c *Nav) MoveToNext() bool     { c.b.tick(); return c.NodeNavigator.MoveToNext() }
func (c *Nav) MoveToPrevious() bool { c.b.tick(); return c.NodeNavigator.MoveToPrevious() }
func (c *Nav) MoveTo(o xpath.NodeNavigator) bool {
	c.b.tick()
	if w, ok := o.(*Nav); ok {
		o = w.NodeNavigator
	}
	return c.NodeNavigator.MoveTo(o)
}
