package crawl

import (
	"bytes"
	"mime"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/html/charset"
	"golang.org/x/text/transform"
)

// toUTF8 decodes an HTML body to UTF-8 when its Content-Type names no
// charset (Colly converts the body itself when it does): the encoding is
// the byte-order mark's, else the <meta charset> or <meta http-equiv>
// declaration's found in the first 1024 bytes, else UTF-8 when the bytes
// are valid UTF-8, else windows-1252 (the HTML standard's sniffing, as
// golang.org/x/net/html/charset does it). It returns the body and the name
// of the encoding it was read as.
func toUTF8(body []byte, contentType string) ([]byte, string) {
	if _, params, err := mime.ParseMediaType(contentType); err == nil {
		if cs := params["charset"]; cs != "" {
			if _, name := charset.Lookup(cs); name != "" {
				return body, name
			}
			return body, strings.ToLower(cs)
		}
	}
	enc, name, _ := charset.DetermineEncoding(body, "")
	if name == "windows-1252" && utf8.Valid(body) {
		// Either no declaration (the fallback) or a declaration of a
		// body that reads the same in both: ASCII.
		name = "utf-8"
	}
	if name == "utf-8" {
		return bytes.TrimPrefix(body, []byte("\xef\xbb\xbf")), name
	}
	out, _, err := transform.Bytes(enc.NewDecoder(), body)
	if err != nil {
		return body, ""
	}
	return out, name
}
