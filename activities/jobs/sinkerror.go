package jobs

import (
	"net/url"
	"regexp"
	"strings"
)

// urlInText finds what looks like an absolute URL in an error's text.
var urlInText = regexp.MustCompile(`[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s"'<>]+`)

// RedactURLs replaces every URL in s by its scheme and host: an error of
// a sink (its own, or of the HTTP client it used) may name the URL it
// posts to, whose user, path and query may hold a token (a Slack
// webhook's path is its secret). What a sink's failure stores and logs
// goes through it.
func RedactURLs(s string) string {
	return urlInText.ReplaceAllStringFunc(s, func(m string) string {
		// Punctuation that ends the URL ends the sentence around it.
		trimmed := strings.TrimRight(m, ".,;:!?)]}")
		tail := m[len(trimmed):]
		u, err := url.Parse(trimmed)
		if err != nil || u.Host == "" {
			scheme, _, _ := strings.Cut(m, ":")
			return scheme + "://…" + tail
		}
		return u.Scheme + "://" + u.Host + tail
	})
}
