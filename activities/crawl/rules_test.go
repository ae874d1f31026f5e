package crawl

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rulesSite serves an HTML index linking to every kind of path, a
// product page, a JSON listing (also under text/plain) and a sitemap.
func rulesSite(t *testing.T) string {
	t.Helper()
	var base string
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/robots.txt":
			http.NotFound(w, r)
		case "/":
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, `<html><head><title>Index</title></head><body><h1>Shop</h1>
<a href="/page/1.html">1</a> <a href="page/../page/2.html?utm_source=x">2</a>
<a href="/private/1.html">p</a> <a href="/missing/1.html">m</a> <a href="/about.html">a</a>
<a href="https://elsewhere.invalid/page/3.html">off</a></body></html>`)
		case "/page/1.html":
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, `<html><head><title>Page 1</title></head><body><h1>Product 1</h1>
<span class="price">$5.00</span><span class="sku">S-1</span><a href="/">home</a></body></html>`)
		case "/api/items", "/api/items.txt":
			ct := "application/json"
			if strings.HasSuffix(r.URL.Path, ".txt") {
				ct = "text/plain"
			}
			w.Header().Set("Content-Type", ct)
			fmt.Fprintf(w, `{"items":[{"id":1,"url":"/api/items/1"},{"id":2,"url":"items/2"},{"id":3,"url":"/private/3"},
{"id":4,"url":7},{"id":5,"url":""},{"id":6,"url":"https://elsewhere.invalid/x"}],
"next":"/api/items?cursor=abc","pages":[["%s/p/a"],["/p/b"]]}`, base)
		case "/sitemap.xml":
			w.Header().Set("Content-Type", "application/xml")
			fmt.Fprintf(w, `<urlset><url><loc>%[1]s/page/1.html</loc></url><url><loc>%[1]s/private/2.html</loc></url></urlset>`, base)
		case "/private/sitemap.xml", "/index.xml":
			w.Header().Set("Content-Type", "application/xml")
			fmt.Fprintf(w, `<sitemapindex><sitemap><loc>%[1]s/private/sitemap.xml</loc></sitemap></sitemapindex>`, base)
		default:
			http.NotFound(w, r)
		}
	})
	base = srv.URL
	return srv.URL
}

func rulesOptions(base string) Options {
	o := testOptions()
	o.Follow, o.MaxDepth = true, 3
	o.AllowedDomains = []string{strings.TrimPrefix(base, "http://")}
	return o
}

// A link is followed when it matches no deny rule and, when there are
// allow rules, one of them; both match the normalised URL (dot segments
// resolved, tracking parameters dropped).
func TestFollowAllowDeny(t *testing.T) {
	t.Parallel()
	base := rulesSite(t)
	e := NewEngine()
	for _, tc := range []struct {
		name         string
		allow, deny  []string
		want         []string
		compileFirst bool
	}{
		{"no rules", nil, nil, []string{"/page/1.html", "/page/2.html", "/private/1.html", "/missing/1.html", "/about.html"}, false},
		{"deny", nil, []string{`/private/|/missing/`}, []string{"/page/1.html", "/page/2.html", "/about.html"}, true},
		{"two denies", nil, []string{`/private/`, `/missing/`}, []string{"/page/1.html", "/page/2.html", "/about.html"}, false},
		{"allow", []string{`/page/\d+\.html$`}, nil, []string{"/page/1.html", "/page/2.html"}, true},
		{"allow any", []string{`/page/1\.html$`, `about`}, nil, []string{"/page/1.html", "/about.html"}, false},
		{"deny wins", []string{`/page/`}, []string{`2\.html`}, []string{"/page/1.html"}, true},
		{"normalised: no utm_source", []string{`/page/2\.html$`}, nil, []string{"/page/2.html"}, false},
	} {
		o := rulesOptions(base)
		o.FollowAllow, o.FollowDeny = tc.allow, tc.deny
		if tc.compileFirst {
			var err error
			o, err = o.Compile()
			require.NoError(t, err)
		}
		p := e.Fetch(context.Background(), get(base+"/"), Auth{}, 0, o)
		require.True(t, p.OK(), p.Error)
		var want []string
		for _, w := range tc.want {
			want = append(want, base+w)
		}
		assert.Equal(t, want, p.Links, tc.name)
	}
}

// The follow rules apply to the pages a sitemap lists, not to the
// sitemaps an index lists (they are no pages of the results).
func TestFollowRulesOnSitemaps(t *testing.T) {
	t.Parallel()
	base := rulesSite(t)
	o := rulesOptions(base)
	o.FollowDeny = []string{`/private/`}
	e := NewEngine()
	p := e.FetchSitemap(context.Background(), get(base+"/sitemap.xml"), Auth{}, o)
	require.True(t, p.OK(), p.Error)
	assert.Equal(t, []string{base + "/page/1.html"}, p.Links)
	p = e.FetchSitemap(context.Background(), get(base+"/index.xml"), Auth{}, o)
	require.True(t, p.OK(), p.Error)
	assert.Equal(t, []string{base + "/private/sitemap.xml"}, p.Sitemaps)
}

// A page's label picks its label fields, added to every page's; a label
// field replaces an every-page field of the same name on its pages.
func TestLabelSelectors(t *testing.T) {
	t.Parallel()
	base := rulesSite(t)
	o := rulesOptions(base)
	o.Follow = false
	o.Selectors = map[string]string{"heading": "h1", "title": "title"}
	o.Labels = []LabelRule{{"index", `/$`}, {"product", `/page/\d+\.html$`}}
	o.LabelSelectors = map[string]map[string]string{
		"product": {"price": ".price", "heading": "xpath://span[@class='sku']"},
		"index":   {"count": "xpath:count(//a)"},
	}
	co, err := o.Compile()
	require.NoError(t, err)
	e := NewEngine()
	fetch := func(path, label string) Page {
		oo := co
		oo.Label = label
		p := e.Fetch(context.Background(), get(base+path), Auth{}, 0, oo)
		require.True(t, p.OK(), p.Error)
		return p
	}
	p := fetch("/page/1.html", "product")
	assert.Equal(t, map[string][]string{"price": {"$5.00"}, "heading": {"S-1"}, "title": {"Page 1"}}, p.Fields)
	p = fetch("/", "index")
	assert.Equal(t, map[string][]string{"count": {"6"}, "heading": {"Shop"}, "title": {"Index"}}, p.Fields)
	p = fetch("/page/1.html", "")
	assert.Equal(t, map[string][]string{"heading": {"Product 1"}, "title": {"Page 1"}}, p.Fields, "no label: every page's fields only")
	p = fetch("/page/1.html", "other")
	assert.Equal(t, map[string][]string{"heading": {"Product 1"}, "title": {"Page 1"}}, p.Fields, "a label with no fields")

	// Uncompiled options are compiled by the fetch: the same fields.
	raw := o
	raw.Label = "product"
	q := e.Fetch(context.Background(), get(base+"/page/1.html"), Auth{}, 0, raw)
	assert.Equal(t, fetch("/page/1.html", "product").Fields, q.Fields)

	// Only label fields: pages of other labels get no fields.
	o.Selectors = nil
	co, err = o.Compile()
	require.NoError(t, err)
	assert.Empty(t, fetch("/page/1.html", "").Fields)
	assert.Equal(t, []string{"$5.00"}, fetch("/page/1.html", "product").Fields["price"])

	assert.Equal(t, []string{"count", "heading", "price"}, o.FieldNames())
}

// LabelOf: the first rule whose pattern matches the normalised URL.
func TestLabelOf(t *testing.T) {
	t.Parallel()
	o := DefaultOptions()
	assert.Empty(t, o.LabelOf("http://h.test/page/1.html"), "no rules")
	o.Labels = []LabelRule{{"index", `^https?://[^/]+/$`}, {"product", `/page/\d+\.html$`}, {"page", `/page/`}, {"tracked", `utm_`}}
	co, err := o.Compile()
	require.NoError(t, err)
	for _, opts := range []Options{o, co} {
		for u, want := range map[string]string{
			"http://H.test":                           "index",
			"http://h.test/page/1.html":               "product",
			"http://h.test/page/x/../1.html#reviews":  "product",
			"http://h.test/page/1.html?utm_source=x":  "product",
			"http://h.test/page/list":                 "page",
			"http://h.test/other":                     "",
			"http://h.test/other?utm_medium=y":        "",
			"not a url":                               "",
			"http://h.test/page/1.html?b=2&a=1&sid=3": "page",
		} {
			assert.Equal(t, want, opts.LabelOf(u), u)
		}
	}
	o.KeepTrackingParams = true
	assert.Equal(t, "tracked", o.LabelOf("http://h.test/other?utm_medium=y"), "kept tracking parameters are matched")
}

// The links of a JSON response are its LinksJSON paths' strings,
// resolved against its URL and filtered as a page's links; they are
// found in JSON served as text/plain too, and only when following.
func TestJSONLinks(t *testing.T) {
	t.Parallel()
	base := rulesSite(t)
	o := rulesOptions(base)
	o.LinksJSON = []string{"items.#.url", "next", "pages"}
	o.FollowDeny = []string{`/private/`}
	e := NewEngine()
	want := []string{base + "/api/items/1", base + "/api/items/2", base + "/api/items?cursor=abc", base + "/p/a", base + "/p/b"}
	for _, path := range []string{"/api/items", "/api/items.txt"} {
		p := e.Fetch(context.Background(), get(base+path), Auth{}, 0, o)
		require.True(t, p.OK(), p.Error)
		assert.Equal(t, want, p.Links, path)
	}
	// With json: fields too: both.
	o.Selectors = map[string]string{"ids": "json:items.#.id"}
	p := e.Fetch(context.Background(), get(base+"/api/items"), Auth{}, 0, o)
	assert.Equal(t, want, p.Links)
	assert.Equal(t, []string{"1", "2", "3", "4", "5", "6"}, p.Fields["ids"])

	o.Follow = false
	p = e.Fetch(context.Background(), get(base+"/api/items"), Auth{}, 0, o)
	assert.Empty(t, p.Links, "not following")
	o.Follow = true
	p = e.Fetch(context.Background(), get(base+"/api/items"), Auth{}, 3, o)
	assert.Empty(t, p.Links, "at the depth limit")

	// An HTML page's links are its a[href], whatever LinksJSON.
	p = e.Fetch(context.Background(), get(base+"/page/1.html"), Auth{}, 0, o)
	assert.Equal(t, []string{base + "/"}, p.Links)
}

func TestJSONLinksBounded(t *testing.T) {
	t.Parallel()
	body := []byte(`{"a":["/1","/2",["/3",{"x":"/4"}],null,"/5"],"b":"/6"}`)
	base, err := url.Parse("http://h.test/api/")
	require.NoError(t, err)
	assert.Equal(t, []string{"http://h.test/1", "http://h.test/2", "http://h.test/3", "http://h.test/5", "http://h.test/6"},
		jsonLinksOf(body, []string{"a", "b"}, base, 100))
	assert.Equal(t, []string{"http://h.test/1", "http://h.test/2"}, jsonLinksOf(body, []string{"a", "b"}, base, 2))
	assert.Empty(t, jsonLinksOf(body, []string{"nope"}, base, 100))
}

// Validate names the bad rule, label, label field or JSON path.
func TestRulesValidate(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", MaxRuleBytes+1)
	many := make([]string, MaxFollowRules+1)
	for i := range many {
		many[i] = "x"
	}
	labels := func(l ...LabelRule) []LabelRule { return l }
	for _, tc := range []struct {
		edit func(*Options)
		want string
	}{
		{func(o *Options) { o.FollowDeny = []string{"/ok/", "("} }, `follow_deny[1]: invalid regexp "(": missing closing )`},
		{func(o *Options) { o.FollowAllow = []string{`a{2000}`} }, `follow_allow[0]: invalid regexp "a{2000}": invalid repeat count`},
		{func(o *Options) { o.FollowAllow = []string{""} }, `follow_allow[0]: empty pattern`},
		{func(o *Options) { o.FollowDeny = []string{long} }, fmt.Sprintf("follow_deny[0]: pattern of %d bytes, at most %d", MaxRuleBytes+1, MaxRuleBytes)},
		{func(o *Options) { o.FollowDeny = many }, fmt.Sprintf("follow_deny: %d rules, at most %d", MaxFollowRules+1, MaxFollowRules)},
		{func(o *Options) { o.Labels = labels(LabelRule{"a", "x"}, LabelRule{"b", "[z"}) }, `labels[1]: label b: invalid regexp "[z": missing closing ]`},
		{func(o *Options) { o.Labels = labels(LabelRule{"a b", "x"}) }, `labels[0]: label name "a b": use 1-64 letters`},
		{func(o *Options) { o.Labels = labels(LabelRule{"a:b", "x"}) }, `labels[0]: label name "a:b"`},
		{func(o *Options) { o.Labels = labels(LabelRule{"", "x"}) }, `labels[0]: label name ""`},
		{func(o *Options) {
			o.Labels = labels(LabelRule{"p", "x"})
			o.LabelSelectors = map[string]map[string]string{"p": {"price": "a["}}
		}, `label_selectors["p:price"]: invalid CSS selector`},
		{func(o *Options) {
			o.Labels = labels(LabelRule{"p", "x"})
			o.LabelSelectors = map[string]map[string]string{"q": {"price": ".price"}}
		}, `label_selectors["q:price"]: no label rule is named "q"`},
		{func(o *Options) {
			o.Labels = labels(LabelRule{"p", "x"})
			o.LabelSelectors = map[string]map[string]string{"p": {"price": " "}}
		}, `label_selectors["p:price"]: empty selector`},
		{func(o *Options) { o.LinksJSON = []string{"items.#.url", " "} }, `links_json[1]: empty path`},
		{func(o *Options) { o.LinksJSON = make([]string, MaxLinksJSON+1) }, fmt.Sprintf("links_json: %d paths, at most %d", MaxLinksJSON+1, MaxLinksJSON)},
	} {
		o := DefaultOptions()
		tc.edit(&o)
		err := o.Validate()
		require.Error(t, err, tc.want)
		assert.Contains(t, err.Error(), tc.want)
		var oe *OptionsError
		assert.True(t, errors.As(err, &oe), tc.want)
		_, cerr := o.Compile()
		assert.Equal(t, err, cerr, "Compile refuses what Validate does")
	}
	o := DefaultOptions()
	o.FollowAllow, o.FollowDeny = []string{`^https://shop\.test/`}, []string{`\?sort=`}
	o.Labels = labels(LabelRule{"product", `/p/\d+$`}, LabelRule{"product", `/item/`}, LabelRule{"list.v2_x-y", `/list/`})
	o.LabelSelectors = map[string]map[string]string{"product": {"price": ".price"}}
	o.LinksJSON = []string{"items.#.url"}
	assert.NoError(t, o.Validate())
}

// FollowLink (a user crawler's Enqueue) obeys the follow rules too, and
// compiled options match them without compiling a regexp per link.
func TestFollowLinkRules(t *testing.T) {
	o := DefaultOptions()
	o.AllowedDomains = []string{"h.test"}
	o.FollowAllow = []string{`/(page|list)/`}
	o.FollowDeny = []string{`/private/`, `\?sort=`}
	co, err := o.Compile()
	require.NoError(t, err)
	for _, opts := range []Options{o, co} {
		n, err := opts.FollowLink("http://h.test/page/1.html?utm_source=x#top")
		require.NoError(t, err)
		assert.Equal(t, "http://h.test/page/1.html", n)
		_, err = opts.FollowLink("http://h.test/page/private/1.html")
		assert.ErrorContains(t, err, `http://h.test/page/private/1.html matches follow_deny[0] "/private/"`)
		_, err = opts.FollowLink("http://h.test/list/?sort=asc")
		assert.ErrorContains(t, err, `matches follow_deny[1]`)
		_, err = opts.FollowLink("http://h.test/about")
		assert.ErrorContains(t, err, "matches no follow_allow rule")
		_, err = opts.FollowLink("http://other.test/page/1")
		assert.ErrorContains(t, err, "outside the allowed domains")
	}
	if raceEnabled {
		t.Skip("allocation counts differ under the race detector")
	}
	link := "http://h.test/page/1.html"
	compiled := testing.AllocsPerRun(100, func() { _, _ = co.FollowLink(link); _ = co.LabelOf(link) })
	uncompiled := testing.AllocsPerRun(100, func() { _, _ = o.FollowLink(link) })
	assert.Less(t, compiled*5, uncompiled, "compiled options compile no regexp per link (%v allocations, %v uncompiled)", compiled, uncompiled)
	// A copy per page (Label set) shares the compiled rules.
	page := co
	page.Label = "x"
	assert.Same(t, co.compiled, page.compiled)
}

// FieldNames keeps FieldOrder (the --select order), label fields
// included, each once; fields it does not name follow, sorted.
func TestFieldNamesInFieldOrder(t *testing.T) {
	o := DefaultOptions()
	o.Selectors = map[string]string{"title": "h1", "price": ".price", "zeta": ".z", "alpha": ".a"}
	o.Labels = []LabelRule{{Name: "product", Pattern: "/p/"}}
	o.LabelSelectors = map[string]map[string]string{"product": {"sku": ".sku", "price": ".p2"}}
	if got := fmt.Sprint(o.FieldNames()); got != "[alpha price sku title zeta]" {
		t.Errorf("no order: %s, want sorted", got)
	}
	o.FieldOrder = []string{"zeta", "sku", "price", "title"}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(o.FieldNames()); got != "[zeta sku price title alpha]" {
		t.Errorf("in field order: %s", got)
	}
	for _, tc := range []struct {
		order []string
		want  string
	}{
		{[]string{"title", "nope"}, `field_order[1]: "nope" is no field`},
		{[]string{"title", "title"}, `field_order[1]: "title" twice`},
	} {
		o.FieldOrder = tc.order
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %s", tc.order, err, tc.want)
		}
	}
}
