package crawl

import (
	"context"
	"net/url"
	"strings"

	"github.com/batoncrawl/baton/activities/render"
)

// RenderGuard is the guard of a rendered page's requests under
// DenyPrivate (render.Guard): a host that is, or resolves to, a private
// address is refused, as the HTTP fetches refuse it. Typed, when set, is
// the origin (scheme://host:port) of a URL the user typed: its requests
// may reach a private address, as the first request of a typed URL may.
type RenderGuard struct {
	Engine *Engine
	Typed  *url.URL
}

// Allow refuses u when its host is private.
func (g RenderGuard) Allow(ctx context.Context, u *url.URL) error {
	if g.Typed != nil && strings.EqualFold(u.Scheme, g.Typed.Scheme) && strings.EqualFold(u.Host, g.Typed.Host) {
		return nil
	}
	return g.Engine.checkHost(ctx, u.Hostname())
}

var _ render.Guard = RenderGuard{}
