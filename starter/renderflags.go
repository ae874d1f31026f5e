package main

import (
	"github.com/spf13/pflag"

	"github.com/batoncrawl/baton/activities/crawl"
)

// renderFlags are `baton crawl`'s flags for pages that need JavaScript
// (docs/rendering.md): which pages the built-in crawler renders in
// headless Chromium, and how.
type renderFlags struct {
	o  crawl.RenderOptions
	fs *pflag.FlagSet
}

func (r *renderFlags) add(f *pflag.FlagSet) {
	r.fs = f
	f.StringVar(&r.o.Render, "render", crawl.RenderNever, "render pages in headless Chromium on the Runners: always (every HTML page), "+
		"auto (fetch with HTTP; render a page whose --select fields or links come out empty, learning per host), or never")
	f.StringVar(&r.o.RenderWait, "render-wait", "networkidle", "when a rendered page is done: load, networkidle (no request for 500 ms after load) or selector:CSS")
	f.DurationVar(&r.o.RenderTimeout, "render-timeout", 0, "time limit of one page's render (default: --timeout)")
	f.IntVar(&r.o.RenderTabs, "render-tabs", 0, "pages a Runner renders at once, when this job starts its browsers (default 4)")
	f.BoolVar(&r.o.RenderScreenshots, "render-screenshots", false, "keep a PNG of each rendered page's viewport next to its body (needs --bodies-dir)")
	f.StringSliceVar(&r.o.RenderResources, "render-resources", nil, "resource types a rendered page may load besides scripts, styles and data: image, media, font (refused by default)")
}

// options returns the RenderOptions of the flags.
func (r *renderFlags) options() crawl.RenderOptions {
	o := r.o
	if o.Render == crawl.RenderNever {
		o.Render = ""
	}
	if o.RenderWait == "networkidle" && (r.fs == nil || !r.fs.Changed("render-wait")) {
		o.RenderWait = "" // the default: under auto, a page's fields end its wait
	}
	return o
}

func init() {
	// Validation errors of these fields name the flags (flagnames.go).
	for field, flag := range map[string]string{
		"options.render": "--render", "options.render_wait": "--render-wait", "options.render_timeout": "--render-timeout",
		"options.render_tabs": "--render-tabs", "options.render_resources": "--render-resources",
		"options.render_screenshots": "--render-screenshots",
	} {
		specFlags[field] = flag
	}
}
