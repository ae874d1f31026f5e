package demosite

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"
)

// shopPage is what walkShop scraped from one page.
type shopPage struct {
	links                     []string // on-site path?query, fragment dropped
	name, sku, stock, ldJSON  string
	nextHref, categoryHeading string
}

// scrapeShop fetches u and extracts its links and the fields a crawler's
// handlers would: text of h1.name, span.sku, span.stock, the JSON-LD script
// and a.next's href.
func scrapeShop(t *testing.T, u *url.URL) shopPage {
	t.Helper()
	resp, err := http.Get(u.String())
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, u.String())
	var pg shopPage
	var field *string // the field the next text token fills
	z := html.NewTokenizer(resp.Body)
	for tt := z.Next(); tt != html.ErrorToken; tt = z.Next() {
		switch tt {
		case html.TextToken:
			if field != nil {
				*field = string(z.Text())
				field = nil
			}
		case html.StartTagToken:
			tok := z.Token()
			attr := map[string]string{}
			for _, a := range tok.Attr {
				attr[a.Key] = a.Val
			}
			switch {
			case tok.Data == "h1" && attr["class"] == "name":
				field = &pg.name
			case tok.Data == "h1" && attr["class"] == "category":
				field = &pg.categoryHeading
			case tok.Data == "span" && attr["class"] == "sku":
				field = &pg.sku
			case tok.Data == "span" && attr["class"] == "stock":
				field = &pg.stock
			case tok.Data == "script" && attr["type"] == "application/ld+json":
				field = &pg.ldJSON
			case tok.Data == "a":
				ref, err := url.Parse(attr["href"])
				require.NoError(t, err)
				abs := resp.Request.URL.ResolveReference(ref)
				if attr["class"] == "next" {
					pg.nextHref = attr["href"]
				}
				if abs.Host == u.Host {
					pg.links = append(pg.links, abs.RequestURI())
				}
			}
		}
	}
	return pg
}

// parseEuro cleans a European price, "1 234,50" → 123450 cents.
func parseEuro(t *testing.T, s string) int64 {
	t.Helper()
	s = strings.NewReplacer(" ", "", "\u00a0", "", "\u202f", "", ",", ".").Replace(s)
	f, err := strconv.ParseFloat(s, 64)
	require.NoError(t, err, s)
	return int64(f*100 + 0.5)
}

func TestShopWalkFindsEverything(t *testing.T) {
	shop := NewShop(ShopConfig{Products: 57, PerPage: 5, Seed: 7, Categories: 4})
	srv := httptest.NewServer(shop)
	defer srv.Close()

	seen := map[string]bool{"/shop/": true}
	queue := []string{"/shop/"}
	pages := map[string]shopPage{}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		u, err := url.Parse(srv.URL + p)
		require.NoError(t, err)
		pg := scrapeShop(t, u)
		pages[p] = pg
		for _, l := range pg.links {
			if !seen[l] {
				seen[l] = true
				queue = append(queue, l)
			}
		}
	}

	var wantProducts, gotProducts, gotListings []string
	for _, pr := range shop.Products() {
		wantProducts = append(wantProducts, pr.Path)
	}
	for p := range pages {
		switch {
		case strings.HasPrefix(p, "/shop/p/"):
			gotProducts = append(gotProducts, p)
		case strings.HasPrefix(p, "/shop/c/"):
			gotListings = append(gotListings, p)
		default:
			assert.Equal(t, "/shop/", p)
		}
	}
	assert.ElementsMatch(t, wantProducts, gotProducts)
	assert.ElementsMatch(t, shop.ListingPaths(), gotListings)
	nListings, nProducts := 0, 0
	for _, c := range shop.Categories() {
		nListings += max(1, (len(c.Products)+4)/5)
		nProducts += len(c.Products)
		assert.Greater(t, c.Pages, 1, "every category paginated")
	}
	assert.Len(t, gotListings, nListings)
	assert.Equal(t, 57, nProducts)
	for p, n := range shop.AllHits() {
		assert.Equal(t, 1, n, p)
	}

	// The next links are relative, on every listing page but the last.
	for _, c := range shop.Categories() {
		for n := 1; n <= c.Pages; n++ {
			pg := pages[listingPath(c, n)]
			assert.Equal(t, c.Name, pg.categoryHeading)
			if n < c.Pages {
				assert.Equal(t, "?page="+strconv.Itoa(n+1), pg.nextHref)
			} else {
				assert.Empty(t, pg.nextHref)
			}
		}
	}

	// Product pages: the fields, and the price only in the JSON-LD.
	outOfStock, thousands := 0, 0
	for _, pr := range shop.Products() {
		pg := pages[pr.Path]
		assert.Equal(t, pr.Name, pg.name)
		assert.Equal(t, pr.SKU, pg.sku)
		var ld struct {
			Type   string `json:"@type"`
			SKU    string `json:"sku"`
			Offers struct{ Price, PriceCurrency string }
		}
		require.NoError(t, json.Unmarshal([]byte(pg.ldJSON), &ld), pg.ldJSON)
		assert.Equal(t, "Product", ld.Type)
		assert.Equal(t, pr.SKU, ld.SKU)
		assert.Equal(t, "EUR", ld.Offers.PriceCurrency)
		assert.Equal(t, pr.PriceCents, parseEuro(t, ld.Offers.Price), ld.Offers.Price)
		if strings.Contains(ld.Offers.Price, " ") {
			thousands++
		}
		if pr.InStock {
			assert.Equal(t, "in stock", pg.stock)
		} else {
			assert.Equal(t, "out of stock", pg.stock)
			assert.Zero(t, pr.ID%7)
			outOfStock++
		}
		assert.Contains(t, pg.links, "/shop/c/"+pr.Category+"/")
		assert.Len(t, pr.Related, 2)
		for _, r := range pr.Related {
			assert.Contains(t, pg.links, r)
		}
	}
	assert.Equal(t, 57/7, outOfStock)
	assert.NotZero(t, thousands, "some prices need the thousands separator cleaned")
}

func TestShopDetails(t *testing.T) {
	assert.Equal(t, "1 234,50", FormatEuro(123450))
	assert.Equal(t, "0,05", FormatEuro(5))
	assert.Equal(t, "12 345 678,90", FormatEuro(1234567890))
	assert.Equal(t, "999,00", FormatEuro(99900))

	a, b := NewShop(DefaultShopConfig()), NewShop(DefaultShopConfig())
	assert.Equal(t, a.Products(), b.Products(), "deterministic")
	assert.Len(t, a.Categories(), 3)
	assert.NotEqual(t, a.Products(), NewShop(ShopConfig{Products: 120, Seed: 2}).Products())

	srv := httptest.NewServer(a)
	defer srv.Close()
	status := func(p string) int {
		resp, err := http.Get(srv.URL + p)
		require.NoError(t, err)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	c := a.Categories()[0]
	assert.Equal(t, 200, status("/robots.txt"))
	assert.Equal(t, 200, status(c.Path+"?page=1"))
	for _, p := range []string{"/", "/api/items", "/page/1.html", c.Path + "?page=0", c.Path + "?page=" + strconv.Itoa(c.Pages+1),
		c.Path + "?page=x", "/shop/c/nope/", "/shop/c/" + c.Slug, "/shop/p/1-wrong.html"} {
		assert.Equal(t, 404, status(p), p)
	}

	// Hits count by path and query, exactly as requested.
	a.ResetHits()
	status(c.Path + "?page=2")
	status(c.Path + "?page=2")
	status(c.Path)
	assert.Equal(t, 2, a.Hits(c.Path+"?page=2"))
	assert.Equal(t, 1, a.Hits(c.Path))
	assert.Equal(t, map[string]int{c.Path + "?page=2": 2, c.Path: 1}, a.AllHits())
	a.ResetHits()
	assert.Empty(t, a.AllHits())
}

func getJSON(t *testing.T, u string, v any) int {
	t.Helper()
	resp, err := http.Get(u)
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	require.NoError(t, json.NewDecoder(resp.Body).Decode(v))
	return resp.StatusCode
}

func TestAPICursorChain(t *testing.T) {
	api := NewAPI(DefaultAPIConfig())
	srv := httptest.NewServer(api)
	defer srv.Close()

	var ids, pagesVisited []int
	next, lists := "/api/items", []string{}
	for next != "" {
		lists = append(lists, next)
		var page struct {
			Items []APIItem `json:"items"`
			Next  *string   `json:"next"`
		}
		require.Equal(t, 200, getJSON(t, srv.URL+next, &page))
		next = ""
		if page.Next != nil {
			next = *page.Next
			assert.NotEmpty(t, next)
		}
		pagesVisited = append(pagesVisited, len(page.Items))
		for _, it := range page.Items {
			ids = append(ids, it.ID)
			assert.Empty(t, it.Description, "the list has no description")
		}
	}
	assert.Equal(t, []int{20, 20, 20, 20, 15}, pagesVisited)
	assert.Equal(t, api.ListingPaths(), lists)
	want := api.Items()
	require.Len(t, ids, len(want))
	for i, it := range want {
		assert.Equal(t, it.ID, ids[i], "every item once, in order")
	}
	for _, p := range lists {
		assert.Equal(t, 1, api.Hits(p), p)
	}

	// Details.
	for _, it := range want[:5] {
		var got APIItem
		require.Equal(t, 200, getJSON(t, srv.URL+it.Path, &got))
		assert.Equal(t, it, got)
		assert.NotEmpty(t, got.Description)
		assert.NotEmpty(t, got.Tags)
	}

	// Bad cursors and unknown paths.
	valid := strings.TrimPrefix(lists[1], "/api/items?cursor=")
	tampered := []byte(valid)
	tampered[0] ^= 1
	for _, c := range []string{"", "!!!", "AAAA", string(tampered), NewAPI(APIConfig{Items: 95, Seed: 2}).cursor(20), api.cursor(95)} {
		var e struct{ Error string }
		assert.Equal(t, 400, getJSON(t, srv.URL+"/api/items?cursor="+url.QueryEscape(c), &e), c)
		assert.Equal(t, "bad cursor", e.Error)
	}
	for _, p := range []string{"/api/items/0", "/api/items/96", "/api/items/01", "/api/items/x", "/api/", "/shop/", "/"} {
		var e struct{ Error string }
		assert.Equal(t, 404, getJSON(t, srv.URL+p, &e), p)
		assert.Equal(t, "not found", e.Error)
	}
}

func TestLatencyHonoursCancel(t *testing.T) {
	for name, h := range map[string]http.Handler{
		"shop": NewShop(ShopConfig{Products: 3, Latency: time.Hour}),
		"api":  NewAPI(APIConfig{Items: 3, Latency: time.Hour}),
	} {
		t.Run(name, func(t *testing.T) {
			done := make(chan struct{})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				defer close(done)
				h.ServeHTTP(w, r)
			}))
			defer srv.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+map[string]string{"shop": "/shop/", "api": "/api/items"}[name], nil)
			_, err := http.DefaultClient.Do(req)
			require.ErrorIs(t, err, context.DeadlineExceeded)
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("the handler still sleeps after the request was cancelled")
			}
		})
	}
	// And a latency short enough is waited out.
	srv := httptest.NewServer(NewShop(ShopConfig{Products: 3, Latency: 30 * time.Millisecond}))
	defer srv.Close()
	start := time.Now()
	resp, err := http.Get(srv.URL + "/shop/")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode)
	assert.GreaterOrEqual(t, time.Since(start), 30*time.Millisecond)
}

func TestCombine(t *testing.T) {
	site, shop, api := New(Config{Pages: 10, Seed: 1}), NewShop(DefaultShopConfig()), NewAPI(DefaultAPIConfig())
	srv := httptest.NewServer(Combine(site, shop, api))
	defer srv.Close()
	body := func(p string) (int, string) {
		resp, err := http.Get(srv.URL + p)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, b := body("/")
	assert.Equal(t, 200, code)
	assert.Contains(t, b, "/page/0.html")
	_, b = body("/robots.txt")
	assert.Equal(t, RobotsTxt, b)
	code, _ = body(shop.ListingPaths()[1])
	assert.Equal(t, 200, code)
	code, _ = body(api.Items()[0].Path)
	assert.Equal(t, 200, code)
	assert.Equal(t, 1, site.Hits("/"))
	assert.Equal(t, 1, shop.Hits(shop.ListingPaths()[1]))
	assert.Equal(t, 1, api.Hits(api.Items()[0].Path))

	none := httptest.NewServer(Combine(nil, nil, nil))
	defer none.Close()
	for _, p := range []string{"/", "/shop/", "/api/items", "/robots.txt"} {
		resp, err := http.Get(none.URL + p)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 404, resp.StatusCode, p)
	}
	shopOnly := httptest.NewServer(Combine(nil, shop, nil))
	defer shopOnly.Close()
	resp, err := http.Get(shopOnly.URL + "/robots.txt")
	require.NoError(t, err)
	b2, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, ShopRobotsTxt, string(b2))
}
