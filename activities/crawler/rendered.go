package crawler

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/batoncrawl/baton/activities/render"
)

// HandleOption configures how the pages of one label are fetched
// (Rendered).
type HandleOption interface{ applyHandle(*labelConfig) }

type labelConfig struct{ render *RenderSpec }

type handleOptionFunc func(*labelConfig)

func (f handleOptionFunc) applyHandle(c *labelConfig) { f(c) }

// RenderSpec is how the pages of a label are rendered in headless
// Chromium: when a page counts as loaded, its budget, the resource types
// it may load, and the steps run in its tab before the handler gets its
// DOM. The Runner reads it (Crawler.Rendering); a crawler builds it with
// Rendered and its options.
type RenderSpec struct {
	// Wait is when the page counts as loaded: render.WaitLoad,
	// render.WaitNetworkIdle (the default) or render.WaitSelector+CSS.
	Wait string
	// Timeout is the page's budget for loading and waiting; zero: the
	// job's --render-timeout (else --timeout).
	Timeout time.Duration
	// Resources are the resource types the page may load beyond the
	// default ("image", "media", "font", "stylesheet"), added to the
	// job's --render-resources.
	Resources []string
	// Actions run in order once the page is loaded.
	Actions []render.Action
	// Screenshot keeps a PNG of the viewport with the page (Response.Screenshot).
	Screenshot bool
}

// RenderOption is an option of Rendered: a step run in the tab (WaitFor,
// Click, Scroll, Evaluate) or a setting of the page (WaitUntil,
// RenderTimeout, AllowResources, Screenshot).
type RenderOption interface{ applyRender(*RenderSpec) }

type renderOptionFunc func(*RenderSpec)

func (f renderOptionFunc) applyRender(s *RenderSpec) { f(s) }

// Rendered makes the pages of a label render in headless Chromium instead
// of being fetched over HTTP: the handler's Page holds the DOM the
// browser built (Find, Text, XPath, EnqueueLinks read it as they read a
// plain page), once the page has loaded and the steps given have run, in
// order, in the page's tab:
//
//	c.Handle("detail", h, crawler.Rendered(
//		crawler.WaitFor("span.price"),                      // the price is written by script
//		crawler.Click("button.reviews"),                    // load the reviews
//		crawler.WaitFor("li.review"),
//		crawler.Evaluate("rating", `window.__STATE__.rating`, time.Second),
//	))
//
// A first step WaitFor is the page's wait condition (the page counts as
// loaded once the element is there, without waiting for the network to
// be idle). Every request the page makes, its steps' included, passes the
// job's guard (--deny-private, the worker's rules, --proxy) as a plain
// fetch does. A step that fails (no element to click, a script that
// throws, a step past its budget) fails the page with an error naming the
// step; the handler is not called.
func Rendered(opts ...RenderOption) HandleOption {
	spec := &RenderSpec{}
	for _, o := range opts {
		o.applyRender(spec)
	}
	if spec.Wait == "" && len(spec.Actions) > 0 && spec.Actions[0].Kind == render.ActWait && spec.Actions[0].Timeout == 0 {
		spec.Wait = render.WaitSelector + spec.Actions[0].Selector
		spec.Actions = spec.Actions[1:]
	}
	return handleOptionFunc(func(c *labelConfig) { c.render = spec })
}

// Step is a step run in a rendered page's tab; Within sets its budget.
type Step struct{ a render.Action }

func (s Step) applyRender(spec *RenderSpec) { spec.Actions = append(spec.Actions, s.a) }

// Within returns the step with a budget of d instead of
// render.DefaultActionTimeout (5s).
func (s Step) Within(d time.Duration) Step { s.a.Timeout = d; return s }

// WaitFor waits until an element matches the CSS selector (Playwright's
// waitForSelector).
func WaitFor(css string) Step { return Step{render.Action{Kind: render.ActWait, Selector: css}} }

// Click clicks the first element matching the CSS selector, scrolled into
// view first. Wait for what the click loads with a WaitFor after it.
func Click(css string) Step { return Step{render.Action{Kind: render.ActClick, Selector: css}} }

// Scroll scrolls to the bottom of the page, and again each time the page
// grows (an infinite list loading more), until the page stops growing for
// a second or budget ends (Crawlee's infiniteScroll). Running out of
// budget is not an error.
func Scroll(budget time.Duration) Step {
	return Step{render.Action{Kind: render.ActScroll, Timeout: budget}}
}

// Evaluate evaluates a JavaScript expression in the page (a Promise is
// awaited) within budget (zero: render.DefaultActionTimeout); its value,
// as JSON, is the handler's Page.Script(name). A script that throws or
// runs past its budget fails the page.
func Evaluate(name, script string, budget time.Duration) Step {
	return Step{render.Action{Kind: render.ActEval, Name: name, Script: script, Timeout: budget}}
}

// WaitUntil sets when the page counts as loaded, before the steps run:
// "load" (the load event) or "networkidle" (the default: no request in
// flight for 500 ms after load).
func WaitUntil(mode string) RenderOption {
	return renderOptionFunc(func(s *RenderSpec) { s.Wait = mode })
}

// RenderTimeout sets the page's budget for loading and waiting (the
// steps have their own).
func RenderTimeout(d time.Duration) RenderOption {
	return renderOptionFunc(func(s *RenderSpec) { s.Timeout = d })
}

// AllowResources lets the page load resource types refused by default:
// "image", "media", "font".
func AllowResources(types ...string) RenderOption {
	return renderOptionFunc(func(s *RenderSpec) { s.Resources = append(s.Resources, types...) })
}

// Screenshot keeps a PNG of the page's viewport, taken after the steps,
// in the handler's Response.Screenshot.
func Screenshot() RenderOption {
	return renderOptionFunc(func(s *RenderSpec) { s.Screenshot = true })
}

// validate checks a label's render spec.
func (s *RenderSpec) validate() error {
	if err := render.ParseWait(s.Wait); err != nil {
		return err
	}
	if err := render.ParseResources(s.Resources); err != nil {
		return err
	}
	if s.Timeout < 0 {
		return fmt.Errorf("render timeout %v is negative", s.Timeout)
	}
	names := map[string]bool{}
	for _, a := range s.Actions {
		if err := a.Validate(); err != nil {
			return err
		}
		if a.Kind == render.ActEval {
			if names[a.Name] {
				return fmt.Errorf("two Evaluate steps named %q", a.Name)
			}
			names[a.Name] = true
		}
	}
	return nil
}

// Rendering returns how the pages of label are rendered, and whether they
// are (Rendered).
func (c *Crawler) Rendering(label string) (RenderSpec, bool) {
	if s := c.labels[label].render; s != nil {
		return *s, true
	}
	return RenderSpec{}, false
}

// Rendered reports whether the page was rendered in headless Chromium.
func (p *Page) Rendered() bool { return p.Response.Rendered }

// Script is the JSON value of the page's Evaluate step name (nil if
// there is none).
func (p *Page) Script(name string) json.RawMessage { return p.Response.Scripts[name] }

// DecodeScript decodes the JSON value of the page's Evaluate step name
// into v.
func (p *Page) DecodeScript(name string, v any) error {
	raw, ok := p.Response.Scripts[name]
	if !ok {
		return fmt.Errorf("no script %q on %s (Evaluate steps: Rendered)", name, p.Request.URL)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("script %q of %s: %w", name, p.Request.URL, err)
	}
	return nil
}
