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

// Following the next cursors from /api/items pushes every item once.
func TestAPICrawlerFollowsCursors(t *testing.T) {
	api := demosite.NewAPI(demosite.DefaultAPIConfig())
	srv := httptest.NewServer(api)
	defer srv.Close()
	c := NewCrawler()
	require.NoError(t, c.Validate())
	opts, err := c.DecodeOptions(nil)
	require.NoError(t, err)
	seen := map[int]int{}
	next := srv.URL + "/api/items"
	for pages := 0; next != ""; pages++ {
		require.Less(t, pages, 100)
		resp, err := http.Get(next)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		p := crawler.NewPage(context.Background(), crawler.Request{URL: next},
			crawler.Response{StatusCode: resp.StatusCode, Header: resp.Header, Body: body, FinalURL: next}, nil).WithOptions(opts)
		out, err := c.Run(context.Background(), p, nil)
		require.NoError(t, err)
		for _, it := range out.Items {
			var item Item
			require.NoError(t, json.Unmarshal(it.Value, &item))
			seen[item.ID]++
		}
		next = ""
		if len(out.Links) == 1 {
			next = out.Links[0].URL
		}
	}
	assert.Len(t, seen, len(api.Items()))
	for id, n := range seen {
		assert.Equal(t, 1, n, "item %d", id)
	}
}
