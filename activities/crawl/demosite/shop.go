// Shop is the demo's paginated shop, for crawler examples and end-to-end
// tests of handlers keyed by request label (listing, product): category
// listings paginated by a relative "next" link, and product pages whose
// price is found only in a JSON-LD script, in European formatting.
//
// Layout (all paths are deterministic for a ShopConfig):
//
//	/shop/                    the categories: <a class="category"
//	                          href="/shop/c/<slug>/">, Categories of them
//	/shop/c/<slug>/           a category's listing, page 1; ?page=N for
//	/shop/c/<slug>/?page=N    page N (2 ≤ N ≤ last; ?page=1 answers page 1
//	                          but is never linked): PerPage product cards
//	                          <div class="product"><a class="product-link"
//	                          href="/shop/p/<id>-<slug>.html">name</a></div>
//	                          in ID order, and on every page but the last
//	                          <a class="next" rel="next" href="?page=N+1">
//	                          (relative); a link back to /shop/
//	/shop/p/<id>-<slug>.html  a product: <h1 class="name">, <span
//	                          class="sku">, <span class="stock"> ("in
//	                          stock" or "out of stock": every 7th ID is
//	                          out), the price only in
//	                          <script type="application/ld+json">
//	                          {"@type":"Product","sku":…,"offers":
//	                          {"price":"1 234,50","priceCurrency":"EUR"}}
//	                          (space between thousands, comma before the
//	                          cents), links to /shop/, to its category's
//	                          first listing page and to 2 related products
//	                          (<a class="related-link">, one relative, one
//	                          absolute)
//	/robots.txt               ShopRobotsTxt: everything allowed
//
// Anything else answers 404. Every response is delayed by Latency, or
// abandoned when the request's context ends first.
package demosite

import (
	"encoding/json"
	"fmt"
	"html"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ShopConfig describes a shop.
type ShopConfig struct {
	Products   int           // products, IDs 1..Products
	PerPage    int           // product cards per listing page; < 1: 10
	Seed       int64         // seeds the names, prices, categories and related links
	Latency    time.Duration // every response is delayed by this
	Categories int           // categories; < 1: 3
}

// DefaultShopConfig is a shop of 120 products in 3 categories, 10 per
// listing page, without latency.
func DefaultShopConfig() ShopConfig {
	return ShopConfig{Products: 120, PerPage: 10, Seed: 1, Categories: 3}
}

// ShopRobotsTxt is the shop's /robots.txt: everything is allowed.
const ShopRobotsTxt = "User-agent: *\nDisallow:\n"

// ShopProduct is a product of the shop, as its page shows it.
type ShopProduct struct {
	ID         int
	Slug       string
	Name       string   // <h1 class="name">
	SKU        string   // <span class="sku">, "SKU-%05d" of ID
	Category   string   // the slug of its category
	PriceCents int64    // the JSON-LD offers.price, in euro cents
	InStock    bool     // false: <span class="stock">out of stock</span>
	Path       string   // /shop/p/<id>-<slug>.html
	Related    []string // paths of the 2 related products it links to
}

// ShopCategory is a category of the shop.
type ShopCategory struct {
	Slug     string
	Name     string
	Path     string // its first listing page, /shop/c/<slug>/
	Pages    int    // listing pages, at least 1
	Products []int  // IDs of its products, in listing order
}

// Shop is the demo shop; it is an http.Handler, safe for concurrent use.
type Shop struct {
	cfg      ShopConfig
	products []ShopProduct // index ID-1
	cats     []ShopCategory
	byPath   map[string]int // product path → index
	catSlug  map[string]int // category slug → index
	hits     hitCounter
}

var (
	categoryNames = []string{"Kitchen", "Garden", "Books", "Toys", "Lighting", "Office", "Outdoor", "Music"}
	adjectives    = []string{"Sturdy", "Compact", "Classic", "Deluxe", "Rustic", "Smart", "Vintage", "Modern", "Portable", "Ergonomic", "Handmade", "Premium"}
	nouns         = []string{"Kettle", "Lamp", "Chair", "Backpack", "Notebook", "Teapot", "Blender", "Planter", "Headphones", "Clock", "Mug", "Toolbox"}
)

// NewShop builds the shop of cfg.
func NewShop(cfg ShopConfig) *Shop {
	cfg.Products = max(cfg.Products, 0)
	if cfg.PerPage < 1 {
		cfg.PerPage = 10
	}
	if cfg.Categories < 1 {
		cfg.Categories = 3
	}
	s := &Shop{cfg: cfg, byPath: map[string]int{}, catSlug: map[string]int{}, hits: hitCounter{m: map[string]int{}}}
	for i := 0; i < cfg.Categories; i++ {
		name := categoryNames[i%len(categoryNames)]
		if i >= len(categoryNames) {
			name += " " + strconv.Itoa(i/len(categoryNames)+1)
		}
		c := ShopCategory{Slug: slugify(name), Name: name}
		c.Path = "/shop/c/" + c.Slug + "/"
		s.catSlug[c.Slug] = i
		s.cats = append(s.cats, c)
	}
	rng := rand.New(rand.NewPCG(uint64(cfg.Seed), 0x5bd1e9955bd1e995))
	for id := 1; id <= cfg.Products; id++ {
		name := adjectives[rng.IntN(len(adjectives))] + " " + nouns[rng.IntN(len(nouns))]
		cents := int64(199 + rng.IntN(99_800)) // 1,99 to 999,99
		if rng.IntN(3) == 0 {
			cents = int64(100_000 + rng.IntN(1_900_000)) // 1 000,00 to 19 999,99
		}
		ci := rng.IntN(cfg.Categories)
		p := ShopProduct{
			ID: id, Slug: slugify(name), Name: name, SKU: fmt.Sprintf("SKU-%05d", id),
			Category: s.cats[ci].Slug, PriceCents: cents, InStock: id%7 != 0,
		}
		p.Path = fmt.Sprintf("/shop/p/%d-%s.html", id, p.Slug)
		s.byPath[p.Path] = id - 1
		s.cats[ci].Products = append(s.cats[ci].Products, id)
		s.products = append(s.products, p)
	}
	for i := range s.products { // related: 2 other products, anywhere
		for len(s.products[i].Related) < min(2, cfg.Products-1) {
			r := s.products[rng.IntN(cfg.Products)].Path
			if r != s.products[i].Path && !slices.Contains(s.products[i].Related, r) {
				s.products[i].Related = append(s.products[i].Related, r)
			}
		}
	}
	for i := range s.cats {
		s.cats[i].Pages = max(1, (len(s.cats[i].Products)+cfg.PerPage-1)/cfg.PerPage)
	}
	return s
}

// slugify lower-cases name and turns every run of other characters than
// letters and digits into one "-".
func slugify(name string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(name) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			b.WriteRune(r)
			dash = false
		} else {
			dash = true
		}
	}
	return b.String()
}

// FormatEuro formats cents as the shop's JSON-LD price: a space between
// thousands and a comma before the cents, 123456 → "1 234,56".
func FormatEuro(cents int64) string {
	sign := ""
	if cents < 0 {
		sign, cents = "-", -cents
	}
	e := strconv.FormatInt(cents/100, 10)
	var b strings.Builder
	for i, r := range e {
		if i > 0 && (len(e)-i)%3 == 0 {
			b.WriteByte(' ')
		}
		b.WriteRune(r)
	}
	return fmt.Sprintf("%s%s,%02d", sign, b.String(), cents%100)
}

// Config returns the shop's configuration, defaults applied.
func (s *Shop) Config() ShopConfig { return s.cfg }

// Products returns the shop's products, in ID order.
func (s *Shop) Products() []ShopProduct {
	out := slices.Clone(s.products)
	for i := range out {
		out[i].Related = slices.Clone(out[i].Related)
	}
	return out
}

// Categories returns the shop's categories, in the order /shop/ lists them.
func (s *Shop) Categories() []ShopCategory {
	out := slices.Clone(s.cats)
	for i := range out {
		out[i].Products = slices.Clone(out[i].Products)
	}
	return out
}

// ListingPaths returns the path (with its query) of every listing page a
// crawler finds by following the "next" links, by category then page:
// /shop/c/<slug>/, /shop/c/<slug>/?page=2, …
func (s *Shop) ListingPaths() []string {
	var out []string
	for _, c := range s.cats {
		for n := 1; n <= c.Pages; n++ {
			out = append(out, listingPath(c, n))
		}
	}
	return out
}

func listingPath(c ShopCategory, n int) string {
	if n == 1 {
		return c.Path
	}
	return c.Path + "?page=" + strconv.Itoa(n)
}

// Hits returns how many times path was requested (any method, any status);
// path includes the query string exactly as requested, so
// "/shop/c/kitchen/?page=2" and "/shop/c/kitchen/" count apart.
func (s *Shop) Hits(path string) int { return s.hits.get(path) }

// AllHits returns a copy of the request count of every path (with its
// query) requested.
func (s *Shop) AllHits() map[string]int { return s.hits.all() }

// ResetHits forgets the request counts.
func (s *Shop) ResetHits() { s.hits.reset() }

// ServeHTTP serves the shop; paths outside /shop/ and /robots.txt answer
// 404.
func (s *Shop) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.hits.add(r)
	if !admit(w, r, s.cfg.Latency) {
		return
	}
	p := r.URL.Path
	var body string
	switch {
	case p == "/robots.txt":
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprint(w, ShopRobotsTxt)
		return
	case p == "/shop/":
		body = s.renderHome()
	case strings.HasPrefix(p, "/shop/c/"):
		rest := strings.TrimPrefix(p, "/shop/c/")
		slug, tail, _ := strings.Cut(rest, "/")
		ci, ok := s.catSlug[slug]
		if !ok || tail != "" || rest != slug+"/" {
			break
		}
		n := 1
		if v := r.URL.Query(); v.Has("page") {
			var err error
			if n, err = strconv.Atoi(v.Get("page")); err != nil || n < 1 || n > s.cats[ci].Pages {
				break
			}
		}
		body = s.renderListing(s.cats[ci], n)
	case strings.HasPrefix(p, "/shop/p/"):
		if i, ok := s.byPath[p]; ok {
			body = s.renderProduct(s.products[i])
		}
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if body == "" {
		w.WriteHeader(http.StatusNotFound)
		body = htmlPage("Not found", "<h1>Not found</h1>\n<p>"+html.EscapeString(p)+"</p>\n<a href=\"/shop/\">Shop</a>\n", "")
	}
	fmt.Fprint(w, body)
}

func htmlPage(title, body, head string) string {
	return "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>" + html.EscapeString(title) + "</title>" + head +
		"</head>\n<body>\n" + body + "</body></html>\n"
}

func (s *Shop) renderHome() string {
	var b strings.Builder
	b.WriteString("<h1>Baton demo shop</h1>\n<ul class=\"categories\">\n")
	for _, c := range s.cats {
		fmt.Fprintf(&b, "  <li><a class=\"category\" href=\"%s\">%s</a></li>\n", c.Path, html.EscapeString(c.Name))
	}
	b.WriteString("</ul>\n")
	return htmlPage("Baton demo shop", b.String(), "")
}

func (s *Shop) renderListing(c ShopCategory, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "<nav class=\"breadcrumb\"><a href=\"/shop/\">All categories</a></nav>\n<h1 class=\"category\">%s</h1>\n<div class=\"products\">\n", html.EscapeString(c.Name))
	per := s.cfg.PerPage
	for _, id := range c.Products[min((n-1)*per, len(c.Products)):min(n*per, len(c.Products))] {
		p := s.products[id-1]
		fmt.Fprintf(&b, "<div class=\"product\"><a class=\"product-link\" href=\"%s\">%s</a></div>\n", p.Path, html.EscapeString(p.Name))
	}
	fmt.Fprintf(&b, "</div>\n<nav class=\"pagination\"><span class=\"page\">Page %d of %d</span>", n, c.Pages)
	if n < c.Pages {
		fmt.Fprintf(&b, " <a class=\"next\" rel=\"next\" href=\"?page=%d\">Next</a>", n+1)
	}
	b.WriteString("</nav>\n")
	return htmlPage(fmt.Sprintf("%s – page %d of %d", c.Name, n, c.Pages), b.String(), "")
}

func (s *Shop) renderProduct(p ShopProduct) string {
	avail, stock := "https://schema.org/InStock", "in stock"
	if !p.InStock {
		avail, stock = "https://schema.org/OutOfStock", "out of stock"
	}
	type offer struct {
		Type          string `json:"@type"`
		Price         string `json:"price"`
		PriceCurrency string `json:"priceCurrency"`
		Availability  string `json:"availability"`
	}
	ld, _ := json.Marshal(struct {
		Context string `json:"@context"`
		Type    string `json:"@type"`
		Name    string `json:"name"`
		SKU     string `json:"sku"`
		Offers  offer  `json:"offers"`
	}{"https://schema.org", "Product", p.Name, p.SKU, offer{"Offer", FormatEuro(p.PriceCents), "EUR", avail}})
	c := s.cats[s.catSlug[p.Category]]
	var b strings.Builder
	fmt.Fprintf(&b, "<nav class=\"breadcrumb\"><a href=\"/shop/\">All categories</a> › <a class=\"category\" href=\"%s\">%s</a></nav>\n", c.Path, html.EscapeString(c.Name))
	fmt.Fprintf(&b, "<h1 class=\"name\">%s</h1>\n<p>SKU: <span class=\"sku\">%s</span></p>\n<p><span class=\"stock\">%s</span></p>\n", html.EscapeString(p.Name), p.SKU, stock)
	b.WriteString("<h2>Related products</h2>\n<ul class=\"related\">\n")
	for k, r := range p.Related {
		href := r
		if k == 0 {
			href = strings.TrimPrefix(r, "/shop/p/") // relative to /shop/p/
		}
		fmt.Fprintf(&b, "  <li><a class=\"related-link\" href=\"%s\">%s</a></li>\n", href, html.EscapeString(s.products[s.byPath[r]].Name))
	}
	b.WriteString("</ul>\n")
	return htmlPage(p.Name+" – Baton demo shop", b.String(), "\n<script type=\"application/ld+json\">"+string(ld)+"</script>")
}

// Combine serves site, shop and api on one server: /shop/... to shop,
// /api/... to api, everything else (/robots.txt included) to site. A nil
// member's paths answer 404, except that /robots.txt goes to shop when site
// is nil.
func Combine(site *Site, shop *Shop, api *API) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var h http.Handler // assigned only non-nil pointers: no typed nil
		switch p := r.URL.Path; {
		case strings.HasPrefix(p, "/shop/"):
			if shop != nil {
				h = shop
			}
		case strings.HasPrefix(p, "/api/"):
			if api != nil {
				h = api
			}
		case site != nil:
			h = site
		case p == "/robots.txt" && shop != nil:
			h = shop
		}
		if h == nil {
			http.NotFound(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
}
