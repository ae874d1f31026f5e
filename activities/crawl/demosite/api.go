// API is the demo's JSON API, for crawler examples and end-to-end tests of
// JSON handlers: a list of items paginated by opaque "next" cursors, and a
// detail document per item.
//
// Layout (all documents are deterministic for an APIConfig; every answer
// is Content-Type application/json):
//
//	GET /api/items                the first page:
//	                              {"items":[{"id":1,"name":…,
//	                              "price_cents":…,"tags":[…],
//	                              "url":"/api/items/1"},…],
//	                              "next":"/api/items?cursor=<opaque>"}
//	                              with PerPage items in ID order; "next" is
//	                              absent on the last page
//	GET /api/items?cursor=C       the page C designates; a cursor the API
//	                              did not hand out (undecodable, wrong
//	                              checksum, out of range, empty) answers 400
//	                              {"error":"bad cursor"}
//	GET /api/items/<id>           the item's detail: the list fields and a
//	                              "description"; an unknown id answers 404
//
// Anything else answers 404 {"error":"not found"}; methods other than GET
// and HEAD answer 405. Every response is delayed by Latency, or abandoned
// when the request's context ends first.
package demosite

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// APIConfig describes an API.
type APIConfig struct {
	Items   int           // items, IDs 1..Items
	PerPage int           // items per list page; < 1: 20
	Seed    int64         // seeds the names, prices, tags and cursors' checksums
	Latency time.Duration // every response is delayed by this
}

// DefaultAPIConfig is an API of 95 items, 20 per page (the last page holds
// 15), without latency.
func DefaultAPIConfig() APIConfig {
	return APIConfig{Items: 95, PerPage: 20, Seed: 1}
}

// APIItem is an item of the API; its JSON form is the item's detail
// document, and without Description an entry of the list.
type APIItem struct {
	ID          int      `json:"id"`
	Name        string   `json:"name"`
	PriceCents  int64    `json:"price_cents"`
	Tags        []string `json:"tags"`
	Description string   `json:"description,omitempty"` // in the detail only
	Path        string   `json:"url"`                   // /api/items/<id>
}

// API is the demo JSON API; it is an http.Handler, safe for concurrent use.
type API struct {
	cfg   APIConfig
	items []APIItem // index ID-1
	hits  hitCounter
}

var apiTags = []string{"new", "sale", "eco", "bestseller", "gift", "limited", "refurbished", "handmade"}

// NewAPI builds the API of cfg.
func NewAPI(cfg APIConfig) *API {
	cfg.Items = max(cfg.Items, 0)
	if cfg.PerPage < 1 {
		cfg.PerPage = 20
	}
	a := &API{cfg: cfg, hits: hitCounter{m: map[string]int{}}}
	rng := rand.New(rand.NewPCG(uint64(cfg.Seed), 0x94d049bb133111eb))
	for id := 1; id <= cfg.Items; id++ {
		adj, noun := adjectives[rng.IntN(len(adjectives))], nouns[rng.IntN(len(nouns))]
		it := APIItem{
			ID:         id,
			Name:       adj + " " + noun,
			PriceCents: int64(99 + rng.IntN(50_000)),
			Tags:       []string{},
			Path:       "/api/items/" + strconv.Itoa(id),
		}
		for _, t := range rng.Perm(len(apiTags))[:1+rng.IntN(3)] {
			it.Tags = append(it.Tags, apiTags[t])
		}
		it.Description = fmt.Sprintf("The %s %s, item %d of the Baton demo API, tagged %s.",
			strings.ToLower(adj), strings.ToLower(noun), id, strings.Join(it.Tags, ", "))
		a.items = append(a.items, it)
	}
	return a
}

// Config returns the API's configuration, defaults applied.
func (a *API) Config() APIConfig { return a.cfg }

// Items returns the API's items, in ID order.
func (a *API) Items() []APIItem {
	out := slices.Clone(a.items)
	for i := range out {
		out[i].Tags = slices.Clone(out[i].Tags)
	}
	return out
}

// ListingPaths returns the path (with its query) of every list page, in the
// order the "next" cursors chain them: /api/items, /api/items?cursor=…, …
func (a *API) ListingPaths() []string {
	out := []string{"/api/items"}
	for off := a.cfg.PerPage; off < a.cfg.Items; off += a.cfg.PerPage {
		out = append(out, "/api/items?cursor="+a.cursor(off))
	}
	return out
}

// Hits returns how many times path was requested (any method, any status);
// path includes the query string exactly as requested.
func (a *API) Hits(path string) int { return a.hits.get(path) }

// AllHits returns a copy of the request count of every path (with its
// query) requested.
func (a *API) AllHits() map[string]int { return a.hits.all() }

// ResetHits forgets the request counts.
func (a *API) ResetHits() { a.hits.reset() }

// cursor is the opaque cursor of the list page starting at item offset off:
// base64url of off and a checksum of off and the seed, 4 bytes each.
func (a *API) cursor(off int) string {
	var b [8]byte
	binary.BigEndian.PutUint32(b[:4], uint32(off))
	binary.BigEndian.PutUint32(b[4:], a.checksum(uint32(off)))
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func (a *API) checksum(off uint32) uint32 {
	var b [12]byte
	binary.BigEndian.PutUint32(b[:4], off)
	binary.BigEndian.PutUint64(b[4:], uint64(a.cfg.Seed))
	return crc32.ChecksumIEEE(b[:])
}

// parseCursor returns the offset of cursor c; ok is false for a cursor the
// API did not hand out.
func (a *API) parseCursor(c string) (off int, ok bool) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || len(b) != 8 {
		return 0, false
	}
	o := binary.BigEndian.Uint32(b[:4])
	if binary.BigEndian.Uint32(b[4:]) != a.checksum(o) || int64(o) >= int64(a.cfg.Items) {
		return 0, false
	}
	return int(o), true
}

// ServeHTTP serves the API; paths outside /api/ answer 404.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.hits.add(r)
	if !sleep(r.Context(), a.cfg.Latency) {
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeJSON(w, http.StatusMethodNotAllowed, apiError{"method not allowed"})
		return
	}
	p := r.URL.Path
	switch {
	case p == "/api/items":
		off := 0
		if q := r.URL.Query(); q.Has("cursor") {
			var ok bool
			if off, ok = a.parseCursor(q.Get("cursor")); !ok {
				writeJSON(w, http.StatusBadRequest, apiError{"bad cursor"})
				return
			}
		}
		page := struct {
			Items []APIItem `json:"items"`
			Next  string    `json:"next,omitempty"`
		}{Items: []APIItem{}}
		for _, it := range a.items[off:min(off+a.cfg.PerPage, len(a.items))] {
			it.Description = ""
			page.Items = append(page.Items, it)
		}
		if next := off + a.cfg.PerPage; next < len(a.items) {
			page.Next = "/api/items?cursor=" + a.cursor(next)
		}
		writeJSON(w, http.StatusOK, page)
		return
	case strings.HasPrefix(p, "/api/items/"):
		s := strings.TrimPrefix(p, "/api/items/")
		if id, err := strconv.Atoi(s); err == nil && strconv.Itoa(id) == s && id >= 1 && id <= len(a.items) {
			writeJSON(w, http.StatusOK, a.items[id-1])
			return
		}
	}
	writeJSON(w, http.StatusNotFound, apiError{"not found"})
}

// apiError is the API's error document.
type apiError struct {
	Error string `json:"error"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"internal error"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// hitCounter counts requests by path and query string.
type hitCounter struct {
	mu sync.Mutex
	m  map[string]int
}

// hitKey is r's path with its query string, as requested.
func hitKey(r *http.Request) string {
	if r.URL.RawQuery != "" || r.URL.ForceQuery {
		return r.URL.Path + "?" + r.URL.RawQuery
	}
	return r.URL.Path
}

func (h *hitCounter) add(r *http.Request) {
	h.mu.Lock()
	h.m[hitKey(r)]++
	h.mu.Unlock()
}

func (h *hitCounter) get(path string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.m[path]
}

func (h *hitCounter) all() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]int, len(h.m))
	for k, v := range h.m {
		out[k] = v
	}
	return out
}

func (h *hitCounter) reset() {
	h.mu.Lock()
	h.m = map[string]int{}
	h.mu.Unlock()
}
