package testsuite_test

import (
	"context"
	"encoding/csv"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/crawl/demosite"
	"github.com/batoncrawl/baton/testsuite"
)

// End to end through the CLI: seeds from a file (written to the job store,
// not the workflow), the Sitemap: line of robots.txt, a User-Agent and a
// header of the job's, fields by CSS attribute, stored bodies; the job's
// stats block, CSV with a column per field, Parquet.
func TestCrawlControlsThroughTheCLI(t *testing.T) {
	c := testsuite.NewCluster(t, 1, 0, testsuite.FastTimers)
	site := demosite.New(demosite.Config{Pages: 30, Seed: 5})
	var mu sync.Mutex
	agents, tagged := map[string]int{}, 0
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		agents[r.Header.Get("User-Agent")]++
		if r.Header.Get("X-Crawl") == "ctl" {
			tagged++
		}
		mu.Unlock()
		switch r.URL.Path {
		case "/robots.txt":
			fmt.Fprintf(w, "%sSitemap: %s/sitemap.xml\n", demosite.RobotsTxt, srv.URL)
		case "/sitemap.xml":
			fmt.Fprintf(w, `<urlset><url><loc>%[1]s/page/20.html</loc></url><url><loc>%[1]s/copy/20.html</loc></url><url><loc>%[1]s/private/0.html</loc></url></urlset>`, srv.URL)
		case "/copy/20.html":
			r2 := r.Clone(r.Context())
			r2.URL.Path = "/page/20.html"
			site.ServeHTTP(w, r2)
		default:
			site.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	c.StartAll()
	c.WaitElected(electTimeout)

	seeds := filepath.Join(t.TempDir(), "seeds.txt")
	var lines []string
	for i := 0; i < 10; i++ {
		lines = append(lines, fmt.Sprintf("%s/page/%d.html", srv.URL, i))
	}
	require.NoError(t, os.WriteFile(seeds, []byte("# ten pages\n"+strings.Join(lines, "\n")+"\n"), 0o644))

	out, code := baton(c, "crawl", "--id", "ctl", "--seeds-file", seeds, "--sitemap", "robots", "--max-pages", "0",
		"--user-agent", "ctlbot/1.0", "--header", "X-Crawl: ctl", "--select", "price=.price", "--select", "hrefs=ul.links a@href",
		"--store-bodies", "--wait")
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "11 URLs queued in the job store")
	assert.Contains(t, out, "job ctl completed")
	for _, want := range []string{"stats:", "pages        12 (0 failed)", "status codes 200: 12", "robots.txt   1 refused",
		"duplicates   1", "sitemaps     2", "bodies kept  12"} {
		assert.Contains(t, out, want)
	}

	// The seeds are in the store, not in the spec the workflow carries.
	js := c.OpenStore()
	spec, err := js.Spec(context.Background(), "ctl")
	require.NoError(t, err)
	assert.Empty(t, spec.Seeds)
	assert.Equal(t, 11, spec.SeedsStored, "10 seeds and the seeds' robots.txt")
	assert.Zero(t, spec.Timers.UpdateTime, "no timers asked of the user: the group's apply")
	mu.Lock()
	assert.Equal(t, map[string]int{"ctlbot/1.0": agents["ctlbot/1.0"]}, agents, "every request with the job's User-Agent")
	assert.Equal(t, agents["ctlbot/1.0"], tagged, "every request with the job's header")
	mu.Unlock()
	assert.Zero(t, site.Hits("/private/0.html"))

	out, code = baton(c, "results", "ctl", "--format", "csv")
	require.Equal(t, 0, code, out)
	rows, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	require.NoError(t, err, out)
	require.Len(t, rows, 15, "a header, 12 pages and 2 sitemaps")
	head := rows[0]
	assert.Equal(t, []string{"price", "hrefs"}, head[len(head)-2:], "the fields in --select order")
	p3, _ := site.Page("/page/3.html")
	found := false
	for _, r := range rows[1:] {
		if r[0] == srv.URL+"/page/3.html" {
			found = true
			assert.Equal(t, p3.Price, r[len(r)-2])
			assert.Contains(t, r[len(r)-1], srv.URL+"/ | ", "hrefs, absolute, joined")
		}
	}
	assert.True(t, found, "page 3 in the CSV")

	pq := filepath.Join(t.TempDir(), "ctl.parquet")
	out, code = baton(c, "results", "ctl", "--format", "parquet", "-o", pq)
	require.Equal(t, 0, code, out)
	type row struct {
		URL   string   `parquet:"url"`
		Price []string `parquet:"price,list"`
	}
	f, err := os.Open(pq)
	require.NoError(t, err)
	defer f.Close()
	st, err := f.Stat()
	require.NoError(t, err)
	prs, err := parquet.Read[row](f, st.Size())
	require.NoError(t, err)
	assert.Len(t, prs, 14)

	out, code = baton(c, "results", "ctl", "--stats")
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "duplicates   1")

	// A bad seed file is refused before anything is written.
	bad := filepath.Join(t.TempDir(), "bad.txt")
	require.NoError(t, os.WriteFile(bad, []byte(srv.URL+"/a\nnot a url\n"), 0o644))
	out, code = baton(c, "crawl", "--id", "bad", "--seeds-file", bad)
	assert.Equal(t, 2, code, out)
	assert.Contains(t, out, bad+":2:")
	_, err = js.Spec(context.Background(), "bad")
	assert.Error(t, err, "nothing stored for a refused job")
}
