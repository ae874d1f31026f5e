package revisit

import (
	"net/http"
	"strings"
)

// Baseline is what the previous run kept of a URL.
type Baseline struct {
	ETag         string // the ETag response field, as received
	LastModified string // the Last-Modified response field, as received
	ContentHash  string // Hash of the page's extracted content
}

// HasValidator reports whether b can make a request conditional.
func (b Baseline) HasValidator() bool {
	return validETag(b.ETag) || validDate(b.LastModified)
}

// Condition makes a request conditional on b: If-None-Match from the ETag
// and If-Modified-Since from Last-Modified. Both are sent, since many
// servers honour only one of them; a server that honours both evaluates
// If-None-Match first (RFC 9110, 13.2.2). A validator that is not
// well formed (the server's bytes are untrusted) is left out. It returns
// the fields it set.
func Condition(h http.Header, b Baseline) []string {
	var set []string
	if validETag(b.ETag) {
		h.Set("If-None-Match", b.ETag)
		set = append(set, "If-None-Match")
	}
	if t, err := http.ParseTime(b.LastModified); err == nil && validDate(b.LastModified) {
		h.Set("If-Modified-Since", t.UTC().Format(http.TimeFormat))
		set = append(set, "If-Modified-Since")
	}
	return set
}

// maxValidator bounds a validator's length.
const maxValidator = 1024

// validETag accepts an entity-tag of RFC 9110: an optional weak prefix
// W/ and a quoted string of visible characters other than '"'.
func validETag(s string) bool {
	s = strings.TrimPrefix(s, "W/")
	if len(s) < 2 || len(s) > maxValidator || s[0] != '"' || s[len(s)-1] != '"' {
		return false
	}
	for i := 1; i < len(s)-1; i++ {
		c := s[i]
		if c == '"' || c < 0x21 || c == 0x7f {
			return false
		}
	}
	return true
}

// validDate accepts an HTTP date Go can parse and that is not after the
// year 9999.
func validDate(s string) bool {
	if len(s) > maxValidator {
		return false
	}
	t, err := http.ParseTime(s)
	return err == nil && t.Year() <= 9999
}
