package jobs_test

import (
	"context"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/crawl/demosite"
	"github.com/batoncrawl/baton/activities/jobs"
)

// The runner labels the built-in crawler's links by the job's label
// rules, fetches each page with its label (which picks its fields) and
// records the label with the page.
func TestRunBatchLabelsBuiltinLinks(t *testing.T) {
	root := "http://example.test/"
	e := newBatchEnv(t, 2, []string{root}, func(s *jobs.Spec) {
		s.Options = crawl.DefaultOptions()
		s.Options.Labels = []crawl.LabelRule{{Name: "index", Pattern: `/$`}, {Name: "product", Pattern: `/p/\d+$`}}
		s.Options.LabelSelectors = map[string]map[string]string{"product": {"price": ".price"}}
	})
	e.pages.pages[root] = crawl.Page{URL: root, StatusCode: 200,
		Links: []string{"http://example.test/p/1", "http://example.test/about", "http://example.test/p/2"}}
	_, err := e.run()
	require.NoError(t, err)

	next := jobs.BatchID(e.spec.ID, 1)
	_, err = e.store.TakeBatch(e.ctx, e.spec.ID, next, 10)
	require.NoError(t, err)
	es, err := e.store.Entries(e.ctx, e.spec.ID, next)
	require.NoError(t, err)
	labels := map[string]string{}
	for _, be := range es {
		labels[be.URL] = be.Label
	}
	assert.Equal(t, map[string]string{"http://example.test/p/1": "product", "http://example.test/about": "", "http://example.test/p/2": "product"}, labels)

	_, err = e.store.Claim(e.ctx, e.spec.ID, next, e.runner, 1)
	require.NoError(t, err)
	_, err = e.br.RunBatch(e.ctx, jobs.BatchRun{Job: e.spec.ID, Batch: next, Runner: e.runner, Epoch: 1, Log: quiet()})
	require.NoError(t, err)
	for _, c := range e.pages.snapshot() {
		want := map[string]string{root: "", "http://example.test/p/1": "product", "http://example.test/p/2": "product"}[c.req.URL]
		assert.Equal(t, want, c.opts.Label, "fetched with its label: %s", c.req.URL)
	}
	recorded := map[string]string{}
	for _, p := range e.results() {
		recorded[p.URL] = p.Label
	}
	assert.Equal(t, map[string]string{root: "", "http://example.test/p/1": "product", "http://example.test/about": "",
		"http://example.test/p/2": "product"}, recorded, "the seed was queued without a label here (newBatchEnv)")
}

// The seeds, a seed file's and the pages a sitemap lists get the label
// the rules give them, unless --label NAME names the seeds' label.
func TestSeedsLabelledByTheRules(t *testing.T) {
	opts := crawl.DefaultOptions()
	opts.Labels = []crawl.LabelRule{{Name: "index", Pattern: `/$`}, {Name: "product", Pattern: `/p/\d+$`}}
	for _, tc := range []struct {
		seedLabel string
		want      map[string]string
	}{
		{"", map[string]string{"http://127.0.0.1:1/": "index", "http://127.0.0.1:1/p/1": "product", "http://127.0.0.1:1/x": ""}},
		{"start", map[string]string{"http://127.0.0.1:1/": "start", "http://127.0.0.1:1/p/1": "start", "http://127.0.0.1:1/x": "start"}},
	} {
		plan, err := jobs.Submission{ID: "j", Group: "g", Options: opts, SeedLabel: tc.seedLabel,
			Seeds: []string{"http://127.0.0.1:1/", "http://127.0.0.1:1/p/1", "http://127.0.0.1:1/x"}}.Build()
		require.NoError(t, err)
		sink := &seedSink{}
		_, err = plan.Queue(context.Background(), sink)
		require.NoError(t, err)
		got := map[string]string{}
		for _, e := range sink.entries {
			got[e.URL] = e.Label
		}
		assert.Equal(t, tc.want, got)
	}

	// A user crawler labels its links in code: label rules are refused.
	_, err := jobs.Submission{ID: "j", Group: "g", Options: opts, Crawler: "shop", Seeds: []string{"http://127.0.0.1:1/"}}.Build()
	assert.ErrorIs(t, err, jobs.ErrBadSpec)
	assert.ErrorContains(t, err, "options: labels: label rules are the built-in crawler's")
}

// A crawl of the demo site with a deny rule and two labels records only
// the allowed pages, each with its label and its label's fields; the
// pages a sitemap lists obey the rules and are labelled too.
func TestLinkRulesCrawl(t *testing.T) {
	site := demosite.New(demosite.Config{Pages: 30, Seed: 5, BrokenLinks: 4})
	srv := httptest.NewServer(site)
	t.Cleanup(srv.Close)
	st := openStore(t)
	opts := crawl.DefaultOptions()
	opts.Follow, opts.MaxDepth = true, 10
	opts.AllowedDomains = []string{strings.TrimPrefix(srv.URL, "http://")}
	opts.FollowDeny = []string{`/private/|/missing/`}
	opts.Labels = []crawl.LabelRule{{Name: "index", Pattern: `/$`}, {Name: "product", Pattern: `/page/\d+\.html$`}}
	opts.Selectors = map[string]string{"heading": "h1"}
	opts.LabelSelectors = map[string]map[string]string{"product": {"price": ".price"}, "index": {"title": "title"}}
	spec := jobs.Spec{ID: "rules", Group: testGroup, Seeds: []string{srv.URL + "/"}, Options: opts, BatchSize: 8}
	crawlJob(t, st, spec)

	product := regexp.MustCompile(`^/page/\d+\.html$`)
	var paths []string
	require.NoError(t, st.Results(testCtx(t), spec.ID, func(p jobs.PageRecord) error {
		path := strings.TrimPrefix(p.URL, srv.URL)
		paths = append(paths, path)
		assert.NotRegexp(t, `/private/|/missing/`, path, "a denied page recorded")
		assert.Empty(t, p.Error, path)
		switch {
		case path == "/":
			assert.Equal(t, "index", p.Label)
			assert.Equal(t, []string{"Demo shop"}, p.Fields["title"])
			assert.NotContains(t, p.Fields, "price")
		case product.MatchString(path):
			sp, _ := site.Page(path)
			assert.Equal(t, "product", p.Label, path)
			assert.Equal(t, []string{sp.Price}, p.Fields["price"], path)
			assert.Equal(t, []string{sp.H1}, p.Fields["heading"], path)
			assert.NotContains(t, p.Fields, "title", path)
		default:
			assert.Empty(t, p.Label, path)
			assert.NotContains(t, p.Fields, "price", path)
			assert.Contains(t, p.Fields, "heading", path)
		}
		for _, l := range p.Links {
			assert.NotRegexp(t, `/private/|/missing/`, l, "a denied link kept")
		}
		return nil
	}))
	var want []string
	for _, p := range site.Reachable(true) {
		if !strings.HasPrefix(p, "/missing/") {
			want = append(want, p)
		}
	}
	slices.Sort(paths)
	assert.Equal(t, want, paths, "every allowed page the site links, once")
	for _, m := range site.Missing() {
		assert.Zero(t, site.Hits(m), "a denied link fetched: %s", m)
	}
	for _, p := range site.Disallowed() {
		assert.Zero(t, site.Hits(p), p)
	}
}

// A crawl of the demo JSON API follows the links its list pages give at
// --links paths: every item's detail, labelled, with its label's field.
func TestJSONLinksCrawl(t *testing.T) {
	api := demosite.NewAPI(demosite.APIConfig{Items: 23, PerPage: 5, Seed: 2})
	srv := httptest.NewServer(demosite.Combine(nil, nil, api))
	t.Cleanup(srv.Close)
	st := openStore(t)
	opts := crawl.DefaultOptions()
	opts.Follow, opts.MaxDepth, opts.IgnoreRobots = true, 20, true
	opts.AllowedDomains = []string{strings.TrimPrefix(srv.URL, "http://")}
	opts.LinksJSON = []string{"items.#.url", "next"}
	opts.FollowDeny = []string{`/items/7$`}
	opts.Labels = []crawl.LabelRule{{Name: "item", Pattern: `/api/items/\d+$`}, {Name: "list", Pattern: `/api/items`}}
	opts.LabelSelectors = map[string]map[string]string{"item": {"description": "json:description"}, "list": {"ids": "json:items.#.id"}}
	spec := jobs.Spec{ID: "api", Group: testGroup, Seeds: []string{srv.URL + "/api/items"}, Options: opts, BatchSize: 10}
	crawlJob(t, st, spec)

	byPath := map[string]jobs.PageRecord{}
	require.NoError(t, st.Results(testCtx(t), spec.ID, func(p jobs.PageRecord) error {
		byPath[strings.TrimPrefix(p.URL, srv.URL)] = p
		return nil
	}))
	lists := 0
	for _, lp := range api.ListingPaths() {
		p, ok := byPath[lp]
		if assert.True(t, ok, "list page %s", lp) {
			assert.Equal(t, "list", p.Label)
			assert.NotEmpty(t, p.Fields["ids"])
			lists++
		}
	}
	for _, it := range api.Items() {
		p, ok := byPath[it.Path]
		if it.ID == 7 {
			assert.False(t, ok, "denied")
			continue
		}
		if assert.True(t, ok, it.Path) {
			assert.Equal(t, "item", p.Label)
			assert.Equal(t, []string{it.Description}, p.Fields["description"])
		}
	}
	assert.Len(t, byPath, lists+len(api.Items())-1, "the list pages and the items, nothing else")
	assert.Zero(t, api.Hits("/api/items/7"))
}
