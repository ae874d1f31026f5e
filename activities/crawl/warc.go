package crawl

import (
	"net/http"

	"github.com/batoncrawl/baton/activities/archive"
)

// archived wraps the transport of a fetch whose Options.Archive is set
// with archive.Capture: every response of the fetch (its redirects and
// its robots.txt included) reaches the sink as received, its body
// undecoded. The attempt's boundedTransport, above it, asks for the
// encodings and decodes them itself, so the capture keeps the body
// encoded for it (KeepEncoded) and Go's transport, seeing an
// Accept-Encoding it did not set, decodes nothing.
func archived(base func() http.RoundTripper, o Options) func() http.RoundTripper {
	if o.Archive == nil {
		return base
	}
	opts := archive.CaptureOptions{KeepEncoded: true, MaxBodyBytes: o.MaxBodyBytes}
	return func() http.RoundTripper { return archive.Capture(base(), o.Archive, opts) }
}
