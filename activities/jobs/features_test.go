package jobs_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/crawl/demosite"
	"github.com/batoncrawl/baton/activities/crawler"
	"github.com/batoncrawl/baton/activities/jobs"
)

// sitemapSite is the demo site with a robots.txt that names a sitemap
// index, the index, two sitemaps and a copy of /page/1.html at
// /copy/1.html (the same body: a duplicate).
func sitemapSite(t *testing.T) (*httptest.Server, *demosite.Site) {
	t.Helper()
	site := demosite.New(demosite.Config{Pages: 20, Seed: 3})
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/robots.txt":
			fmt.Fprintf(w, "%sSitemap: %s/sitemap_index.xml\n", demosite.RobotsTxt, srv.URL)
		case "/sitemap_index.xml":
			w.Header().Set("Content-Type", "application/xml")
			fmt.Fprintf(w, `<sitemapindex><sitemap><loc>%[1]s/sitemap-a.xml</loc></sitemap><sitemap><loc>%[1]s/sitemap-b.xml</loc></sitemap></sitemapindex>`, srv.URL)
		case "/sitemap-a.xml":
			fmt.Fprintf(w, `<urlset><url><loc>%[1]s/page/0.html</loc></url><url><loc>%[1]s/page/1.html</loc></url><url><loc>%[1]s/private/0.html</loc></url></urlset>`, srv.URL)
		case "/sitemap-b.xml":
			fmt.Fprintf(w, `<urlset><url><loc>%[1]s/copy/1.html</loc></url><url><loc>%[1]s/page/2.html</loc></url></urlset>`, srv.URL)
		case "/copy/1.html":
			r2 := r.Clone(r.Context())
			r2.URL.Path = "/page/1.html"
			site.ServeHTTP(w, r2)
		default:
			site.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, site
}

// crawlJob runs a job in the store with a real Engine until its frontier
// is empty, one batch after another.
func crawlJob(t *testing.T, st jobs.Store, spec jobs.Spec) {
	t.Helper()
	crawlJobOn(t, st, spec, crawl.NewEngine(), nil)
}

// crawlJobWith is crawlJob on a worker carrying crawlers.
func crawlJobWith(t *testing.T, st jobs.Store, spec jobs.Spec, crawlers map[string]*crawler.Crawler) {
	crawlJobOn(t, st, spec, crawl.NewEngine(), crawlers)
}

// crawlJobOn is crawlJob with the fetch engine e, on a worker carrying
// crawlers.
func crawlJobOn(t *testing.T, st jobs.Store, spec jobs.Spec, e *crawl.Engine, crawlers map[string]*crawler.Crawler) {
	t.Helper()
	ctx := testCtx(t)
	a := &jobs.Activities{Store: st}
	_, err := a.JobStart(ctx, spec)
	require.NoError(t, err)
	br := &jobs.BatchRunner{Store: st, Pages: e, Concurrency: 4, Crawlers: crawlers}
	for seq := 0; ; seq++ {
		require.Less(t, seq, 50, "the crawl does not end")
		id := jobs.BatchID(spec.ID, seq)
		b, err := st.TakeBatch(ctx, spec.ID, id, spec.BatchSize)
		require.NoError(t, err)
		if b.Size == 0 {
			return
		}
		_, err = st.Claim(ctx, spec.ID, id, "sc-crawler_1", 1)
		require.NoError(t, err)
		_, err = br.RunBatch(ctx, jobs.BatchRun{Job: spec.ID, Batch: id, Runner: "sc-crawler_1", Epoch: 1, Log: quiet()})
		require.NoError(t, err)
	}
}

func TestSitemapsDuplicatesAndStoredBodies(t *testing.T) {
	srv, site := sitemapSite(t)
	st := openStore(t)
	opts := crawl.DefaultOptions()
	opts.AllowedDomains = []string{strings.TrimPrefix(srv.URL, "http://")}
	opts.Selectors = map[string]string{"price": ".price", "links": "ul.links a@href"}
	spec := jobs.Spec{ID: "sitemaps", Group: testGroup, Sitemaps: []string{srv.URL + "/robots.txt"}, Options: opts,
		BatchSize: 3, Bodies: jobs.BodiesStore}
	crawlJob(t, st, spec)

	var pages, sitemaps []string
	recs := map[string]jobs.PageRecord{}
	require.NoError(t, st.Results(testCtx(t), spec.ID, func(p jobs.PageRecord) error {
		path := strings.TrimPrefix(p.URL, srv.URL)
		if p.Sitemap {
			sitemaps = append(sitemaps, path)
		} else {
			pages = append(pages, path)
		}
		recs[path] = p
		return nil
	}))
	slices.Sort(pages)
	slices.Sort(sitemaps)
	assert.Equal(t, []string{"/robots.txt", "/sitemap-a.xml", "/sitemap-b.xml", "/sitemap_index.xml"}, sitemaps)
	assert.Equal(t, []string{"/copy/1.html", "/page/0.html", "/page/1.html", "/page/2.html"}, pages,
		"the pages the sitemaps list, the one robots.txt refuses apart, and no followed link")
	assert.Zero(t, site.Hits("/private/0.html"))

	// One of the two identical bodies is the duplicate of the other.
	a, b := recs["/page/1.html"], recs["/copy/1.html"]
	require.NotEmpty(t, a.BodyHash)
	assert.Equal(t, a.BodyHash, b.BodyHash)
	dups := 0
	for _, p := range []jobs.PageRecord{a, b} {
		if p.DuplicateOf != "" {
			dups++
			assert.Contains(t, []string{a.URL, b.URL}, p.DuplicateOf)
			assert.NotEqual(t, p.URL, p.DuplicateOf)
		}
	}
	assert.Equal(t, 1, dups)
	assert.Empty(t, recs["/page/0.html"].DuplicateOf)

	// The body is kept, compressed, and reads back as served.
	p0, _ := site.Page("/page/0.html")
	assert.Equal(t, jobs.BodiesStore, recs["/page/0.html"].BodyRef)
	stored, err := st.Body(testCtx(t), spec.ID, srv.URL+"/page/0.html")
	require.NoError(t, err)
	body, err := jobs.DecompressBody(stored, 1<<20)
	require.NoError(t, err)
	assert.Contains(t, string(body), "<title>"+p0.Title+"</title>")
	assert.Equal(t, []string{p0.Price}, recs["/page/0.html"].Fields["price"])
	assert.Contains(t, recs["/page/0.html"].Fields["links"], srv.URL+"/", "@href made absolute")

	rep, err := jobs.BuildReport(testCtx(t), st, spec.ID)
	require.NoError(t, err)
	assert.Equal(t, 4, rep.Pages)
	assert.Equal(t, 4, rep.Sitemaps)
	assert.Equal(t, 1, rep.Refused, "/private/0.html")
	assert.Equal(t, 1, rep.Duplicates)
	assert.Equal(t, 4, rep.Bodies)
	assert.Equal(t, map[int]int{200: 4}, rep.StatusCodes)
	assert.Positive(t, rep.Bytes)
}

func TestBodiesDirectory(t *testing.T) {
	site := demosite.New(demosite.Config{Pages: 4, Seed: 1})
	srv := httptest.NewServer(site)
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	st := openStore(t)
	opts := crawl.DefaultOptions()
	opts.Follow, opts.MaxDepth = true, 1
	opts.AllowedDomains = []string{strings.TrimPrefix(srv.URL, "http://")}
	spec := jobs.Spec{ID: "bodies-dir", Group: testGroup, Seeds: []string{srv.URL + "/"}, Options: opts, BatchSize: 10,
		Bodies: jobs.BodiesDir, BodiesPath: dir}
	crawlJob(t, st, spec)
	n := 0
	require.NoError(t, st.Results(testCtx(t), spec.ID, func(p jobs.PageRecord) error {
		n++
		require.Equal(t, jobs.BodyFile(spec.ID, p.URL), p.BodyRef, p.URL)
		data, err := os.ReadFile(filepath.Join(dir, p.BodyRef))
		require.NoError(t, err)
		body, err := jobs.DecompressBody(data, 1<<20)
		require.NoError(t, err)
		assert.Contains(t, string(body), "<title>"+p.Title+"</title>")
		return nil
	}))
	assert.Equal(t, 5, n, "the index and its four pages")
	_, err := st.Body(testCtx(t), spec.ID, srv.URL+"/")
	assert.ErrorIs(t, err, jobs.ErrNoBody, "a directory job keeps nothing in the store")
}
