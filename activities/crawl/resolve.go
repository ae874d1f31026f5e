package crawl

import (
	"strings"

	"github.com/gocolly/colly/v2"
	whatwgurl "github.com/nlnwa/whatwg-url/url"
)

// linkParser is the WHATWG URL parser with the options Colly's
// Request.AbsoluteURL uses (a lone '%' is percent-encoded), so that links
// resolve exactly as Colly resolves them.
var linkParser = whatwgurl.NewParser(whatwgurl.WithPercentEncodeSinglePercentSign())

// linkResolver resolves a page's links against its base URL (the page's
// URL, or its <base href> as Colly reads it) the way Colly's
// Request.AbsoluteURL does, but parses the base once per page instead of
// once per link: AbsoluteURL parses base.String() again for every link,
// which was a fifth of a Runner's CPU on a page of 40 links. Not safe for
// concurrent use (one per page).
type linkResolver struct {
	base   *whatwgurl.Url
	parsed bool
}

// resolve returns href made absolute against req's base, "" for a
// fragment-only or unparsable href (as AbsoluteURL).
func (l *linkResolver) resolve(req *colly.Request, href string) string {
	if strings.HasPrefix(href, "#") {
		return ""
	}
	if !l.parsed {
		l.parsed = true
		// AbsoluteURL("") is the base as Colly sees it (<base href>
		// included), already parsed and serialised by the same parser:
		// parsing it again is exact.
		if b := req.AbsoluteURL(""); b != "" {
			l.base, _ = linkParser.Parse(b)
		}
	}
	if l.base == nil {
		return req.AbsoluteURL(href)
	}
	u, err := l.base.Parse(href)
	if err != nil {
		return ""
	}
	return u.Href(false)
}
