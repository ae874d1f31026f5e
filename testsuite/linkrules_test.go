package testsuite_test

import (
	"encoding/csv"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/crawl/demosite"
	"github.com/batoncrawl/baton/testsuite"
)

// End to end through the CLI: a crawl of the demo site with --follow-deny
// and two labels records only the allowed pages, each with its label and
// its label's fields (price exactly on the product pages, the title on the
// index), and the CSV export has the label column and the label fields.
func TestCrawlLinkRulesAndLabels(t *testing.T) {
	c := testsuite.NewCluster(t, 1, 0, testsuite.FastTimers)
	site := demosite.New(demosite.Config{Pages: 40, Seed: 11, BrokenLinks: 4, SlowPage: 50 * time.Millisecond})
	srv := httptest.NewServer(site)
	t.Cleanup(srv.Close)
	c.StartAll()
	c.WaitElected(electTimeout)

	out, code := baton(c, "crawl", "--id", "rules", srv.URL+"/", "--follow", "--depth", "100", "--max-pages", "0",
		"--follow-deny", `/private/|/missing/`,
		"--label", `index=/$`, "--label", `product=/page/\d+\.html$`,
		"--select", "heading=h1", "--select", "product:price=.price", "--select", "index:title=title", "--wait")
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "job rules completed")

	js := c.OpenStore()
	recs := readResults(t, js, "rules")
	product := regexp.MustCompile(`^/page/\d+\.html$`)
	var got []string
	labels := map[string]int{}
	for _, r := range recs {
		path := strings.TrimPrefix(r.URL, srv.URL)
		got = append(got, path)
		labels[r.Label]++
		assert.Empty(t, r.Error, path)
		switch {
		case path == "/":
			assert.Equal(t, "index", r.Label)
			assert.Equal(t, []string{"Demo shop"}, r.Fields["title"])
			assert.NotContains(t, r.Fields, "price")
		case product.MatchString(path):
			p, _ := site.Page(path)
			assert.Equal(t, "product", r.Label, path)
			assert.Equal(t, []string{p.Price}, r.Fields["price"], path)
			assert.Equal(t, []string{p.H1}, r.Fields["heading"], path)
		default:
			assert.Empty(t, r.Label, path)
			assert.NotContains(t, r.Fields, "price", "%s: price is a product page's field", path)
		}
		for _, l := range r.Links {
			assert.NotRegexp(t, `/private/|/missing/`, l, "%s: a denied link kept", path)
		}
	}
	var want []string
	for _, p := range site.Reachable(true) {
		if !strings.HasPrefix(p, "/missing/") {
			u, err := crawl.NormalizeURL(srv.URL + p)
			require.NoError(t, err)
			want = append(want, strings.TrimPrefix(u, srv.URL))
		}
	}
	slices.Sort(want)
	slices.Sort(got)
	assert.Equal(t, want, got, "exactly the allowed pages, once each")
	assert.Equal(t, 1, labels["index"])
	products := 0
	for _, p := range want {
		if product.MatchString(p) {
			products++
		}
	}
	assert.Equal(t, products, labels["product"])
	assert.Greater(t, products, 20)
	for _, p := range append(site.Missing(), site.Disallowed()...) {
		assert.Zero(t, site.Hits(p), "denied %s was fetched", p)
	}

	out, code = baton(c, "results", "rules", "--format", "csv")
	require.Equal(t, 0, code, out)
	rows, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	require.NoError(t, err, out)
	require.Len(t, rows, len(recs)+1)
	col := map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
	for _, h := range []string{"label", "heading", "price", "field_title"} { // title is the page's own column
		require.Contains(t, col, h, "CSV header %v", rows[0])
	}
	for _, r := range rows[1:] {
		path := strings.TrimPrefix(r[col["url"]], srv.URL)
		if product.MatchString(path) {
			assert.Equal(t, "product", r[col["label"]], path)
			assert.NotEmpty(t, r[col["price"]], path)
		} else {
			assert.Empty(t, r[col["price"]], path)
		}
	}
}
