package crawl

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path"
	"strings"

	"github.com/temoto/robotstxt"
)

// MaxSitemapURLs bounds the page URLs, and the sitemap URLs, taken from
// one sitemap (the sitemap protocol's own limit is 50,000).
const MaxSitemapURLs = 50000

// parseSitemap reads a sitemap body fetched from u: a robots.txt (its
// Sitemap: lines), an XML urlset or sitemapindex (gzip-compressed or not),
// or a text sitemap (one absolute URL per line). It returns the page URLs
// and the sitemap URLs it lists, as written (resolved against u), at most
// MaxSitemapURLs each; a gzip body is decoded to at most maxBytes.
func parseSitemap(body []byte, u *url.URL, maxBytes int64) (pages, sitemaps []string, err error) {
	if path.Base(u.Path) == "robots.txt" {
		data, err := robotstxt.FromBytes(body)
		if err != nil {
			return nil, nil, fmt.Errorf("robots.txt: %w", err)
		}
		for _, s := range data.Sitemaps {
			if abs := resolve(u, s); abs != "" && len(sitemaps) < MaxSitemapURLs {
				sitemaps = append(sitemaps, abs)
			}
		}
		return nil, sitemaps, nil
	}
	if bytes.HasPrefix(body, []byte{0x1f, 0x8b}) {
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			return nil, nil, fmt.Errorf("gzip: %w", err)
		}
		body, err = io.ReadAll(io.LimitReader(zr, maxBytes+1))
		if err != nil {
			return nil, nil, fmt.Errorf("gzip: %w", err)
		}
		if int64(len(body)) > maxBytes {
			return nil, nil, &bodyTooLargeError{max: maxBytes}
		}
	}
	trimmed := bytes.TrimLeft(bytes.TrimPrefix(body, []byte("\xef\xbb\xbf")), " \t\r\n")
	if !bytes.HasPrefix(trimmed, []byte("<")) {
		return textSitemap(trimmed, u)
	}
	return xmlSitemap(trimmed, u)
}

// xmlSitemap reads <urlset><url><loc> and <sitemapindex><sitemap><loc>.
func xmlSitemap(body []byte, u *url.URL) (pages, sitemaps []string, err error) {
	d := xml.NewDecoder(bytes.NewReader(body))
	d.Strict = false
	var root, parent string
	var depth int
	stack := []string{}
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return pages, sitemaps, fmt.Errorf("XML: %w", err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			name := strings.ToLower(t.Name.Local)
			if depth == 0 {
				root = name
				if root != "urlset" && root != "sitemapindex" {
					return nil, nil, fmt.Errorf("root element <%s>: want <urlset> or <sitemapindex>", t.Name.Local)
				}
			}
			stack = append(stack, name)
			depth++
			if name != "loc" || depth != 3 {
				continue
			}
			parent = stack[1]
			var loc string
			if err := d.DecodeElement(&loc, &t); err != nil {
				return pages, sitemaps, fmt.Errorf("XML: %w", err)
			}
			stack = stack[:len(stack)-1]
			depth--
			abs := resolve(u, loc)
			switch {
			case abs == "":
			case root == "urlset" && parent == "url" && len(pages) < MaxSitemapURLs:
				pages = append(pages, abs)
			case root == "sitemapindex" && parent == "sitemap" && len(sitemaps) < MaxSitemapURLs:
				sitemaps = append(sitemaps, abs)
			}
		case xml.EndElement:
			if depth > 0 {
				stack = stack[:len(stack)-1]
				depth--
			}
		}
	}
	if root == "" {
		return nil, nil, errors.New("no XML element: not a sitemap")
	}
	return pages, sitemaps, nil
}

// textSitemap reads one URL per line.
func textSitemap(body []byte, u *url.URL) (pages, sitemaps []string, err error) {
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 64<<10), 64<<10)
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" {
			continue
		}
		p, err := url.Parse(s)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return pages, nil, fmt.Errorf("text sitemap line %d: %q is not an absolute http(s) URL", line, truncate(s, 100))
		}
		if len(pages) < MaxSitemapURLs {
			pages = append(pages, resolve(u, s))
		}
	}
	if err := sc.Err(); err != nil {
		return pages, nil, fmt.Errorf("text sitemap line %d: %w", line+1, err)
	}
	return pages, nil, nil
}

func resolve(base *url.URL, ref string) string {
	r, err := base.Parse(strings.TrimSpace(ref))
	if err != nil || (r.Scheme != "http" && r.Scheme != "https") {
		return ""
	}
	return r.String()
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
