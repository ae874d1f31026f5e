package crawler

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/PuerkitoBio/goquery"
	"github.com/antchfx/htmlquery"
	"github.com/batoncrawl/baton/activities/selectors"
	"github.com/tidwall/gjson"
	"golang.org/x/net/html"
)

// Bounds of what one page may produce (a hostile page, or a bug, must not
// make a transaction or a Task unbounded).
const (
	MaxLinksPerPage = 5000
	MaxItemsPerPage = 1000
	MaxItemBytes    = 1 << 20
	MaxDataBytes    = 16 << 10 // user data of one request
	MaxLabelBytes   = 128
	// DefaultMaxPageItemBytes bounds the encoded items of one page in
	// total unless the worker sets its own cap (WithMaxItemBytes): past
	// it, Push fails and so does the page.
	DefaultMaxPageItemBytes = 8 << 20
)

// Request is the request a page answers: its URL, label, depth (0 for a
// seed) and the user data it was enqueued with.
type Request struct {
	URL   string          `json:"url"`
	Label string          `json:"label,omitempty"`
	Depth int             `json:"depth"`
	Data  json.RawMessage `json:"data,omitempty"`
}

// Response is what the server answered: the status, the headers, the body
// (bounded by the job's --max-body-bytes, decompressed) and the URL after
// redirects.
type Response struct {
	StatusCode int
	Header     http.Header
	Body       []byte
	FinalURL   string
	// Rendered: the page was rendered in headless Chromium (a label
	// registered with Rendered) and Body is the DOM the browser built.
	Rendered bool
	// Scripts are the JSON values of the label's Evaluate steps, by name.
	Scripts map[string]json.RawMessage
	// Screenshot is a PNG of the rendered page's viewport (Screenshot).
	Screenshot []byte
}

// Link is a URL a handler enqueued, resolved against the page.
type Link struct {
	URL   string          `json:"url"`
	Label string          `json:"label,omitempty"`
	Data  json.RawMessage `json:"data,omitempty"`
}

// Item is one pushed value, as it passes the pipelines: Value may be
// replaced or changed by a pipeline; Label is the page's label.
type Item struct {
	Label string
	Index int // its place among the page's items, from 0
	Value any
}

// Pipeline processes an item before it is recorded (validate, clean,
// enrich): return ErrDrop to drop it, another error to fail the Push (and,
// if the handler returns it, the page). Pipelines run in the handler's
// goroutine, in the order given to Crawler.Pipe.
type Pipeline func(ctx context.Context, it *Item) error

// LinkFilter resolves what a handler enqueues the way the built-in crawler
// treats links: it normalises an absolute URL and says whether the job may
// follow it (allowed domains, depth, URL length); the Runner provides it.
type LinkFilter func(abs string, depth int) (string, error)

// Page is one fetched page and its actions. The request and response are
// read-only; the actions (Enqueue, Push, Skip) are safe for concurrent use
// by the handler's goroutines, until the handler returns.
type Page struct {
	Request  Request
	Response Response

	ctx       context.Context
	base      *url.URL
	filter    LinkFilter
	pipelines []Pipeline
	options   any // the job's decoded options (OptionsOf)

	parse struct {
		once sync.Once
		doc  *goquery.Document
		err  error
	}

	budget selectors.Budget // of Find and XPath

	mu           sync.Mutex
	closed       bool
	out          Outcome
	refused      int
	itemBytes    int64 // encoded items pushed
	maxItemBytes int64 // 0: DefaultMaxPageItemBytes
	failure      error // fails the page whatever its handler returns
}

// NewPage returns a Page for req and resp; filter (nil: every http(s) URL
// is accepted as is) judges enqueued links. The Runner makes Pages; tests
// of a crawler make them to call its handlers.
func NewPage(ctx context.Context, req Request, resp Response, filter LinkFilter) *Page {
	p := &Page{Request: req, Response: resp, ctx: ctx, filter: filter}
	raw := resp.FinalURL
	if raw == "" {
		raw = req.URL
	}
	p.base, _ = url.Parse(raw)
	if p.base == nil {
		p.base = &url.URL{}
	}
	return p
}

// WithMaxItemBytes sets the cap on the page's encoded items in total (the
// worker's --max-page-item-bytes); 0 is DefaultMaxPageItemBytes.
func (p *Page) WithMaxItemBytes(n int64) *Page { p.maxItemBytes = n; return p }

// fail marks the page failed with err (the first failure is kept).
func (p *Page) fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.failure == nil {
		p.failure = err
	}
}

// failed is the failure that fails the page whatever its handler
// returned (a cap or a budget it ran past), or nil.
func (p *Page) failed() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.failure
}

// WithOptions sets the job's decoded options (Crawler.DecodeOptions) that
// OptionsOf returns; the Runner calls it before the handler runs.
func (p *Page) WithOptions(opts any) *Page { p.options = opts; return p }

// URL is the page's URL after redirects.
func (p *Page) URL() *url.URL { u := *p.base; return &u }

// ContentType is the response's media type ("text/html"), lower-case,
// without parameters.
func (p *Page) ContentType() string {
	mt, _, _ := mime.ParseMediaType(p.Response.Header.Get("Content-Type"))
	return mt
}

// Doc is the page parsed as HTML (once; its <base href> becomes the base
// of Abs and Enqueue).
func (p *Page) Doc() (*goquery.Document, error) {
	p.parse.once.Do(func() {
		p.parse.doc, p.parse.err = goquery.NewDocumentFromReader(bytes.NewReader(p.Response.Body))
		if p.parse.err != nil {
			p.parse.err = fmt.Errorf("parse HTML: %w", p.parse.err)
			return
		}
		p.parse.doc.Url = p.URL()
		if href, ok := p.parse.doc.Find("base[href]").First().Attr("href"); ok {
			if b, err := p.base.Parse(strings.TrimSpace(href)); err == nil {
				p.base = b
			}
		}
	})
	return p.parse.doc, p.parse.err
}

// Find returns the elements matching a CSS selector (empty if the page
// does not parse as HTML).
func (p *Page) Find(css string) *goquery.Selection {
	empty := (&goquery.Document{Selection: &goquery.Selection{}}).Selection
	doc, err := p.Doc()
	if err != nil {
		return empty
	}
	sel, err := p.budget.Find(doc, css)
	if err != nil {
		if errors.Is(err, ErrSelectorBudget) {
			p.fail(err)
		}
		return empty // an invalid selector selects nothing, as goquery's Find
	}
	return sel
}

// Text is the trimmed text of the first element matching css, or "".
func (p *Page) Text(css string) string { return strings.TrimSpace(p.Find(css).First().Text()) }

// Attr is the trimmed attribute name of the first element matching css,
// or "".
func (p *Page) Attr(css, name string) string {
	v, _ := p.Find(css).First().Attr(name)
	return strings.TrimSpace(v)
}

// XPath returns the nodes an XPath expression selects.
func (p *Page) XPath(expr string) ([]*html.Node, error) {
	doc, err := p.Doc()
	if err != nil {
		return nil, err
	}
	if len(doc.Nodes) == 0 {
		return nil, nil
	}
	ns, err := p.budget.XPath(doc.Nodes[0], expr)
	if errors.Is(err, ErrSelectorBudget) {
		p.fail(err)
	}
	return ns, err
}

// XPathText is the trimmed text of the first node an XPath expression
// selects, or "".
func (p *Page) XPathText(expr string) string {
	ns, err := p.XPath(expr)
	if err != nil || len(ns) == 0 {
		return ""
	}
	return strings.TrimSpace(htmlquery.InnerText(ns[0]))
}

// JSON is the value at a gjson path in the body ("items.#.id").
func (p *Page) JSON(path string) gjson.Result { return gjson.GetBytes(p.Response.Body, path) }

// DecodeJSON decodes the body as JSON into v.
func (p *Page) DecodeJSON(v any) error {
	if err := json.Unmarshal(p.Response.Body, v); err != nil {
		return fmt.Errorf("decode JSON body of %s: %w", p.Request.URL, err)
	}
	return nil
}

// UserData decodes the data the request was enqueued with into v (nothing
// if there is none).
func (p *Page) UserData(v any) error {
	if len(p.Request.Data) == 0 {
		return nil
	}
	return json.Unmarshal(p.Request.Data, v)
}

// Abs resolves ref against the page (its final URL, or its <base href>
// once Doc was called).
func (p *Page) Abs(ref string) (string, error) {
	u, err := p.base.Parse(strings.TrimSpace(ref))
	if err != nil {
		return "", fmt.Errorf("link %q: %w", ref, err)
	}
	return u.String(), nil
}

// Enqueue queues ref (resolved against the page) with a label and user
// data (any JSON-serialisable value, or nil) at the page's depth + 1. The
// link is normalised and judged as the built-in crawler's links are
// (allowed domains, --depth, URL length): a link the job may not follow is
// not an error, it is counted as refused and Enqueue returns false. An
// error is a link that does not parse, bad data, or a closed page.
func (p *Page) Enqueue(ref, label string, data any) (bool, error) {
	abs, err := p.Abs(ref)
	if err != nil {
		return false, err
	}
	if len(label) > MaxLabelBytes {
		return false, fmt.Errorf("label of %d bytes: at most %d", len(label), MaxLabelBytes)
	}
	var raw json.RawMessage
	if data != nil {
		if raw, err = json.Marshal(data); err != nil {
			return false, fmt.Errorf("enqueue %s: data: %w", abs, err)
		}
		if len(raw) > MaxDataBytes {
			return false, fmt.Errorf("enqueue %s: data of %d bytes: at most %d", abs, len(raw), MaxDataBytes)
		}
	}
	u := abs
	if p.filter != nil {
		if u, err = p.filter(abs, p.Request.Depth+1); err != nil {
			p.mu.Lock()
			p.refused++
			p.mu.Unlock()
			return false, nil
		}
	} else if !strings.HasPrefix(abs, "http://") && !strings.HasPrefix(abs, "https://") {
		return false, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false, ErrPageClosed
	}
	if len(p.out.Links) >= MaxLinksPerPage {
		p.refused++
		return false, nil
	}
	p.out.Links = append(p.out.Links, Link{URL: u, Label: label, Data: raw})
	return true, nil
}

// EnqueueLinks enqueues the href of every element matching css, with one
// label and data, and returns how many were queued (Crawlee's
// enqueueLinks). Links the job may not follow are skipped.
func (p *Page) EnqueueLinks(css, label string, data any) (int, error) {
	n := 0
	var first error
	p.Find(css).Each(func(_ int, s *goquery.Selection) {
		href, ok := s.Attr("href")
		if !ok {
			return
		}
		ok, err := p.Enqueue(href, label, data)
		if err != nil && first == nil {
			first = err
		}
		if ok {
			n++
		}
	})
	return n, first
}

// Push records item (any JSON-serialisable value) as one of the page's
// items, after the crawler's pipelines; a page may push many. A dropped
// item is not an error. Items are recorded with the page, in one
// transaction, once.
func (p *Page) Push(item any) error {
	p.mu.Lock()
	idx := len(p.out.Items) + p.out.Dropped
	closed, failure := p.closed, p.failure
	p.mu.Unlock()
	if closed {
		return ErrPageClosed
	}
	if failure != nil {
		return failure
	}
	it := &Item{Label: p.Request.Label, Index: idx, Value: item}
	for _, pl := range p.pipelines {
		if err := pl(p.ctx, it); err == ErrDrop {
			p.mu.Lock()
			p.out.Dropped++
			p.mu.Unlock()
			return nil
		} else if err != nil {
			return fmt.Errorf("item %d of %s: %w", idx, p.Request.URL, err)
		}
	}
	b, err := json.Marshal(it.Value)
	if err != nil {
		return fmt.Errorf("item %d of %s: %w", idx, p.Request.URL, err)
	}
	if len(b) > MaxItemBytes {
		return fmt.Errorf("item %d of %s: %d bytes, at most %d", idx, p.Request.URL, len(b), MaxItemBytes)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrPageClosed
	}
	if len(p.out.Items) >= MaxItemsPerPage {
		return fmt.Errorf("item %d of %s: at most %d items per page", idx, p.Request.URL, MaxItemsPerPage)
	}
	limit := p.maxItemBytes
	if limit <= 0 {
		limit = DefaultMaxPageItemBytes
	}
	if p.itemBytes+int64(len(b)) > limit {
		if p.failure == nil {
			p.failure = fmt.Errorf("%w: item %d of %s would bring the page's items to %d bytes, above the cap of %d (--max-page-item-bytes)",
				ErrItemBytes, idx, p.Request.URL, p.itemBytes+int64(len(b)), limit)
		}
		return p.failure
	}
	p.itemBytes += int64(len(b))
	p.out.Items = append(p.out.Items, Pushed{Label: it.Label, Index: len(p.out.Items), Value: b})
	return nil
}

// ErrItemBytes is the error of a page whose items in total ran past the
// worker's cap (--max-page-item-bytes): the page fails, nothing of it is
// recorded but the error.
var ErrItemBytes = errors.New("page items too large")

// Skip records the page without items or links, with reason (e.g. "out
// of stock", "not a product page"); the handler then returns nil.
func (p *Page) Skip(reason string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.out.Skipped = reason
	p.out.Items, p.out.Links = nil, nil
}

// Refused is how many enqueued links the job's rules refused.
func (p *Page) Refused() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refused
}

// close ends the page's actions and returns what it produced.
func (p *Page) close() Outcome {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	out := p.out
	if out.Skipped != "" {
		out.Items, out.Links = nil, nil
	}
	return out
}

// Selection is goquery's selection, what Find returns (so that a crawler
// need not import goquery to name it).
type Selection = goquery.Selection
