package testsuite_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/crawl/demosite"
	"github.com/batoncrawl/baton/activities/crawler"
	"github.com/batoncrawl/baton/testsuite"
)

// webhook is a sink's receiver that checks signatures, fails the
// deliveries numbered in failing (1-based), and counts each item ID.
type webhook struct {
	secret []byte
	mu     sync.Mutex
	calls  int
	failed int
	ids    map[string]int
	values map[string]json.RawMessage
}

func (h *webhook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if !crawler.VerifySignature(h.secret, body, r.Header.Get(crawler.SignatureHeader)) {
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls++
	if h.calls >= 2 && h.calls <= 4 { // down for a while, after the first delivery
		h.failed++
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
		return
	}
	var items []crawler.StoredItem
	if err := json.Unmarshal(body, &items); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	for _, it := range items {
		h.ids[it.ID]++
		h.values[it.ID] = it.Value
	}
}

func (h *webhook) snapshot() (ids map[string]int, failed int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ids = make(map[string]int, len(h.ids))
	for k, v := range h.ids {
		ids[k] = v
	}
	return ids, h.failed
}

// The shop example's own worker binary on 2 Runners + 1 Backup: listing →
// detail labels through the real cluster, the Runner holding the batch
// SIGKILLed mid-crawl, and every product recorded exactly once (counted
// against what the site served and the store's counters), and delivered to
// a webhook at least once with stable IDs although the webhook failed for
// a while.
func TestOwnCrawlerShopSurvivesRunnerKill(t *testing.T) {
	shop := demosite.NewShop(demosite.ShopConfig{Products: 150, PerPage: 10, Seed: 3, Categories: 3, Latency: 20 * time.Millisecond})
	srv := httptest.NewServer(demosite.Combine(nil, shop, nil))
	t.Cleanup(srv.Close)
	hook := &webhook{secret: []byte("s3cret-hook"), ids: map[string]int{}, values: map[string]json.RawMessage{}}
	hookSrv := httptest.NewServer(hook)
	t.Cleanup(hookSrv.Close)
	secretFile := filepath.Join(t.TempDir(), "hook-secret")
	require.NoError(t, os.WriteFile(secretFile, hook.secret, 0o600))

	c := testsuite.NewCluster(t, 2, 1, testsuite.FastTimers, testsuite.WithWorkerBinary("./worker/examples/shop"))
	env := []string{"SHOP_WEBHOOK_URL=" + hookSrv.URL, "SHOP_WEBHOOK_SECRET_FILE=" + secretFile}
	for i := 1; i <= 3; i++ {
		c.Start(i, env...)
	}
	c.WaitElected(electTimeout)

	out, code := baton(c, "cluster")
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "shop@1.0.0", "baton cluster shows who carries what")
	out, code = baton(c, "crawl", "--crawler", "nope", srv.URL+"/shop/")
	assert.Equal(t, 2, code, out)
	assert.Contains(t, out, "shop 1.0.0", "the known crawlers are listed")
	out, code = baton(c, "crawl", "--crawler", "shop", "--set", "colour=red", srv.URL+"/shop/")
	assert.Equal(t, 2, code, out)
	assert.Contains(t, out, "keep_out_of_stock (bool)")

	p := startCrawl(c, "shop1", "--crawler", "shop", srv.URL+"/shop/", "--timers", "fast")
	js := c.OpenStore()
	testsuite.Eventually(t, taskTimeout, "20 items recorded", func() (bool, error) {
		st, err := js.Stats(context.Background(), "shop1")
		return st.Items >= 20, err
	})
	victim := 1
	if tk := c.Task(2); tk.Job != nil && tk.Pending() {
		victim = 2
	}
	c.Kill(victim)
	require.NoError(t, p.Wait(3*time.Minute), p.Logs())
	require.Equal(t, 0, p.ExitCode(), p.Logs())

	// Exactly once in the store: one item per product in stock, none
	// twice, matching the counter; each product page served at least once.
	var want []demosite.ShopProduct
	for _, prod := range shop.Products() {
		if prod.InStock {
			want = append(want, prod)
		}
		assert.GreaterOrEqual(t, shop.Hits(prod.Path), 1, prod.Path)
	}
	items, err := js.Items(context.Background(), "shop1", 0, 10000)
	require.NoError(t, err)
	bySKU := map[string]int{}
	ids := map[string]bool{}
	for _, it := range items {
		var prod struct {
			SKU        string `json:"sku"`
			PriceCents int64  `json:"price_cents"`
		}
		require.NoError(t, json.Unmarshal(it.Value, &prod))
		bySKU[prod.SKU]++
		assert.False(t, ids[it.ID], "item ID %s once", it.ID)
		ids[it.ID] = true
		assert.Equal(t, crawler.ItemID("shop1", it.URL, it.Index), it.ID)
	}
	for _, prod := range want {
		assert.Equal(t, 1, bySKU[prod.SKU], "product %s recorded exactly once", prod.SKU)
	}
	assert.Len(t, items, len(want))
	st, err := js.Stats(context.Background(), "shop1")
	require.NoError(t, err)
	assert.Equal(t, len(want), st.Items, "the counter agrees with the items")
	assert.Equal(t, 0, st.Failed)

	// At least once at the webhook, with the store's IDs, after failures.
	testsuite.Eventually(t, taskTimeout, "every item delivered to the webhook", func() (bool, error) {
		got, _ := hook.snapshot()
		for id := range ids {
			if got[id] == 0 {
				return false, nil
			}
		}
		return true, nil
	})
	got, failed := hook.snapshot()
	assert.Equal(t, 3, failed, "the webhook was down for three deliveries")
	for id := range got {
		assert.True(t, ids[id], "delivered ID %s is a stored item", id)
	}

	out, code = baton(c, "status", "shop1")
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "webhook")
	out, code = baton(c, "results", "shop1", "--items", "--format", "csv")
	require.Equal(t, 0, code, out)
	assert.Equal(t, len(want)+1, strings.Count(out, "\n"), "a CSV header and one row per item")
	assert.Contains(t, strings.SplitN(out, "\n", 2)[0], "price_cents")
}

// Handlers that panic, hang past their budget or fail are page failures
// recorded with their error; the worker lives on and the good page's item
// is recorded.
func TestOwnCrawlerFaultyHandlers(t *testing.T) {
	site := http.NewServeMux()
	site.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, "<html><body>page "+r.URL.Path+"</body></html>")
	})
	srv := httptest.NewServer(site)
	t.Cleanup(srv.Close)
	c := testsuite.NewCluster(t, 1, 0, testsuite.FastTimers, testsuite.WithWorkerBinary("./testsuite/testdata/faultycrawler"))
	w := c.Start(1)
	c.WaitElected(electTimeout)

	p := startCrawl(c, "faulty1", "--crawler", "faulty", srv.URL+"/", "--timers", "fast", "--retries", "0")
	require.NoError(t, p.Wait(2*time.Minute), p.Logs())
	require.Equal(t, 0, p.ExitCode(), p.Logs())
	js := c.OpenStore()
	errs := map[string]string{}
	for _, r := range readResults(t, js, "faulty1") {
		errs[strings.TrimPrefix(r.URL, srv.URL)] = r.Error
	}
	assert.Contains(t, errs["/panic"], "handler panicked")
	assert.Contains(t, errs["/hang"], "time budget")
	assert.Contains(t, errs["/fail"], "no price on the page")
	assert.Empty(t, errs["/ok"])
	st, err := js.Stats(context.Background(), "faulty1")
	require.NoError(t, err)
	assert.Equal(t, 1, st.Items)
	assert.Equal(t, 3, st.Failed)
	assert.False(t, w.Exited(), "the worker lives on")
	assert.Contains(t, w.Logs(), "crawler handler panicked")
	assert.Contains(t, w.Logs(), "goroutine", "the panic's stack is in the worker log")
}

// The JSON API example's own worker binary follows the API's next
// cursors through the real cluster; `baton results --items --follow`,
// started with the crawl, streams every item and ends with the job.
func TestOwnCrawlerJSONAPI(t *testing.T) {
	api := demosite.NewAPI(demosite.APIConfig{Items: 180, PerPage: 15, Seed: 5, Latency: 30 * time.Millisecond})
	srv := httptest.NewServer(demosite.Combine(nil, nil, api))
	t.Cleanup(srv.Close)
	c := testsuite.NewCluster(t, 1, 0, testsuite.FastTimers, testsuite.WithWorkerBinary("./worker/examples/jsonapi"))
	c.Start(1)
	c.WaitElected(electTimeout)

	p := startCrawl(c, "api1", "--crawler", "jsonapi", srv.URL+"/api/items", "--timers", "fast")
	out := filepath.Join(t.TempDir(), "items.jsonl")
	follow := testsuite.StartProcess(t, testsuite.ProcessSpec{Name: "baton-follow", Path: c.Starter,
		Args: append(c.StarterArgs(), "results", "api1", "--items", "--follow", "-o", out)})
	require.NoError(t, p.Wait(2*time.Minute), p.Logs())
	require.Equal(t, 0, p.ExitCode(), p.Logs())
	require.NoError(t, follow.Wait(time.Minute), "--follow ends when the job does: %s", follow.Logs())
	require.Equal(t, 0, follow.ExitCode(), follow.Logs())

	data, err := os.ReadFile(out)
	require.NoError(t, err)
	seen := map[int]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var it crawler.StoredItem
		require.NoError(t, json.Unmarshal([]byte(line), &it))
		var item struct {
			ID int `json:"id"`
		}
		require.NoError(t, json.Unmarshal(it.Value, &item))
		seen[item.ID]++
	}
	assert.Len(t, seen, len(api.Items()), "every item of the API")
	for id, n := range seen {
		assert.Equal(t, 1, n, "item %d once", id)
	}
	for _, path := range api.ListingPaths() {
		assert.Equal(t, 1, api.Hits(path), "listing page %s fetched once", path)
	}
}
