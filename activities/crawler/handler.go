package crawler

import (
	"context"
	"fmt"
	"sort"
)

// Handler handles the pages of one label. ServePage is called once per
// fetched page (again if the page is fetched again after a fail-over or a
// Retry), concurrently for different pages: implementations must be safe
// for concurrent use.
type Handler interface {
	ServePage(ctx context.Context, p *Page) error
}

// HandlerFunc adapts a function to a Handler, as http.HandlerFunc does.
type HandlerFunc func(ctx context.Context, p *Page) error

// ServePage calls f(ctx, p).
func (f HandlerFunc) ServePage(ctx context.Context, p *Page) error { return f(ctx, p) }

// Middleware wraps a Handler (logging, timing, a check every page must
// pass), as net/http middleware wraps an http.Handler.
type Middleware func(Handler) Handler

// Router dispatches a page to the handler of its request's label, as
// http.ServeMux dispatches by path. Register before use; then safe for
// concurrent use.
type Router struct {
	handlers map[string]Handler
	fallback Handler
}

// NewRouter returns an empty router.
func NewRouter() *Router { return &Router{handlers: map[string]Handler{}} }

// Handle registers h for label; registering a label twice panics, as
// ServeMux does for a pattern.
func (r *Router) Handle(label string, h Handler) {
	if h == nil {
		panic("crawler: nil handler for label " + label)
	}
	if _, dup := r.handlers[label]; dup {
		panic(fmt.Sprintf("crawler: label %q registered twice", label))
	}
	r.handlers[label] = h
}

// HandleFunc registers f for label.
func (r *Router) HandleFunc(label string, f func(ctx context.Context, p *Page) error) {
	r.Handle(label, HandlerFunc(f))
}

// Default sets the handler of labels with no handler of their own; without
// one, such a page fails (permanently) naming its label.
func (r *Router) Default(h Handler) { r.fallback = h }

// Labels are the registered labels, sorted.
func (r *Router) Labels() []string {
	out := make([]string, 0, len(r.handlers))
	for l := range r.handlers {
		out = append(out, l)
	}
	sort.Strings(out)
	return out
}

// ServePage runs the handler of p's label.
func (r *Router) ServePage(ctx context.Context, p *Page) error {
	if h, ok := r.handlers[p.Request.Label]; ok {
		return h.ServePage(ctx, p)
	}
	if r.fallback != nil {
		return r.fallback.ServePage(ctx, p)
	}
	return fmt.Errorf("no handler for label %q (the crawler has %v)", p.Request.Label, r.Labels())
}
