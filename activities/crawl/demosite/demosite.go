// Package demosite is Baton's demo and test web site, served from the
// project itself: a deterministic shop of interlinked product pages with a
// robots.txt-disallowed section, broken links, an off-site link and a slow
// page, which knows exactly which paths a crawler should find.
//
// Layout (all paths are deterministic for a Config):
//
//	/                  index: links to /page/0..3.html, one off-site link
//	/page/N.html       N in [0, Pages): <title>, <h1 class="title">,
//	                   <span class="price">, links to pages 4N+4..4N+7 (so
//	                   every page is reachable from / within a few hops) and
//	                   a few random pages, in varied forms (absolute,
//	                   relative, "./", "../", with fragments, duplicated);
//	                   with CrossLinks, also a navigation bar and that many
//	                   pages all over the site;
//	                   some pages link to /private/K.html, /missing/K.html
//	                   (404) or /slow.html
//	/private/K.html    disallowed by /robots.txt; each links to the next one
//	                   and back to a page
//	/slow.html         answers after SlowPage
//	/robots.txt        User-agent: *, Disallow: /private/
//	/recrawl/…         with Recrawl, pages that answer 304, change with
//	                   the site's revision or disappear (recrawl.go)
//
// Every response is delayed by Latency.
package demosite

import (
	"context"
	"errors"
	"fmt"
	"html"
	"math/rand/v2"
	"net"
	"net/http"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Config describes a site.
type Config struct {
	Pages       int           // product pages /page/N.html
	Seed        int64         // seeds the link graph and the prices
	BrokenLinks int           // links to /missing/K.html (404), K in [0, BrokenLinks)
	SlowPage    time.Duration // /slow.html answers after this
	Latency     time.Duration // every response is delayed by this
	// CrossLinks makes the site as densely cross-linked as a real
	// documentation site: every product page also links to a navigation
	// bar of the same 8 pages and to CrossLinks pages all over the site
	// (related items). 0: the sparse shop above.
	CrossLinks int
	// Recrawl is the number of pages of the recrawl section (recrawl.go):
	// pages that answer 304 to their validators, change with the site's
	// revision, or disappear. 0: no such section.
	Recrawl int
}

// DefaultConfig is a 300-page site with 5 broken links, a 2 s slow page and
// no latency.
func DefaultConfig() Config {
	return Config{Pages: 300, Seed: 1, BrokenLinks: 5, SlowPage: 2 * time.Second}
}

// RobotsTxt is the site's /robots.txt.
const RobotsTxt = "User-agent: *\nDisallow: /private/\n"

// OffsiteURL is the off-site link of the index and of /page/0.html; it is
// never fetched by a crawler kept to the site's domain.
const OffsiteURL = "https://offsite.invalid/shop.html"

// Page is what a page of the site contains.
type Page struct {
	Path  string
	Title string   // <title>
	H1    string   // <h1 class="title">, empty if none
	Price string   // <span class="price">, empty if none
	Links []string // on-site paths it links to, deduplicated, in order
}

type link struct{ href, target string } // target: on-site path, "" if off-site

type page struct {
	Page
	hrefs []link
}

// Site is the demo site; it is an http.Handler, safe for concurrent use.
type Site struct {
	cfg     Config
	pages   map[string]*page
	private []string
	missing []string

	mu      sync.Mutex
	hits    map[string]int
	answers map[string]Answers // of the recrawl section, by path

	revision atomic.Int64 // of the recrawl section
}

// New builds the site of cfg.
func New(cfg Config) *Site {
	if cfg.Pages < 0 {
		cfg.Pages = 0
	}
	if cfg.BrokenLinks < 0 {
		cfg.BrokenLinks = 0
	}
	s := &Site{cfg: cfg, pages: map[string]*page{}, hits: map[string]int{}, answers: map[string]Answers{}}
	s.revision.Store(1)
	rng := rand.New(rand.NewPCG(uint64(cfg.Seed), 0x9e3779b97f4a7c15))
	n := cfg.Pages
	pagePath := func(i int) string { return fmt.Sprintf("/page/%d.html", i) }

	index := &page{Page: Page{Path: "/", Title: "Demo shop"}}
	for i := 0; i < min(4, n); i++ {
		index.add(pagePath(i), pagePath(i))
	}
	if n > 0 {
		index.add(pagePath(0)+"#top", pagePath(0)) // a duplicate, with a fragment
	}
	index.add(OffsiteURL, "")
	s.pages["/"] = index

	for i := 0; i < n; i++ {
		p := &page{Page: Page{
			Path:  pagePath(i),
			Title: fmt.Sprintf("Page %d", i),
			H1:    fmt.Sprintf("Product %d", i),
			Price: fmt.Sprintf("$%d.%02d", 5+rng.IntN(495), rng.IntN(100)),
		}}
		p.add("/", "/")
		for c := 4*i + 4; c < min(4*i+8, n); c++ {
			p.add(pagePath(c), pagePath(c))
		}
		for k := 0; k < 3; k++ {
			t := rng.IntN(n)
			var href string
			switch rng.IntN(5) {
			case 0:
				href = pagePath(t)
			case 1:
				href = fmt.Sprintf("%d.html", t)
			case 2:
				href = fmt.Sprintf("./%d.html#reviews", t)
			case 3:
				href = fmt.Sprintf("../page/%d.html", t)
			default:
				href = fmt.Sprintf("/page/../page/%d.html", t)
			}
			p.add(href, pagePath(t))
		}
		if cfg.CrossLinks > 0 {
			for k := 1; k <= 8; k++ {
				p.add(pagePath(k*n/9), pagePath(k*n/9))
			}
			xr := rand.New(rand.NewPCG(uint64(cfg.Seed)^uint64(i), 0x2545f4914f6cdd1d))
			for k := 0; k < cfg.CrossLinks; k++ {
				t := xr.IntN(n)
				p.add(pagePath(t), pagePath(t))
			}
		}
		if i == 0 {
			p.add(OffsiteURL, "")
		}
		s.pages[p.Path] = p
	}

	// The private section: a chain, entered from random pages.
	nPrivate := 0
	if n > 0 {
		nPrivate = max(2, n/60)
	}
	for k := 0; k < nPrivate; k++ {
		pp := fmt.Sprintf("/private/%d.html", k)
		s.private = append(s.private, pp)
		p := &page{Page: Page{Path: pp, Title: fmt.Sprintf("Private %d", k), H1: fmt.Sprintf("Private product %d", k), Price: "$0.00"}}
		if k+1 < nPrivate {
			p.add(fmt.Sprintf("%d.html", k+1), fmt.Sprintf("/private/%d.html", k+1))
		}
		back := rng.IntN(n)
		p.add(fmt.Sprintf("../page/%d.html", back), pagePath(back))
		s.pages[pp] = p
		if k < nPrivate-1 { // the last one is reachable only through the chain
			from := s.pages[pagePath(rng.IntN(n))]
			from.add(pp, pp)
		}
	}
	for k := 0; k < cfg.BrokenLinks && n > 0; k++ {
		mp := fmt.Sprintf("/missing/%d.html", k)
		s.missing = append(s.missing, mp)
		s.pages[pagePath(rng.IntN(n))].add(mp, mp)
	}
	slow := &page{Page: Page{Path: "/slow.html", Title: "Slow page", H1: "Slow product", Price: "$1.00"}}
	slow.add("/", "/")
	s.pages["/slow.html"] = slow
	from := index
	if n > 0 {
		from = s.pages[pagePath(rng.IntN(n))]
	}
	from.add("/slow.html", "/slow.html")
	return s
}

func (p *page) add(href, target string) {
	p.hrefs = append(p.hrefs, link{href: href, target: target})
	if target != "" && !slices.Contains(p.Links, target) {
		p.Links = append(p.Links, target)
	}
}

// Config returns the site's configuration.
func (s *Site) Config() Config { return s.cfg }

// Page returns what the page at path contains; ok is false for a path that
// answers 404.
func (s *Site) Page(path string) (Page, bool) {
	p, ok := s.pages[path]
	if !ok {
		return Page{}, false
	}
	out := p.Page
	out.Links = slices.Clone(p.Links)
	return out, true
}

// Reachable returns, sorted, the exact set of paths a crawler finds from "/"
// by following the site's links (off-site links excluded): every page and
// every broken link (/missing/..., which answers 404) it reaches. With
// followRobots, the paths robots.txt disallows are neither fetched nor
// followed, so they and what only they link to are excluded.
func (s *Site) Reachable(followRobots bool) []string {
	seen := map[string]bool{"/": true}
	queue := []string{"/"}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		p := s.pages[cur]
		if p == nil {
			continue
		}
		for _, t := range p.Links {
			if seen[t] || (followRobots && isDisallowed(t)) {
				continue
			}
			seen[t] = true
			queue = append(queue, t)
		}
	}
	out := make([]string, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// Disallowed returns, sorted, the paths of the robots.txt-disallowed
// section (/private/...).
func (s *Site) Disallowed() []string {
	out := slices.Clone(s.private)
	sort.Strings(out)
	return out
}

// Missing returns, sorted, the paths of the broken links (404).
func (s *Site) Missing() []string {
	out := slices.Clone(s.missing)
	sort.Strings(out)
	return out
}

func isDisallowed(p string) bool { return strings.HasPrefix(p, "/private/") }

// Hits returns how many times path was requested (any method, any status).
func (s *Site) Hits(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits[path]
}

// AllHits returns a copy of the request count of every path requested.
func (s *Site) AllHits() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.hits))
	for k, v := range s.hits {
		out[k] = v
	}
	return out
}

// ResetHits forgets the request counts.
func (s *Site) ResetHits() {
	s.mu.Lock()
	s.hits = map[string]int{}
	s.answers = map[string]Answers{}
	s.mu.Unlock()
}

// ServeHTTP serves the site.
func (s *Site) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.hits[r.URL.Path]++
	s.mu.Unlock()
	if !sleep(r.Context(), s.cfg.Latency) {
		return
	}
	if s.cfg.Recrawl > 0 && strings.HasPrefix(r.URL.Path, RecrawlPrefix) {
		s.serveRecrawl(w, r) // it takes POST .../revision too
		return
	}
	if !admit(w, r, 0) {
		return
	}
	if r.URL.Path == "/robots.txt" {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprint(w, RobotsTxt)
		return
	}
	p := s.pages[r.URL.Path]
	if p == nil {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintf(w, "<!DOCTYPE html><html><head><title>Not found</title></head><body><h1>Not found</h1><p>%s</p><a href=\"/\">Home</a></body></html>\n", html.EscapeString(r.URL.Path))
		return
	}
	if p.Path == "/slow.html" && !sleep(r.Context(), s.cfg.SlowPage) {
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	fmt.Fprint(w, render(p))
}

func render(p *page) string {
	var b strings.Builder
	fmt.Fprintf(&b, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>%s</title></head>\n<body>\n", html.EscapeString(p.Title))
	if p.H1 != "" {
		fmt.Fprintf(&b, "<h1 class=\"title\">%s</h1>\n", html.EscapeString(p.H1))
	}
	if p.Price != "" {
		fmt.Fprintf(&b, "<p>Price: <span class=\"price\">%s</span></p>\n", html.EscapeString(p.Price))
	}
	b.WriteString("<ul class=\"links\">\n")
	for _, l := range p.hrefs {
		text := l.target
		if text == "" {
			text = "elsewhere"
		}
		fmt.Fprintf(&b, "  <li><a href=\"%s\">%s</a></li>\n", html.EscapeString(l.href), html.EscapeString(path.Base(text)))
	}
	b.WriteString("</ul>\n</body></html>\n")
	return b.String()
}

// sleep waits d unless ctx ends first; it reports whether d passed.
// admit waits out the site's latency and answers 405 to a method other
// than GET and HEAD; false: the request is answered (or gone).
func admit(w http.ResponseWriter, r *http.Request, latency time.Duration) bool {
	if !sleep(r.Context(), latency) {
		return false
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return false
	}
	return true
}

func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// ListenAndServe serves the site of cfg on addr until ctx ends.
func ListenAndServe(ctx context.Context, addr string, cfg Config) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return Serve(ctx, ln, New(cfg))
}

// Serve serves site on ln until ctx ends, then shuts down gracefully (at
// most 5 s) and closes ln.
func Serve(ctx context.Context, ln net.Listener, site http.Handler) error {
	srv := &http.Server{Handler: site, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := srv.Shutdown(sctx)
	if err != nil {
		srv.Close() // handlers still running after the grace period
	}
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}
