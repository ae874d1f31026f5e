package revisit

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"unicode"
)

// Hash is the content hash of a page's extracted parts (title, fields,
// visible text), not of its raw HTML, so markup, ads' scripts and
// timestamps in attributes do not make a page "changed". Each part is
// normalised (runs of white space, including non-breaking spaces, become
// one space; leading and trailing space is dropped) and the parts are
// kept apart, so ("ab", "c") and ("a", "bc") differ. The result is
// "sha256:" and 64 hex digits.
func Hash(parts ...string) string {
	h := sha256.New()
	for i, p := range parts {
		if i > 0 {
			h.Write([]byte{0x1f}) // unit separator between parts
		}
		h.Write([]byte(Normalize(p)))
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// Normalize collapses each run of white space in s to one space and trims
// the ends.
func Normalize(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	space := false
	for _, r := range s {
		if unicode.IsSpace(r) || r == '\u200b' || r == '\ufeff' {
			space = true
			continue
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		b.WriteRune(r)
	}
	return b.String()
}
