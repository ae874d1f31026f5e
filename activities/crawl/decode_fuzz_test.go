package crawl

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/zstd"
	"golang.org/x/net/html"
)

// fuzzMaxBody is the body cap the decoder fuzz targets run under.
const fuzzMaxBody = 1 << 20

// decodeAll runs a Content-Encoding's decoder over raw, reading at most
// fuzzMaxBody+1 bytes: it must return (data or an error), never panic or
// reserve more than the cap allows.
func decodeAll(t *testing.T, encoding string, raw []byte) {
	dec := contentDecoder(encoding, fuzzMaxBody)
	if dec == nil {
		t.Fatalf("no decoder for %s", encoding)
	}
	rc := dec(io.NopCloser(bytes.NewReader(raw)))
	defer rc.Close()
	n, _ := io.Copy(io.Discard, io.LimitReader(rc, fuzzMaxBody+1))
	if n > fuzzMaxBody+1 {
		t.Fatalf("read %d bytes past the cap", n)
	}
}

func FuzzDecodeGzip(f *testing.F) {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	w.Write([]byte("<html><title>gzip</title></html>"))
	w.Close()
	f.Add(b.Bytes())
	f.Add([]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff})
	f.Add([]byte("not gzip"))
	f.Fuzz(func(t *testing.T, raw []byte) { decodeAll(t, "gzip", raw) })
}

func FuzzDecodeZstd(f *testing.F) {
	enc, _ := zstd.NewWriter(nil)
	f.Add(enc.EncodeAll([]byte("<html><title>zstd</title></html>"), nil))
	enc.Close()
	// A frame header declaring a huge window (the 591-byte attack).
	f.Add([]byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, 0xf8, 0x00, 0x00})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, raw []byte) { decodeAll(t, "zstd", raw) })
}

func FuzzDecodeBrotli(f *testing.F) {
	var b bytes.Buffer
	w := brotli.NewWriter(&b)
	w.Write([]byte("<html><title>brotli</title></html>"))
	w.Close()
	f.Add(b.Bytes())
	f.Add([]byte{0x21}) // a large declared window
	f.Add([]byte{0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, raw []byte) { decodeAll(t, "br", raw) })
}

// toUTF8 returns valid UTF-8 for any body whose encoding it names as
// decoded, and never panics.
func FuzzToUTF8(f *testing.F) {
	f.Add([]byte("<meta charset=\"iso-8859-1\">caf\xe9"), "text/html")
	f.Add([]byte("\xef\xbb\xbfbom"), "text/html; charset=utf-8")
	f.Add([]byte("\x82\xa0 sjis"), "text/html; charset=shift_jis")
	f.Add([]byte("<meta http-equiv=\"Content-Type\" content=\"text/html; charset=koi8-r\">\xc1\xc2"), "")
	f.Add([]byte{0xff, 0xfe, 'a', 0}, "text/html; charset=nope")
	f.Fuzz(func(t *testing.T, body []byte, ct string) {
		out, name := toUTF8(body, ct)
		if name == "utf-8" && utf8.Valid(body) && !utf8.Valid(out) {
			t.Fatalf("valid UTF-8 in, invalid out")
		}
	})
}

// parseSitemap reads any XML, text or robots.txt sitemap without panic,
// and returns only absolute http(s) URLs, at most MaxSitemapURLs each.
func FuzzParseSitemap(f *testing.F) {
	f.Add([]byte(`<?xml version="1.0"?><urlset><url><loc>http://a.test/1</loc></url><url><loc> /rel </loc></url></urlset>`))
	f.Add([]byte(`<sitemapindex><sitemap><loc>http://a.test/s.xml</loc></sitemap></sitemapindex>`))
	f.Add([]byte("http://a.test/x\nftp://nope\n\nhttp://a.test/y"))
	f.Add([]byte("User-agent: *\nSitemap: http://a.test/sm.xml\n"))
	f.Add([]byte(`<!DOCTYPE x [<!ENTITY a "aaaa"><!ENTITY b "&a;&a;&a;">]><urlset><url><loc>&b;</loc></url></urlset>`))
	base, _ := url.Parse("http://a.test/sitemap.xml")
	f.Fuzz(func(t *testing.T, body []byte) {
		pages, maps, _ := parseSitemap(body, base, fuzzMaxBody)
		for _, list := range [][]string{pages, maps} {
			if len(list) > MaxSitemapURLs {
				t.Fatalf("%d URLs", len(list))
			}
			for _, u := range list {
				if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
					t.Fatalf("not an http(s) URL: %q", u)
				}
			}
		}
	})
}

// An XPath selector of any text parses or errors; one that parses runs on
// any document within the field budget.
func FuzzXPathSelector(f *testing.F) {
	f.Add("//h1", `<h1>x</h1>`)
	f.Add("count(//li)", `<ul><li>a<li>b</ul>`)
	f.Add("string(//a/@href)", `<a href="/x">`)
	f.Add("//*[contains(., 'x')]/ancestor::*", strings.Repeat("<div>", 50)+"x")
	f.Add("//[", "")
	f.Fuzz(func(t *testing.T, expr, doc string) {
		sel, err := ParseSelector("xpath:" + expr)
		if err != nil {
			return
		}
		root, err := html.Parse(strings.NewReader(doc))
		if err != nil {
			return
		}
		fields, _ := extractHTML(root, map[string]Selector{"f": sel}, nil)
		total := 0
		for _, v := range fields["f"] {
			total += len(v)
		}
		if total > MaxFieldBytes {
			t.Fatalf("fields of %d bytes, over the budget", total)
		}
	})
}

// A JSON selector of any path runs on any body without panic, within the
// field budget.
func FuzzJSONSelector(f *testing.F) {
	f.Add("items.#.name", `{"items":[{"name":"a"},{"name":"b"}]}`)
	f.Add("meta.page", `{"meta":{"page":1}}`)
	f.Add("..#", `[[[[[[1]]]]]]`)
	f.Add("a|@reverse", `{"a":[1,2]}`)
	f.Add("", `not json`)
	f.Fuzz(func(t *testing.T, path, body string) {
		sel, err := ParseSelector("json:" + path)
		if err != nil {
			return
		}
		fields := extractJSON([]byte(body), map[string]Selector{"f": sel})
		total := 0
		for _, v := range fields["f"] {
			total += len(v)
		}
		if total > MaxFieldBytes {
			t.Fatalf("fields of %d bytes, over the budget", total)
		}
	})
}
