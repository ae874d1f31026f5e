package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/crawl/demosite"
	"github.com/batoncrawl/baton/activities/crawler"
)

// run fetches u and runs the crawler's handler of req's label on it.
func run(t *testing.T, c *crawler.Crawler, req crawler.Request, opts any) crawler.Outcome {
	t.Helper()
	resp, err := http.Get(req.URL)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	p := crawler.NewPage(context.Background(), req, crawler.Response{StatusCode: resp.StatusCode, Header: resp.Header, Body: body, FinalURL: req.URL}, nil).WithOptions(opts)
	out, err := c.Run(context.Background(), p, nil)
	require.NoError(t, err)
	return out
}

// The shop crawler, handler by handler, on the demo shop: categories,
// listings with their next button, products with cleaned prices.
func TestShopCrawlerHandlers(t *testing.T) {
	shop := demosite.NewShop(demosite.DefaultShopConfig())
	srv := httptest.NewServer(shop)
	defer srv.Close()
	c := NewCrawler()
	require.NoError(t, c.Validate())
	opts, err := c.DecodeOptions(nil)
	require.NoError(t, err)

	out := run(t, c, crawler.Request{URL: srv.URL + "/shop/"}, opts)
	require.Len(t, out.Links, len(shop.Categories()))
	assert.Equal(t, "listing", out.Links[0].Label)

	cat := shop.Categories()[0]
	out = run(t, c, crawler.Request{URL: srv.URL + cat.Path, Label: "listing", Data: json.RawMessage(`{"category":"` + cat.Slug + `","page":1}`)}, opts)
	var details, next int
	for _, l := range out.Links {
		switch l.Label {
		case "detail":
			details++
		case "listing":
			next++
			assert.Equal(t, srv.URL+cat.Path+"?page=2", l.URL)
		}
	}
	assert.Equal(t, shop.Config().PerPage, details)
	assert.Equal(t, 1, next)

	for _, prod := range shop.Products()[:8] {
		out = run(t, c, crawler.Request{URL: srv.URL + prod.Path, Label: "detail", Data: json.RawMessage(`{"category":"x"}`)}, opts)
		if !prod.InStock {
			assert.Empty(t, out.Items, "out of stock: skipped")
			assert.Equal(t, "out of stock", out.Skipped)
			continue
		}
		require.Len(t, out.Items, 1)
		var got Product
		require.NoError(t, json.Unmarshal(out.Items[0].Value, &got))
		assert.Equal(t, prod.PriceCents, got.PriceCents, prod.Path)
		assert.Equal(t, prod.SKU, got.SKU)
	}
}

func TestParseEuro(t *testing.T) {
	for in, want := range map[string]int64{"1 234,50": 123450, "7,5": 750, "12": 1200, "1\u00a0000,00": 100000} {
		got, err := ParseEuro(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, bad := range []string{"", "abc", "1,234", "-3,00"} {
		_, err := ParseEuro(bad)
		assert.Error(t, err, bad)
	}
}
