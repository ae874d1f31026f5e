package crawl

import (
	"context"
	"net/netip"
	"net/url"
	"strings"

	"github.com/batoncrawl/baton/activities/render"
)

// RenderGuard is the guard of a rendered page's requests (render.Guard):
// the worker's Policy always, and under the job's DenyPrivate a host
// that is, or resolves to, a private address is refused, as the HTTP
// fetches refuse it. Typed, when set, is the origin (scheme://host:port)
// of a URL the user typed as an IP address: its requests are exempt from
// the job's DenyPrivate (never from the worker's Policy), as the first
// request of such a URL is.
type RenderGuard struct {
	Engine      *Engine
	DenyPrivate bool
	Typed       *url.URL
}

// Allow refuses u when the Policy or the job's guard refuses its host.
func (g RenderGuard) Allow(ctx context.Context, u *url.URL) error {
	deny := g.DenyPrivate
	if g.Typed != nil && strings.EqualFold(u.Scheme, g.Typed.Scheme) && strings.EqualFold(u.Host, g.Typed.Host) {
		if _, err := netip.ParseAddr(strings.Trim(g.Typed.Hostname(), "[]")); err == nil {
			deny = false
		}
	}
	return g.Engine.checkHost(ctx, u.Hostname(), deny)
}

var _ render.Guard = RenderGuard{}
