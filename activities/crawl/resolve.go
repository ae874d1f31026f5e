package crawl

import (
	"net/url"
	"strings"

	whatwgurl "github.com/nlnwa/whatwg-url/url"
)

// linkParser is the WHATWG URL parser with the options Colly's
// Request.AbsoluteURL uses (a lone '%' is percent-encoded), so that links
// resolve exactly as Colly resolves them.
var linkParser = whatwgurl.NewParser(whatwgurl.WithPercentEncodeSinglePercentSign())

// collyBase is a page's base URL as Colly's Request sees it: the page's
// URL, or its first <base href> resolved against it when that parses.
func collyBase(page *url.URL, baseHref string, hasBase bool) string {
	if hasBase {
		if u, err := linkParser.ParseRef(page.String(), baseHref); err == nil {
			if b, err := url.Parse(u.Href(false)); err == nil {
				return b.String()
			}
		}
	}
	return page.String()
}

// linkResolver resolves a page's links against its base URL (collyBase)
// the way Colly's Request.AbsoluteURL does, but parses the base once per
// page instead of once per link, and resolves the links made of plain
// path characters (most links of most sites) without the WHATWG parser,
// to the same URL: it is the most of a Runner's CPU a link costs. Not
// safe for concurrent use (one per page).
type linkResolver struct {
	base *whatwgurl.Url // nil: the base does not parse, no link resolves
	// prefix is the base's scheme, user information, host and port, and
	// dir the segments of its path but the last: what a plain link
	// resolves against (fast), for an http(s) base.
	prefix string
	dir    []string
	fast   bool
}

func newLinkResolver(base string) linkResolver {
	var l linkResolver
	// AbsoluteURL resolves every href against the base parsed so.
	u, err := linkParser.Parse(base)
	if err != nil {
		return l
	}
	l.base = u
	href := l.base.Href(true)
	scheme, rest, ok := strings.Cut(href, "://")
	if !ok || scheme != "http" && scheme != "https" {
		return l
	}
	slash := strings.IndexByte(rest, '/')
	if slash < 0 {
		return l
	}
	path, _, _ := strings.Cut(rest[slash:], "?")
	l.prefix = scheme + "://" + rest[:slash]
	segs := strings.Split(path[1:], "/")
	l.dir, l.fast = segs[:len(segs)-1], true
	return l
}

// resolve returns href made absolute against the base, "" for a
// fragment-only or unparsable href (as AbsoluteURL).
func (l *linkResolver) resolve(href string) string {
	if strings.HasPrefix(href, "#") || l.base == nil {
		return ""
	}
	if l.fast {
		if abs, ok := l.plain(href); ok {
			return abs
		}
	}
	u, err := l.base.Parse(href)
	if err != nil {
		return ""
	}
	return u.Href(false)
}

// plain resolves an href made of plain characters only (letters, digits,
// "-._~/", then a query of those and "=&", then a fragment of those and
// "=&?") that starts with a path segment (not "//"): no character of it
// is one the WHATWG parser encodes, drops or reads as a scheme or a
// host, so the URL is the base's prefix, the path with its "." and ".."
// segments applied as the parser applies them, the query and the
// fragment. ok is false for any other href.
func (l *linkResolver) plain(href string) (string, bool) {
	if href == "" || !plainByte(href[0]) || strings.HasPrefix(href, "//") {
		return "", false
	}
	end, query := len(href), -1
	for i := 0; i < len(href); i++ {
		c := href[i]
		switch {
		case plainByte(c):
		case c == '?' && query < 0:
			query = i
		case (c == '=' || c == '&') && query >= 0:
		case c == '#':
			end = i
			for j := i + 1; j < len(href); j++ {
				if c := href[j]; !plainByte(c) && c != '=' && c != '&' && c != '?' {
					return "", false
				}
			}
			i = len(href)
		default:
			return "", false
		}
	}
	path := href[:end]
	if query >= 0 {
		path = href[:query]
	}
	var segs []string
	if strings.HasPrefix(path, "/") {
		path = path[1:]
	} else {
		segs = append(make([]string, 0, len(l.dir)+4), l.dir...)
	}
	parts := strings.Split(path, "/")
	for i, p := range parts {
		last := i == len(parts)-1
		switch p {
		case "..":
			if len(segs) > 0 {
				segs = segs[:len(segs)-1]
			}
			if last {
				segs = append(segs, "")
			}
		case ".":
			if last {
				segs = append(segs, "")
			}
		default:
			segs = append(segs, p)
		}
	}
	var b strings.Builder
	b.Grow(len(l.prefix) + len(href) + 16*len(segs))
	b.WriteString(l.prefix)
	for _, s := range segs {
		b.WriteByte('/')
		b.WriteString(s)
	}
	if len(segs) == 0 {
		b.WriteByte('/')
	}
	if query >= 0 {
		b.WriteString(href[query:])
	} else {
		b.WriteString(href[end:])
	}
	return b.String(), true
}

// plainByte: a letter, digit or one of "-._~/".
func plainByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~' || c == '/'
}
