package demosite

import (
	"fmt"
	"html"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The recrawl section (Config.Recrawl pages), for crawling the site again:
//
//	/recrawl/          index: links to /recrawl/p/0.html and, at revision
//	                   1 only, to the gone pages
//	/recrawl/p/K.html  K in [0, Recrawl): a title, a price and links to
//	                   pages 2K+1 and 2K+2 (a tree: most pages are reached
//	                   through one page only). Every tenth page (K % 10 ==
//	                   0) changes its price, ETag and Last-Modified with
//	                   the site's revision; the others never change. Pages
//	                   with K % 3 == 1 send Last-Modified only, the others
//	                   an ETag and Last-Modified. A request whose
//	                   If-None-Match holds the page's ETag, or (without
//	                   If-None-Match) whose If-Modified-Since is not before
//	                   its Last-Modified, is answered 304 with no body.
//	/recrawl/gone/K.html  K in [0, RecrawlGone): served at revision 1 only,
//	                   404 after
//	POST /recrawl/revision  moves the site to its next revision (also
//	                   SetRevision); GET says the revision
//
// The site counts its answers in the section, full (200) and 304, by path
// (Answers).

// RecrawlPrefix is the path of the recrawl section.
const RecrawlPrefix = "/recrawl/"

// RecrawlGone is the number of pages of the recrawl section that
// disappear after revision 1.
const RecrawlGone = 2

// recrawlEpoch is the Last-Modified of the pages that never change.
var recrawlEpoch = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

// Answers counts the answers to a path of the recrawl section.
type Answers struct {
	Full        int // 200 with a body
	NotModified int // 304
}

// SetRevision moves the recrawl section to revision n (at least 1).
func (s *Site) SetRevision(n int) { s.revision.Store(int64(max(n, 1))) }

// Revision is the recrawl section's revision.
func (s *Site) Revision() int { return int(s.revision.Load()) }

// Answers returns the answers to the recrawl section's paths since the
// site started or ResetHits.
func (s *Site) Answers() map[string]Answers {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]Answers, len(s.answers))
	for k, v := range s.answers {
		out[k] = v
	}
	return out
}

// RecrawlPages returns the paths of the recrawl section a crawl from
// /recrawl/ finds at revision rev, and those of them whose title or price
// changed since revision 1 (rev > 1; the index's links change too, not
// its content).
func (s *Site) RecrawlPages(rev int) (pages, changed []string) {
	pages = []string{RecrawlPrefix}
	for k := 0; k < s.cfg.Recrawl; k++ {
		pages = append(pages, recrawlPath(k))
		if rev > 1 && recrawlChanges(k) {
			changed = append(changed, recrawlPath(k))
		}
	}
	if rev == 1 {
		for k := 0; k < RecrawlGone; k++ {
			pages = append(pages, fmt.Sprintf("%sgone/%d.html", RecrawlPrefix, k))
		}
	}
	return pages, changed
}

// RecrawlPrice is the price page K of the recrawl section shows at
// revision rev.
func RecrawlPrice(k, rev int) string {
	if !recrawlChanges(k) {
		rev = 1
	}
	return fmt.Sprintf("$%d.%02d", 10+k%90, rev%100)
}

func recrawlPath(k int) string  { return fmt.Sprintf("%sp/%d.html", RecrawlPrefix, k) }
func recrawlChanges(k int) bool { return k%10 == 0 }
func (s *Site) count(path string, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.answers[path]
	if status == http.StatusNotModified {
		a.NotModified++
	} else if status == http.StatusOK {
		a.Full++
	}
	s.answers[path] = a
}

// serveRecrawl serves the recrawl section.
func (s *Site) serveRecrawl(w http.ResponseWriter, r *http.Request) {
	rev := s.Revision()
	p := strings.TrimPrefix(r.URL.Path, RecrawlPrefix)
	if r.Method != http.MethodGet && r.Method != http.MethodHead && (r.Method != http.MethodPost || p != "revision") {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	switch {
	case p == "revision":
		if r.Method == http.MethodPost {
			s.revision.Add(1)
		}
		fmt.Fprintf(w, "%d\n", s.Revision())
	case p == "":
		links := []string{recrawlPath(0)}
		if rev == 1 {
			for k := 0; k < RecrawlGone; k++ {
				links = append(links, fmt.Sprintf("%sgone/%d.html", RecrawlPrefix, k))
			}
		}
		s.serveVersioned(w, r, "Recrawl", "", links, fmt.Sprintf(`"index-%d"`, min(rev, 2)), recrawlEpoch.Add(time.Duration(min(rev, 2))*time.Hour))
	case strings.HasPrefix(p, "gone/") && rev == 1:
		s.serveVersioned(w, r, "Gone "+p, "$1.00", nil, "", time.Time{})
	case strings.HasPrefix(p, "p/") && strings.HasSuffix(p, ".html"):
		k, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(p, "p/"), ".html"))
		if err != nil || k < 0 || k >= s.cfg.Recrawl || strconv.Itoa(k) != strings.TrimSuffix(strings.TrimPrefix(p, "p/"), ".html") {
			http.NotFound(w, r)
			return
		}
		var links []string
		for _, c := range []int{2*k + 1, 2*k + 2} {
			if c < s.cfg.Recrawl {
				links = append(links, recrawlPath(c))
			}
		}
		v, modified := 1, recrawlEpoch
		if recrawlChanges(k) {
			v, modified = rev, recrawlEpoch.Add(time.Duration(rev)*time.Hour)
		}
		etag := fmt.Sprintf(`"p%d-%d"`, k, v)
		if k%3 == 1 {
			etag = ""
		}
		s.serveVersioned(w, r, fmt.Sprintf("Recrawl %d", k), RecrawlPrice(k, rev), links, etag, modified)
	default:
		http.NotFound(w, r)
	}
}

// serveVersioned answers a page of the recrawl section: 304 when the
// request's validators match etag (or, without If-None-Match, when
// If-Modified-Since is not before modified), else the page.
func (s *Site) serveVersioned(w http.ResponseWriter, r *http.Request, title, price string, links []string, etag string, modified time.Time) {
	if etag != "" {
		w.Header().Set("ETag", etag)
	}
	if !modified.IsZero() {
		w.Header().Set("Last-Modified", modified.Format(http.TimeFormat))
	}
	if notModified(r, etag, modified) {
		s.count(r.URL.Path, http.StatusNotModified)
		w.WriteHeader(http.StatusNotModified)
		return
	}
	s.count(r.URL.Path, http.StatusOK)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	var b strings.Builder
	fmt.Fprintf(&b, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>%s</title></head>\n<body>\n", html.EscapeString(title))
	if price != "" {
		fmt.Fprintf(&b, "<span class=\"price\">%s</span>\n", price)
	}
	for _, l := range links {
		fmt.Fprintf(&b, "<a href=\"%s\">%s</a>\n", l, l)
	}
	// What changes on every answer without changing the page: an
	// extracted-content hash ignores it, a raw body hash does not.
	fmt.Fprintf(&b, "<!-- served %d -->\n</body></html>\n", time.Now().UnixNano())
	fmt.Fprint(w, b.String())
}

// notModified reports whether r's validators match (RFC 9110, 13.2.2:
// If-None-Match first, If-Modified-Since only without it).
func notModified(r *http.Request, etag string, modified time.Time) bool {
	if inm := r.Header.Get("If-None-Match"); inm != "" {
		return etag != "" && strings.TrimPrefix(inm, "W/") == etag
	}
	ims, err := http.ParseTime(r.Header.Get("If-Modified-Since"))
	return err == nil && !modified.IsZero() && !ims.Before(modified)
}
