package crawl

import (
	"bytes"
	"net/url"
	"strings"

	"golang.org/x/net/html"
)

// readHTML parses an HTML body (converted to UTF-8) once and reads from
// it, in one walk of the tree, what the attempt keeps: the first <title>'s
// text, the fields, canonical URL and JSON-LD of the document, and the
// a[href] links made absolute. It reads what Colly's OnHTML callbacks
// "title", "html" and "a[href]" read (the same parser, the same elements
// in document order, links resolved against the first <base href> as
// Colly's Request.AbsoluteURL resolves them) without building an element,
// and the text of each, for every match: the "html" match alone is the
// text of the whole page.
func (a *attemptRun) readHTML(body []byte, page *url.URL) {
	doc, err := html.Parse(bytes.NewReader(body))
	if err != nil {
		a.parseErr = err // e.g. nesting deeper than the parser's 512 levels
		return
	}
	var w pageWalk
	w.walk(doc, a.wantLinks)
	if w.title != nil {
		a.r.title = truncateUTF8(strings.TrimSpace(nodeText(w.title)), MaxTitleBytes)
	}
	if w.root != nil {
		base := baseOf(w.root, page) // honours <base href>
		if len(a.sels) > 0 {
			a.r.fields, a.selErr = extractHTML(w.root, a.sels, base)
		}
		a.r.canonical = canonicalOf(w.root, base)
		a.r.jsonld = jsonLDOf(w.root)
	}
	if !a.wantLinks {
		return
	}
	links := newLinkResolver(collyBase(page, w.baseHref, w.hasBase))
	for _, href := range w.hrefs {
		if len(a.rawLinks) >= 4*MaxLinksPerPage {
			break
		}
		if abs := links.resolve(href); abs != "" {
			a.rawLinks = append(a.rawLinks, abs)
		}
	}
}

// pageWalk is what one walk of a parsed page found, in document order.
type pageWalk struct {
	title, root *html.Node // the first <title>, the first <html>
	baseHref    string     // the href of the first <base href>
	hasBase     bool
	hrefs       []string // the href of every a[href]
}

func (w *pageWalk) walk(n *html.Node, links bool) {
	if n.Type == html.ElementNode {
		switch n.Data {
		case "title":
			if w.title == nil {
				w.title = n
			}
		case "html":
			if w.root == nil {
				w.root = n
			}
		case "base":
			if !w.hasBase {
				w.baseHref, w.hasBase = attrExact(n, "href")
			}
		case "a":
			if href, ok := attrExact(n, "href"); ok && links {
				w.hrefs = append(w.hrefs, href)
			}
		}
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		w.walk(c, links)
	}
}

// attrExact is the value of n's first attribute named key, as a CSS
// attribute selector and Colly's HTMLElement.Attr match it (the name as
// the parser lower-cased it, any namespace).
func attrExact(n *html.Node, key string) (string, bool) {
	for _, at := range n.Attr {
		if at.Key == key {
			return at.Val, true
		}
	}
	return "", false
}

// nodeText is the text of n's descendants, as goquery's Text.
func nodeText(n *html.Node) string {
	if c := n.FirstChild; c != nil && c.NextSibling == nil && c.Type == html.TextNode {
		return c.Data // a title's one text node
	}
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return b.String()
}
