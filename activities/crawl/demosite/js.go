package demosite

import (
	"fmt"
	"html"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// JSConfig describes a site whose pages need JavaScript (NewJS).
type JSConfig struct {
	Items int // item pages /js/item/K.html, K in [0, Items)
	// JSEvery: item K is written by script when K%JSEvery == 0, else it
	// is plain HTML; 1 (or less): every item needs JavaScript.
	JSEvery int
}

// DefaultJSConfig is 12 items, every one written by script.
func DefaultJSConfig() JSConfig { return JSConfig{Items: 12, JSEvery: 1} }

// JSSite is a site of pages that need JavaScript:
//
//	/js/               index: an empty <div id=app> a script fills with
//	                   links to every item (no link without JavaScript)
//	/js/item/K.html    <title>Item K</title>; <h1 class="title">Item K</h1>,
//	                   <span class="price"> and a link to the next item,
//	                   written by a script from /js/data/K.json into an
//	                   empty <div id=app> (a JS item), or in the HTML
//	/js/data/K.json    {"title": ..., "price": ...}
//	/js/never.html     a script that fetches /js/hang (which never
//	                   answers) again and again: the page never settles
//	/js/crash.html     a script that allocates until the tab's JavaScript
//	                   heap is exhausted: the tab crashes
//	/js/reach.html?to=HOST:PORT  a script that fetches
//	                   http://HOST:PORT/js/data/0.json and writes a link to
//	                   http://HOST:PORT/js/item/0.html
//	/js/more/K.html    item K written by script, with a button
//	                   "button.reviews" whose click fetches /js/data/K.json
//	                   and writes ReviewsPerItem <li class="review">
//	/js/feed.html      an infinite list: 10 <li class="entry">, 10 more
//	                   each time the window is scrolled to its bottom, up
//	                   to FeedEntries
//	/robots.txt        allows everything
type JSSite struct {
	cfg  JSConfig
	mu   sync.Mutex
	hits map[string]int
}

// NewJS returns the site of cfg.
func NewJS(cfg JSConfig) *JSSite {
	if cfg.JSEvery < 1 {
		cfg.JSEvery = 1
	}
	return &JSSite{cfg: cfg, hits: map[string]int{}}
}

// Config returns the site's configuration.
func (s *JSSite) Config() JSConfig { return s.cfg }

// NeedsJS reports whether item k is written by script.
func (s *JSSite) NeedsJS(k int) bool { return k%s.cfg.JSEvery == 0 }

// ItemTitle and ItemPrice are the fields of item k.
func ItemTitle(k int) string { return fmt.Sprintf("Item %d", k) }

// ItemPrice is the price of item k.
func ItemPrice(k int) string { return fmt.Sprintf("$%d.%02d", 3+k*7%90, k*13%100) }

// Items returns the paths of the item pages.
func (s *JSSite) Items() []string {
	out := make([]string, s.cfg.Items)
	for k := range out {
		out[k] = fmt.Sprintf("/js/item/%d.html", k)
	}
	return out
}

// Hits returns how many requests path had.
func (s *JSSite) Hits(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits[path]
}

const jsHead = "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>%s</title></head>\n<body>\n<div id=\"app\"></div>\n"

// ServeHTTP serves the site.
func (s *JSSite) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.hits[r.URL.Path]++
	s.mu.Unlock()
	p := r.URL.Path
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	switch {
	case p == "/robots.txt":
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprint(w, "User-agent: *\nDisallow:\n")
	case p == "/js/" || p == "/":
		fmt.Fprintf(w, jsHead, "JS shop")
		fmt.Fprintf(w, `<script>
const app = document.getElementById("app");
for (let k = 0; k < %d; k++) {
  const a = document.createElement("a"); a.href = "/js/item/" + k + ".html"; a.textContent = "item " + k;
  app.appendChild(a);
}
</script></body></html>`, s.cfg.Items)
	case p == "/js/never.html":
		fmt.Fprintf(w, jsHead, "Never settles")
		fmt.Fprint(w, `<script>function again() { fetch("/js/hang?" + Math.random()).finally(again); } again();</script></body></html>`)
	case p == "/js/hang":
		select { // answers when the client goes, or after a minute
		case <-r.Context().Done():
		case <-time.After(time.Minute):
		}
	case p == "/js/crash.html":
		fmt.Fprintf(w, jsHead, "Crashes")
		fmt.Fprint(w, `<script>const keep = []; for (;;) { keep.push(new Array(1 << 20).fill(Math.random())); }</script></body></html>`)
	case p == "/js/reach.html":
		to := r.URL.Query().Get("to")
		fmt.Fprintf(w, jsHead, "Reach")
		fmt.Fprintf(w, `<script>
const to = %s;
fetch("http://" + to + "/js/data/0.json").then(r => r.json()).then(d => { document.getElementById("app").dataset.fetched = d.title; }).catch(() => {});
const a = document.createElement("a"); a.href = "http://" + to + "/js/item/0.html"; a.textContent = "elsewhere";
document.getElementById("app").appendChild(a);
</script></body></html>`, strconv.Quote(to))
	case p == "/js/feed.html":
		fmt.Fprintf(w, jsHead, "Feed")
		fmt.Fprintf(w, `<ul id="feed"></ul><div style="height: 2000px"></div><script>
const feed = document.getElementById("feed");
function more() {
  for (let i = 0; i < 10 && feed.children.length < %d; i++) {
    const li = document.createElement("li"); li.className = "entry"; li.textContent = "entry " + feed.children.length;
    feed.appendChild(li);
  }
}
more();
let loading = false;
window.addEventListener("scroll", () => {
  if (loading || window.innerHeight + window.scrollY < document.documentElement.scrollHeight - 5) return;
  loading = true;
  fetch("/js/data/0.json").then(() => { more(); loading = false; });
});
</script></body></html>`, FeedEntries)
	case strings.HasPrefix(p, "/js/more/"):
		s.serveMore(w, r)
	default:
		s.serveItem(w, r)
	}
}

// ReviewsPerItem is how many reviews a click writes on /js/more/K.html;
// FeedEntries is the length of /js/feed.html's list, scrolled to its end.
const (
	ReviewsPerItem = 3
	FeedEntries    = 50
)

// ItemReview is the text of review j of item k.
func ItemReview(k, j int) string { return fmt.Sprintf("Review %d of item %d", j, k) }

// serveMore serves /js/more/K.html: item K written by script, and its
// reviews written once "button.reviews" is clicked.
func (s *JSSite) serveMore(w http.ResponseWriter, r *http.Request) {
	k := itemNumber(strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/js/more/"), ".html"), s.cfg.Items)
	if k < 0 {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	fmt.Fprintf(w, jsHead, html.EscapeString(ItemTitle(k)))
	fmt.Fprintf(w, `<ul id="reviews"></ul><script>
fetch("/js/data/%d.json").then(r => r.json()).then(d => {
  const app = document.getElementById("app");
  app.innerHTML = '<h1 class="title"></h1><p>Price: <span class="price"></span></p><button class="reviews">Reviews</button>';
  app.querySelector("h1.title").textContent = d.title;
  app.querySelector("span.price").textContent = d.price;
  app.querySelector("button.reviews").addEventListener("click", () => {
    fetch("/js/data/%d.json").then(r => r.json()).then(() => {
      for (let j = 0; j < %d; j++) {
        const li = document.createElement("li"); li.className = "review"; li.textContent = "Review " + j + " of item %d";
        document.getElementById("reviews").appendChild(li);
      }
    });
  });
});
</script></body></html>`, k, k, ReviewsPerItem, k)
}

// serveItem serves /js/item/K.html and /js/data/K.json.
func (s *JSSite) serveItem(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	var k int
	var isData bool
	switch {
	case strings.HasPrefix(p, "/js/item/") && strings.HasSuffix(p, ".html"):
		k = itemNumber(strings.TrimSuffix(strings.TrimPrefix(p, "/js/item/"), ".html"), s.cfg.Items)
	case strings.HasPrefix(p, "/js/data/") && strings.HasSuffix(p, ".json"):
		k, isData = itemNumber(strings.TrimSuffix(strings.TrimPrefix(p, "/js/data/"), ".json"), s.cfg.Items), true
	default:
		k = -1
	}
	if k < 0 {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	next := fmt.Sprintf("/js/item/%d.html", (k+1)%s.cfg.Items)
	if isData {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"title":%q,"price":%q,"next":%q}`, ItemTitle(k), ItemPrice(k), next)
		return
	}
	title := html.EscapeString(ItemTitle(k))
	if !s.NeedsJS(k) {
		fmt.Fprintf(w, "<!DOCTYPE html>\n<html><head><title>%s</title></head><body>\n<h1 class=\"title\">%s</h1><p>Price: <span class=\"price\">%s</span></p><a href=\"%s\">next</a>\n</body></html>\n",
			title, title, html.EscapeString(ItemPrice(k)), next)
		return
	}
	fmt.Fprintf(w, jsHead, title)
	fmt.Fprintf(w, `<script>
fetch("/js/data/%d.json").then(r => r.json()).then(d => {
  document.getElementById("app").innerHTML = '<h1 class="title"></h1><p>Price: <span class="price"></span></p><a>next</a>';
  document.querySelector("h1.title").textContent = d.title;
  document.querySelector("span.price").textContent = d.price;
  document.querySelector("#app a").href = d.next;
});
</script></body></html>`, k)
}

// itemNumber parses an item number in [0, n); -1 if it is none.
func itemNumber(s string, n int) int {
	k, err := strconv.Atoi(s)
	if err != nil || k < 0 || k >= n || strconv.Itoa(k) != s {
		return -1
	}
	return k
}
