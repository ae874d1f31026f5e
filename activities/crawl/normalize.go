package crawl

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"sort"
	"strings"
)

// NormalizeURL returns the canonical form of an absolute URL, used to
// deduplicate: scheme and host lower-cased, the scheme's default port
// dropped, the fragment dropped, dot segments resolved, an empty path made
// "/", percent-escapes upper-cased (unreserved characters decoded) in the
// path and the query, characters a query may not hold escaped, tracking
// parameters removed (see IsTrackingParam), and the query
// parameters sorted by name (the values of one name keep their order; an
// empty query is dropped).
func NormalizeURL(raw string) (string, error) { return normalizeURL(raw, false) }

// NormalizeURL normalises raw as the package's NormalizeURL does, keeping
// the tracking parameters when o.KeepTrackingParams is set. A crawl job
// normalises its seeds and links with its options.
func (o Options) NormalizeURL(raw string) (string, error) {
	return normalizeURL(raw, o.KeepTrackingParams)
}

func normalizeURL(raw string, keepTracking bool) (string, error) {
	n, _, err := normalizeParsed(raw, keepTracking)
	return n, err
}

// normalizeParsed is normalizeURL that also returns the URL it made.
func normalizeParsed(raw string, keepTracking bool) (string, *url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return "", nil, err
	}
	return normalizeInPlace(raw, u, keepTracking)
}

// NormalizeParsedURL is NormalizeURL of raw, parsed already as u (which it
// changes into the canonical URL): for a caller that reads the parsed URL
// first, without parsing raw twice.
func NormalizeParsedURL(raw string, u *url.URL) (string, error) {
	n, _, err := normalizeInPlace(raw, u, false)
	return n, err
}

// normalizeInPlace is normalizeParsed of raw parsed already as u.
func normalizeInPlace(raw string, u *url.URL, keepTracking bool) (string, *url.URL, error) {
	if u.Scheme == "" || u.Host == "" {
		return "", nil, fmt.Errorf("%q is not an absolute URL", raw)
	}
	u.Scheme = strings.ToLower(u.Scheme)
	u.Host = normalizeHost(u.Scheme, u.Host)
	if u.Hostname() == "" { // "http://:80/"
		return "", nil, fmt.Errorf("%q has no host name", raw)
	}
	u.Fragment, u.RawFragment = "", ""

	p := normalizePercent(u.EscapedPath())
	p = removeDotSegments(p)
	if p == "" {
		p = "/"
	}
	dec, err := url.PathUnescape(p)
	if err != nil {
		return "", nil, err
	}
	u.Path, u.RawPath = dec, p
	if u.EscapedPath() != p { // RawPath not taken as is: keep the exact escaping
		u.RawPath = ""
	}
	u.RawQuery = sortQuery(normalizePercent(escapeQuery(u.RawQuery)), keepTracking)
	u.ForceQuery = false
	return u.String(), u, nil
}

// normalizeHost lower-cases host and drops the scheme's default port.
func normalizeHost(scheme, host string) string {
	host = strings.ToLower(host)
	if h, port, err := net.SplitHostPort(host); err == nil {
		if (scheme == "http" && port == "80") || (scheme == "https" && port == "443") || port == "" {
			if strings.Contains(h, ":") {
				return "[" + h + "]"
			}
			return h
		}
	}
	return host
}

// hostKey is the domain of a URL for the per-domain limits and robots.txt:
// lower-cased host, with a non-default port.
func hostKey(u *url.URL) string { return normalizeHost(strings.ToLower(u.Scheme), u.Host) }

// HostKey is the host of raw as the per-domain limits key it (the
// lower-cased host, with a non-default port): the host a crawl job's
// politeness holds across its Runners. "" when raw is not an absolute URL.
func HostKey(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return ""
	}
	return hostKey(u)
}

// removeDotSegments implements RFC 3986 section 5.2.4.
func removeDotSegments(p string) string {
	if !strings.Contains(p, "/.") && !strings.HasPrefix(p, ".") {
		return p // no dot segment
	}
	var out []string
	segs := strings.Split(p, "/")
	for i, s := range segs {
		last := i == len(segs)-1
		switch s {
		case ".":
			if last {
				out = append(out, "")
			}
		case "..":
			if len(out) > 1 || (len(out) == 1 && out[0] != "") {
				out = out[:len(out)-1]
			}
			if last {
				out = append(out, "")
			}
		default:
			out = append(out, s)
		}
	}
	r := strings.Join(out, "/")
	if strings.HasPrefix(p, "/") && !strings.HasPrefix(r, "/") {
		r = "/" + r
	}
	return r
}

// normalizePercent upper-cases percent-escapes and decodes the escapes of
// unreserved characters (RFC 3986 section 6.2.2).
func normalizePercent(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			c := unhex(s[i+1])<<4 | unhex(s[i+2])
			if isUnreserved(c) {
				b.WriteByte(c)
			} else {
				b.WriteByte('%')
				b.WriteString(strings.ToUpper(s[i+1 : i+3]))
			}
			i += 2
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// escapeQuery percent-encodes the bytes a query may not hold as they are
// (RFC 3986 section 3.4; url.Parse lets a space or a '"' through), a '%'
// that starts no escape included.
func escapeQuery(q string) string {
	var b strings.Builder
	for i := 0; i < len(q); i++ {
		c := q[i]
		switch {
		case c == '%' && i+2 < len(q) && isHex(q[i+1]) && isHex(q[i+2]):
			b.WriteByte(c)
		case isUnreserved(c) || strings.IndexByte("!$&'()*+,;=:@/?", c) >= 0:
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

func isHex(c byte) bool {
	return ('0' <= c && c <= '9') || ('a' <= c && c <= 'f') || ('A' <= c && c <= 'F')
}

func unhex(c byte) byte {
	switch {
	case '0' <= c && c <= '9':
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	default:
		return c - 'A' + 10
	}
}

func isUnreserved(c byte) bool {
	return ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9') ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

// sortQuery sorts the parameters of a raw query by name (stable, so the
// values of one name keep their order), dropping empty parameters and,
// unless keepTracking, tracking parameters.
func sortQuery(q string, keepTracking bool) string {
	if q == "" {
		return ""
	}
	parts := strings.FieldsFunc(q, func(r rune) bool { return r == '&' })
	if !keepTracking {
		parts = slices.DeleteFunc(parts, func(p string) bool { return IsTrackingParam(queryKey(p)) })
	}
	sort.SliceStable(parts, func(i, j int) bool { return queryKey(parts[i]) < queryKey(parts[j]) })
	return strings.Join(parts, "&")
}

// queryKey is the decoded name of one raw query parameter.
func queryKey(p string) string {
	k, _, _ := strings.Cut(p, "=")
	if dk, err := url.QueryUnescape(k); err == nil {
		return dk
	}
	return k
}

// domainAllowed reports whether host (a URL's Host, lower-cased, default
// port dropped) is within allowed: an entry matches its exact host and
// subdomains, an entry with a port that host and port only.
func domainAllowed(scheme, host string, allowed []string) bool {
	if len(allowed) == 0 {
		return true
	}
	hostname := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		hostname = h
	}
	hostname = strings.TrimSuffix(strings.Trim(hostname, "[]"), ".")
	for _, a := range allowed {
		a = strings.ToLower(strings.TrimSpace(a))
		if _, _, err := net.SplitHostPort(a); err == nil {
			if normalizeHost(scheme, a) == host {
				return true
			}
			continue
		}
		a = strings.TrimSuffix(strings.Trim(a, "[]"), ".")
		if a == "" {
			continue
		}
		if hostname == a || strings.HasSuffix(hostname, "."+a) {
			return true
		}
	}
	return false
}

var errNotHTTP = errors.New("not an http(s) URL")

// plainHost: a host (lower-cased) that a URL's serialisation writes as it
// is and that reads back the same: letters, digits and ".-:[]".
func plainHost(h string) bool {
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '.' || c == '-' || c == ':' || c == '[' || c == ']') {
			return false
		}
	}
	return true
}

// linkURL resolves, filters and normalises one link: http(s) only.
// Its URL's scheme and host are those of the normalised URL read back:
// a host of plain characters (letters, digits, ".-:[]") reads back as it
// is, any other is read back.
func linkURL(abs string, keepTracking bool) (string, *url.URL, error) {
	n, u, err := normalizeParsed(abs, keepTracking)
	if err != nil {
		return "", nil, err
	}
	if !plainHost(u.Host) {
		if u, err = url.Parse(n); err != nil {
			return "", nil, err
		}
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", nil, errNotHTTP
	}
	return n, u, nil
}

// FollowLink judges an absolute link as the built-in crawler judges the
// links of a page: normalised (tracking parameters dropped unless
// KeepTrackingParams), http or https, within AllowedDomains, passing
// FollowAllow and FollowDeny. It returns the normalised URL, or why the
// job may not follow it. A user crawler's Enqueue goes through it.
// Compiled options (Compile) match the rules without compiling anything.
func (o Options) FollowLink(abs string) (string, error) {
	n, u, err := linkURL(abs, o.KeepTrackingParams)
	if err != nil {
		return "", err
	}
	if !domainAllowed(u.Scheme, u.Host, o.AllowedDomains) {
		return "", fmt.Errorf("%s is outside the allowed domains", u.Host)
	}
	if len(o.FollowAllow)+len(o.FollowDeny) > 0 {
		if ok, why := o.linkRules().follows(n); !ok {
			return "", fmt.Errorf("%s %s", n, why)
		}
	}
	return n, nil
}
