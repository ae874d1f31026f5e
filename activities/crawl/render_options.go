package crawl

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/batoncrawl/baton/activities/render"
)

// Render modes (Options.Render).
const (
	RenderNever  = "never"  // plain HTTP only (the default)
	RenderAlways = "always" // every HTML page is rendered instead of fetched
	RenderAuto   = "auto"   // fetched; rendered too when its fields or links are empty
)

// RenderOptions pick the pages rendered in headless Chromium (see
// docs/rendering.md). Rendered pages give fields, links, canonical,
// JSON-LD and title from the rendered DOM, extracted as plain pages are.
type RenderOptions struct {
	// Render is RenderNever (or empty), RenderAlways or RenderAuto.
	Render string `json:"render,omitempty"`
	// RenderWait is when a page counts as rendered: "load",
	// "networkidle" (the default) or "selector:CSS".
	RenderWait string `json:"render_wait,omitempty"`
	// RenderTimeout is a page's render budget; zero: Timeout.
	RenderTimeout time.Duration `json:"render_timeout,omitempty"`
	// RenderResources are the resource types a rendered page may load
	// beyond the default (images, media and fonts are refused): "image",
	// "media", "font".
	RenderResources []string `json:"render_resources,omitempty"`
	// RenderTabs sizes a worker's browser pool when this job starts it
	// (the first job to render on a worker); zero: render.DefaultTabs.
	RenderTabs int `json:"render_tabs,omitempty"`
	// RenderScreenshots keeps a PNG of each rendered page's viewport
	// with its body (Page.Screenshot).
	RenderScreenshots bool `json:"render_screenshots,omitempty"`
	// RenderActions run in a rendered page's tab before its DOM is read
	// (a user crawler's label, crawler.Rendered); never in a spec.
	RenderActions []render.Action `json:"-"`
	// RenderReason, when set with RenderAlways, is the reason recorded
	// with the pages rendered first (RenderLabel for a user crawler's
	// label); never in a spec.
	RenderReason string `json:"-"`
}

// Reasons a page was rendered (Page.RenderReason).
const (
	ReasonAlways      = RenderAlways
	ReasonEmptyFields = "auto: empty fields"
	ReasonNoLinks     = "auto: no links"
	ReasonSample      = "auto: sample"
	ReasonLabel       = "label"
)

// renderOutcome is what a render left besides the DOM: the crawler's
// script values and screenshot, the crashes of its tab and whether it
// did not settle in time.
type renderOutcome struct {
	scripts    map[string]json.RawMessage
	screenshot []byte
	crashes    int
	timedOut   bool
}

func (r RenderOptions) validate() error {
	switch r.Render {
	case "", RenderNever, RenderAlways, RenderAuto:
	default:
		return fieldErr("render", "%q: want always, auto or never", r.Render)
	}
	if err := render.ParseWait(r.RenderWait); err != nil {
		return fieldErr("render_wait", "%v", err)
	}
	if r.RenderTimeout < 0 {
		return fieldErr("render_timeout", "%v is negative", r.RenderTimeout)
	}
	if err := render.ParseResources(r.RenderResources); err != nil {
		return fieldErr("render_resources", "%v", err)
	}
	if r.RenderTabs < 0 || r.RenderTabs > 256 {
		return fieldErr("render_tabs", "%d is not in [0, 256]", r.RenderTabs)
	}
	return nil
}

// renders reports whether the options render any page.
func (r RenderOptions) renders() bool { return r.Render == RenderAlways || r.Render == RenderAuto }

// renderFirst reports whether a fetch renders its page instead of
// fetching it: RenderAlways, for a GET of a page (not a sitemap).
func renderFirst(o Options, b *built, sitemap bool) bool {
	return o.Render == RenderAlways && !sitemap && b.method == http.MethodGet
}

// renderHeaders are a request's headers for the browser: the Cookie
// goes separately, the User-Agent is the page's.
func renderHeaders(h http.Header) (map[string]string, string) {
	out := map[string]string{}
	for k, v := range h {
		switch strings.ToLower(k) {
		case "cookie", "user-agent", "accept-encoding", "host", "content-length":
			continue
		}
		out[k] = strings.Join(v, ", ")
	}
	return out, h.Get("Cookie")
}
